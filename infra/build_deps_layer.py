"""Build the deps layer: install layers/deps/requirements.txt for the Lambda platform, without Docker.

Run as `python -m infra.build_deps_layer` (`make install` does). pip picks the manylinux
wheels of the Lambda runtime's CPython version, so nothing is compiled here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from infra.config import DEPS_LAYER_BUILT, DEPS_LAYER_PLATFORM, DEPS_REQUIREMENTS, LAMBDA_PYTHON_VERSION

# The Lambda runtime ships boto3 with these. A layer comes first on sys.path, so a copy
# here (aws-xray-sdk pulls in botocore) would pair the runtime's boto3 with a foreign
# botocore: leave them to the runtime.
RUNTIME_PROVIDED = ("boto3", "botocore", "s3transfer", "jmespath", "urllib3")


def pip_command(target: str) -> list[str]:
    """The pip invocation that installs the requirements for Lambda's CPython on the functions'
    architecture (`DEPS_LAYER_PLATFORM`)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--platform",
        DEPS_LAYER_PLATFORM,
        "--implementation",
        "cp",
        "--python-version",
        LAMBDA_PYTHON_VERSION,
        "--only-binary=:all:",
        # Bytecode compiled here would be for this interpreter, not the Lambda runtime's.
        "--no-compile",
        "--target",
        target,
        "-r",
        str(DEPS_REQUIREMENTS),
    ]


def prune_runtime_provided(target: Path) -> None:
    """Remove the packages the Lambda runtime already has, and pip's console scripts."""
    for name in RUNTIME_PROVIDED:
        shutil.rmtree(target / name, ignore_errors=True)
        for dist_info in target.glob(f"{name}-*.dist-info"):
            shutil.rmtree(dist_info)
    shutil.rmtree(target / "bin", ignore_errors=True)


def build_deps_layer() -> None:
    """Install into layers/deps/python and touch its `.built` stamp."""
    target = DEPS_LAYER_BUILT.parent
    # pip --target never removes a package that requirements.txt no longer names.
    shutil.rmtree(target, ignore_errors=True)
    result = subprocess.run(pip_command(str(target)), check=False)
    if result.returncode != 0:
        raise SystemExit(
            f"pip could not install {DEPS_REQUIREMENTS} as wheels for CPython {LAMBDA_PYTHON_VERSION} "
            f"on {DEPS_LAYER_PLATFORM}. If a package has no wheel for that version yet, set "
            "LAMBDA_PYTHON_VERSION in infra/config.py to the previous Lambda runtime."
        )
    prune_runtime_provided(target)
    DEPS_LAYER_BUILT.touch()
    print(f"deps layer built for python{LAMBDA_PYTHON_VERSION} in {target}")


if __name__ == "__main__":
    build_deps_layer()
