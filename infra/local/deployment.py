"""Synthesize the CDK app (cached), start moto in server mode and deploy the template into
its CloudFormation the way `cdk deploy` does; then read back what was deployed.

Everything here is generic: functions, rules, event source mappings and API routes come
from the deployed stack, never from names the local cloud knows.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config

from infra.config import REPO_ROOT
from infra.local.functions import FunctionSpec, die_with_parent

REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local",
    "AWS_SESSION_TOKEN": "local",
}
BOOTSTRAP_QUALIFIER = "hnb659fds"  # CDK's default bootstrap qualifier
# A change to any of these means a new synthesis (the local cloud itself does not count).
_SOURCES = ("infra", "functions", "layers/core", "cdk.json", "layers/deps/requirements.txt")
_NOT_SOURCES = ("infra/local/",)
_FINGERPRINT = ".local-cloud-fingerprint"


def sources_fingerprint(root: Path = REPO_ROOT, context: Mapping[str, Any] | None = None) -> str:
    """What a synthesis depends on: the sources, the deps layer's build and the context
    given on top of cdk.json's."""
    digest = hashlib.sha256()
    if context:  # none: the same fingerprint as before context could be given
        digest.update(json.dumps(dict(context), sort_keys=True).encode())
    for source in _SOURCES:
        path = root / source
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            relative = file.relative_to(root).as_posix()
            if file.is_file() and "__pycache__" not in file.parts and not relative.startswith(_NOT_SOURCES):
                digest.update(relative.encode())
                digest.update(file.read_bytes())
    built = root / "layers/deps/python/.built"
    digest.update(str(built.stat().st_mtime_ns if built.exists() else 0).encode())
    return digest.hexdigest()


