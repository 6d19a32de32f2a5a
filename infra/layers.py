"""The two Lambda layers every function shares: the domain (`scheduler_core`) and its deps."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config import (
    CORE_LAYER_DIR,
    DEPS_LAYER_BUILT,
    DEPS_LAYER_DIR,
    LAMBDA_ARCHITECTURE,
    LAMBDA_PYTHON_VERSION,
)

# Bytecode is built for this machine's Python, not the runtime's; the stamp and the
# requirements file are build inputs, not code.
PYTHON_ASSET_EXCLUDES = ["__pycache__", "*.pyc"]
DEPS_ASSET_EXCLUDES = [*PYTHON_ASSET_EXCLUDES, "requirements.txt", "python/.built", "python/bin"]


class MissingDepsLayerError(RuntimeError):
    """layers/deps/python has not been built."""


def lambda_runtime() -> lambda_.Runtime:
    """The Lambda runtime of `LAMBDA_PYTHON_VERSION`, as aws-cdk-lib knows it."""
    name = f"python{LAMBDA_PYTHON_VERSION}"
    for runtime in lambda_.Runtime.ALL:
        if runtime.name == name:
            return runtime
    raise ValueError(f"aws-cdk-lib offers no Lambda runtime {name}")


def lambda_architecture() -> lambda_.Architecture:
    """The functions' and layers' instruction set (`LAMBDA_ARCHITECTURE`)."""
    known = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}
    return known[LAMBDA_ARCHITECTURE]


class SharedLayers(Construct):
    """`core` (layers/core/python/scheduler_core) and `deps` (built by infra.build_deps_layer)."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        if not DEPS_LAYER_BUILT.exists():
            raise MissingDepsLayerError(
                f"{DEPS_LAYER_BUILT.parent} is not built: run `make install` "
                "(or `python -m infra.build_deps_layer`) before synthesizing."
            )
        runtime = lambda_runtime()
        self.core = lambda_.LayerVersion(
            self,
            "Core",
            code=lambda_.Code.from_asset(str(CORE_LAYER_DIR), exclude=PYTHON_ASSET_EXCLUDES),
            compatible_runtimes=[runtime],
            compatible_architectures=[lambda_architecture()],
            description="scheduler_core: the scheduler's domain, shared by every function",
        )
        self.deps = lambda_.LayerVersion(
            self,
            "Deps",
            code=lambda_.Code.from_asset(str(DEPS_LAYER_DIR), exclude=DEPS_ASSET_EXCLUDES),
            compatible_runtimes=[runtime],
            compatible_architectures=[lambda_architecture()],
            description="Third-party packages of layers/deps/requirements.txt",
        )

    @property
    def all(self) -> list[lambda_.ILayerVersion]:
        """Both layers, in the order the functions attach them."""
        return [self.core, self.deps]
