"""The synthesized template deploys into moto's CloudFormation, as the local cloud does it."""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile

import boto3
from moto import mock_aws

from tests.infra.conftest import Synthesis

# Resource types moto's CloudFormation skips (with a warning), and why the local cloud
# does not need them: it reads their settings from the template itself.
SKIPPED_BY_MOTO = {
    "AWS::SQS::QueuePolicy": "TLS-only queue policies: moto has no transport to enforce",
    "AWS::ApiGateway::Stage": "the local cloud serves the API itself; logging settings are AWS-only",
    "AWS::ApiGateway::Account": "the account-level logging role is AWS-only",
    "AWS::ApiGateway::RequestValidator": "required parameters are part of each method in the template",
    "AWS::CloudWatch::Alarm": "alarms watch AWS metrics; nothing local emits them",
}


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w"):
        pass
    return buffer.getvalue()


def test_template_deploys_into_motos_cloudformation(synthesis: Synthesis) -> None:
    template = synthesis.template.to_json()
    assets = json.loads(synthesis.template_path.with_name("ServerlessScheduler.assets.json").read_text())
    with mock_aws():
        # What `cdk bootstrap` and asset publishing provide in a real account.
        s3 = boto3.client("s3", region_name="us-east-1")
        bucket = "cdk-hnb659fds-assets-123456789012-us-east-1"
        s3.create_bucket(Bucket=bucket)
        for asset in assets["files"].values():
            for destination in asset["destinations"].values():
                s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=_empty_zip())
        boto3.client("ssm", region_name="us-east-1").put_parameter(
            Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String"
        )
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cloudformation.create_stack(
                StackName="ServerlessScheduler",
                TemplateBody=json.dumps(template),
                Capabilities=["CAPABILITY_IAM"],
            )
        (stack,) = cloudformation.describe_stacks(StackName="ServerlessScheduler")["Stacks"]
        functions = boto3.client("lambda", region_name="us-east-1").list_functions()["Functions"]

    assert stack["StackStatus"] == "CREATE_COMPLETE"
    (output,) = stack["Outputs"]
    assert output["OutputKey"] == "ApiUrl"
    assert re.fullmatch(r"https://\w+\.execute-api\.us-east-1\.amazonaws\.com/prod/", output["OutputValue"])
    assert len(functions) == 3
    skipped = {
        match.group(1)
        for warning in caught
        if (match := re.search(r"Tried to parse (\S+) but it's not supported", str(warning.message)))
    }
    assert skipped == set(SKIPPED_BY_MOTO)