def synthesize(assembly_dir: Path, stack_name: str, context: Mapping[str, Any] | None = None) -> Path:
    """The stack's template in `assembly_dir`, synthesized only when the sources changed.
    `context` overrides cdk.json's context, as `cdk -c key=value` does."""
    fingerprint = sources_fingerprint(context=context)
    template = assembly_dir / f"{stack_name}.template.json"
    stamp = assembly_dir / _FINGERPRINT
    if template.exists() and stamp.exists() and stamp.read_text() == fingerprint:
        return template
    from infra.app import build_app  # jsii starts node: only when we really synthesize

    app, stack = build_app(outdir=str(assembly_dir), context=context)
    app.synth()
    stamp.write_text(fingerprint)
    return assembly_dir / stack.template_file


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(host: str, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class MotoServer:
    """moto in server mode, in its own process (its own GIL), on loopback."""

    def __init__(self, host: str, port: int) -> None:
        self.url = f"http://{host}:{port}"
        self._process = subprocess.Popen(
            [sys.executable, "-m", "infra.local.moto_process", "-H", host, "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent,  # started by the local cloud's starting thread
        )
        wait_for_port(host, port)

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()


class LocalAws:
    """boto3 clients for moto, with fake credentials: nothing can reach a real account."""

    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url
        self._session = boto3.session.Session(
            aws_access_key_id="local", aws_secret_access_key="local", region_name=REGION
        )
        self._config = Config(retries={"mode": "standard", "max_attempts": 3}, max_pool_connections=64)

    def client(self, service: str) -> Any:
        return self._session.client(service, endpoint_url=self.endpoint_url, config=self._config)  # type: ignore[call-overload]


def _zip_directory(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(directory.rglob("*")):
            if file.is_file():
                archive.write(file, file.relative_to(directory))
    return buffer.getvalue()


@dataclass
class Deployment:
    stack_name: str
    assembly_dir: Path
    template: dict[str, Any]
    assets: dict[str, Any]
    physical_ids: dict[str, str]  # logical id → physical id
    outputs: dict[str, str]

    def asset_dir(self, s3_key: Any) -> Path:
        """The cdk.out folder of the asset a resource's S3Key names (`<hash>.zip`)."""
        asset_hash = str(s3_key).removesuffix(".zip")
        source: str = self.assets["files"][asset_hash]["source"]["path"]
        return self.assembly_dir / source

    def resources_of(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == resource_type}


def deploy(aws: LocalAws, assembly_dir: Path, stack_name: str) -> Deployment:
    """Publish the assets and create the stack, as `cdk deploy` would in a bootstrapped account."""
    template = json.loads((assembly_dir / f"{stack_name}.template.json").read_text())
    assets = json.loads((assembly_dir / f"{stack_name}.assets.json").read_text())
    account = aws.client("sts").get_caller_identity()["Account"]
    s3 = aws.client("s3")
    bucket = f"cdk-{BOOTSTRAP_QUALIFIER}-assets-{account}-{REGION}"
    s3.create_bucket(Bucket=bucket)
    for asset in assets["files"].values():
        if asset["source"].get("packaging") != "zip":
            continue
        body = _zip_directory(assembly_dir / asset["source"]["path"])
        for destination in asset["destinations"].values():
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)
    aws.client("ssm").put_parameter(
        Name=f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version", Value="30", Type="String", Overwrite=True
    )
    cloudformation = aws.client("cloudformation")
    cloudformation.create_stack(
        StackName=stack_name, TemplateBody=json.dumps(template), Capabilities=["CAPABILITY_IAM"]
    )
    (stack,) = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    if stack["StackStatus"] != "CREATE_COMPLETE":
        raise RuntimeError(f"stack {stack_name} did not deploy into moto: {stack['StackStatus']}")
    summaries = cloudformation.get_paginator("list_stack_resources").paginate(StackName=stack_name)
    physical = {
        item["LogicalResourceId"]: item.get("PhysicalResourceId", "")
        for page in summaries
        for item in page["StackResourceSummaries"]
    }
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    return Deployment(stack_name, assembly_dir, template, assets, physical, outputs)


_ABI = re.compile(r"\.cpython-(\d+)-")


def runs_here(layer_python_dir: Path) -> bool:
    """False if the layer holds compiled modules for another CPython than this one (the deps
    layer is built for the Lambda runtime); this interpreter's own packages stand in for it."""
    here = f"{sys.version_info.major}{sys.version_info.minor}"
    for module in layer_python_dir.rglob("*.so"):
        match = _ABI.search(module.name)
        if match and match.group(1) != here:
            return False
    return True


def function_specs(aws: LocalAws, deployment: Deployment, concurrency: dict[str, int]) -> list[FunctionSpec]:
    """Each deployed function with its resolved environment, code and layers.
    `concurrency`: function ARN → how many instances may run at once."""
    lambda_client = aws.client("lambda")
    specs = []
    for logical_id, resource in deployment.resources_of("AWS::Lambda::Function").items():
        configuration = lambda_client.get_function_configuration(
            FunctionName=deployment.physical_ids[logical_id]
        )
        properties = resource["Properties"]
        layers: list[Path] = []
        skipped: list[Path] = []
        for layer in properties.get("Layers", []):
            layer_resource = deployment.template["Resources"][layer["Ref"]]
            python_dir = deployment.asset_dir(layer_resource["Properties"]["Content"]["S3Key"]) / "python"
            (layers if runs_here(python_dir) else skipped).append(python_dir)
        reserved = properties.get("ReservedConcurrentExecutions")
        specs.append(
            FunctionSpec(
                name=configuration["FunctionName"],
                arn=configuration["FunctionArn"],
                handler=configuration["Handler"],
                code_dir=deployment.asset_dir(properties["Code"]["S3Key"]),
                layer_dirs=tuple(layers),
                skipped_layers=tuple(skipped),
                environment=dict(configuration.get("Environment", {}).get("Variables", {})),
                timeout_seconds=int(configuration.get("Timeout", 3)),
                memory_mb=int(configuration.get("MemorySize", 128)),
                concurrency=int(reserved or concurrency.get(configuration["FunctionArn"], 0) or 8),
            )
        )
    return specs


def runtime_environment(endpoint_url: str) -> dict[str, str]:
    """The environment every function process starts from: Lambda's region variables, fake
    credentials and moto as the endpoint — never the caller's own AWS settings."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "TZ", "TMPDIR") if name in os.environ}
    return (
        keep
        | FAKE_CREDENTIALS
        | {
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL": endpoint_url,
            # No X-Ray daemon runs locally (as with `sam local`).
            "POWERTOOLS_TRACE_DISABLED": "true",
        }
    )
