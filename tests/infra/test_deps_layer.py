"""The third-party layer, as `make install` built it for the Lambda platform."""

from __future__ import annotations

from infra.build_deps_layer import RUNTIME_PROVIDED, pip_command
from infra.config import DEPS_LAYER_BUILT, LAMBDA_PYTHON_VERSION


def test_the_layer_is_built_from_manylinux_wheels_for_the_lambda_python() -> None:
    command = " ".join(pip_command("/tmp/layer"))
    assert "--platform manylinux2014_aarch64" in command  # the functions run on arm64
    assert f"--python-version {LAMBDA_PYTHON_VERSION}" in command
    assert "--only-binary=:all:" in command


def test_the_layer_leaves_boto3_and_botocore_to_the_runtime() -> None:
    site = DEPS_LAYER_BUILT.parent
    assert DEPS_LAYER_BUILT.exists(), "run `make install` first"
    shipped = {path.name for path in site.iterdir()}
    assert not {name for name in RUNTIME_PROVIDED if name in shipped}
    assert not [name for name in shipped if name.split("-")[0] in RUNTIME_PROVIDED]


def test_binary_modules_in_the_layer_are_for_the_lambda_cpython() -> None:
    tag = f"cpython-{LAMBDA_PYTHON_VERSION.replace('.', '')}-aarch64-linux-gnu"
    binaries = list((DEPS_LAYER_BUILT.parent / "pydantic_core").glob("*.so"))
    assert binaries
    assert all(tag in binary.name for binary in binaries)


def test_the_layer_has_what_the_functions_import() -> None:
    site = DEPS_LAYER_BUILT.parent
    for package in (
        "aws_lambda_powertools",
        "croniter",
        "pydantic",
        "pydantic_core",
        "aws_xray_sdk",
        "tzdata",
    ):
        assert (site / package).is_dir(), package
