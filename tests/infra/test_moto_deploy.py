"""The synthesized template deploys into moto's CloudFormation, as the local cloud does it."""

from __future__ import annotations

import io
import json
import re
import warnings
import zipfile

import boto3
from moto import mock_aws

from infra.redrive import deployed_settings
from scheduler_core.composition import build_target_access
from scheduler_core.domain.target_spec import SnsTarget
from scheduler_core.domain.vocabulary import Priority
from scheduler_core.settings import Settings
from tests.infra.conftest import Synthesis

# Resource types moto's CloudFormation skips (with a warning), and why the local cloud
# does not need them: it reads their settings from the template itself.
SKIPPED_BY_MOTO = {
    "AWS::SQS::QueuePolicy": "TLS-only queue policies: moto has no transport to enforce",
    "AWS::ApiGateway::Stage": "the local cloud serves the API itself; logging settings are AWS-only",
    "AWS::ApiGateway::Account": "the account-level logging role is AWS-only",
    "AWS::ApiGateway::RequestValidator": "required parameters are part of each method in the template",
    "AWS::CloudWatch::Alarm": "alarms watch AWS metrics; nothing local emits them",
    "AWS::SNS::TopicPolicy": "the alarm topic's TLS-only, alarms-may-publish policy: no alarm runs locally",
}


def _empty_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w"):
        pass
    return buffer.getvalue()


def _create_stack(synthesis: Synthesis) -> list[warnings.WarningMessage]:
    """Deploy the synthesized template into moto (inside `mock_aws`) as `cdk deploy` would;
    the warnings moto gave."""
    template = synthesis.template.to_json()
    assets = json.loads(synthesis.template_path.with_name("ServerlessScheduler.assets.json").read_text())
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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName="ServerlessScheduler",
            TemplateBody=json.dumps(template),
            Capabilities=["CAPABILITY_IAM"],
        )
    return caught


def test_template_deploys_into_motos_cloudformation(synthesis: Synthesis) -> None:
    with mock_aws():
        caught = _create_stack(synthesis)
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        (stack,) = cloudformation.describe_stacks(StackName="ServerlessScheduler")["Stacks"]
        functions = boto3.client("lambda", region_name="us-east-1").list_functions()["Functions"]
        # What `make redrive` reads, resolved by a deployment.
        settings = deployed_settings(cloudformation, "ServerlessScheduler")
        sqs = boto3.client("sqs", region_name="us-east-1")
        redrive_targets = {
            json.loads(
                sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]["RedrivePolicy"]
            )["deadLetterTargetArn"]
            for url in (settings.queue_url(priority) for priority in Priority)
        }
        dlq_arn = sqs.get_queue_attributes(QueueUrl=settings.dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        table = boto3.client("dynamodb", region_name="us-east-1").describe_table(
            TableName=settings.jobs_table_name
        )["Table"]

    assert stack["StackStatus"] == "CREATE_COMPLETE"
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
    assert re.fullmatch(r"https://\w+\.execute-api\.us-east-1\.amazonaws\.com/prod/", outputs["ApiUrl"])
    assert redrive_targets == {dlq_arn}
    assert {index["IndexName"] for index in table["GlobalSecondaryIndexes"]} == {"due", "by_tenant"}
    assert (settings.shard_count, settings.resend_after_seconds, settings.run_retention_days) == (4, 60, 30)
    assert len(functions) == 3
    # Named by the stack, not by CloudFormation: the worker's deny and the api's check rely on it.
    names = {function["FunctionName"]: function for function in functions}
    assert set(names) == {f"ServerlessScheduler-{name}" for name in ("api", "poller", "worker")}
    # The api's target check reads what the deployment resolved: the stack's place and grants.
    api = Settings.from_env(names["ServerlessScheduler-api"]["Environment"]["Variables"])
    assert (api.stack_partition, api.stack_region, api.stack_account_id) == (
        "aws",
        "us-east-1",
        "123456789012",
    )
    assert api.function_name_prefix == "ServerlessScheduler-"
    assert (api.target_queue_arns, api.target_function_arns) == ((), ())  # no shared targets
    # The worker's role, resolved: what a tenant's execution role must trust.
    assert re.fullmatch(r"arn:aws:iam::123456789012:role/[\w+=,.@-]+", api.worker_role_arn)
    worker = Settings.from_env(names["ServerlessScheduler-worker"]["Environment"]["Variables"])
    assert worker.worker_role_arn == api.worker_role_arn == outputs["WorkerRoleArn"]
    topic = "arn:aws:sns:us-east-1:123456789012:t"
    role = "arn:aws:iam::123456789012:role/tenant-delivery"
    build_target_access(api).check(SnsTarget(type="SNS", topic_arn=topic, role_arn=role))
    assert _skipped(caught) == set(SKIPPED_BY_MOTO)


def test_the_alarm_topic_and_the_dashboard_deploy_and_are_outputs(synthesis: Synthesis) -> None:
    """moto creates the (KMS-encrypted) alarm topic and the dashboard, whose body resolves to
    JSON: the stack's AlarmTopicArn and DashboardName outputs name them."""
    with mock_aws():
        _create_stack(synthesis)
        (stack,) = boto3.client("cloudformation", region_name="us-east-1").describe_stacks(
            StackName="ServerlessScheduler"
        )["Stacks"]
        outputs = {output["OutputKey"]: output["OutputValue"] for output in stack["Outputs"]}
        topic = boto3.client("sns", region_name="us-east-1").get_topic_attributes(
            TopicArn=outputs["AlarmTopicArn"]
        )["Attributes"]
        body = boto3.client("cloudwatch", region_name="us-east-1").get_dashboard(
            DashboardName=outputs["DashboardName"]
        )["DashboardBody"]

    assert outputs["DashboardName"] == "ServerlessScheduler-us-east-1"
    assert topic["KmsMasterKeyId"].startswith("arn:aws:kms:us-east-1:123456789012:key/")
    assert (
        "arn:aws:cloudwatch:us-east-1:123456789012:alarm:ServerlessScheduler-DeadLetters"
        in json.loads(body)["widgets"][1]["properties"]["alarms"]
    )


def test_a_provisioned_template_deploys_its_tables_with_their_least_units(narrowed: Synthesis) -> None:
    """Context `table_capacity.mode: PROVISIONED` deploys too: moto takes the tables' and
    indexes' units and skips the auto scaling resources (it has no CloudFormation for them;
    the template's own tests check those)."""
    with mock_aws():
        caught = _create_stack(narrowed)
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        (stack,) = cloudformation.describe_stacks(StackName="ServerlessScheduler")["Stacks"]
        settings = deployed_settings(cloudformation, "ServerlessScheduler")
        table = boto3.client("dynamodb", region_name="us-east-1").describe_table(
            TableName=settings.jobs_table_name
        )["Table"]

    assert stack["StackStatus"] == "CREATE_COMPLETE"
    units = [
        table["ProvisionedThroughput"],
        *(index["ProvisionedThroughput"] for index in table["GlobalSecondaryIndexes"]),
    ]
    assert [(u["ReadCapacityUnits"], u["WriteCapacityUnits"]) for u in units] == [(5, 10)] * 3
    assert _skipped(caught) == set(SKIPPED_BY_MOTO) | {
        "AWS::ApplicationAutoScaling::ScalableTarget",
        "AWS::ApplicationAutoScaling::ScalingPolicy",
    }


def _skipped(caught: list[warnings.WarningMessage]) -> set[str]:
    return {
        match.group(1)
        for warning in caught
        if (match := re.search(r"Tried to parse (\S+) but it's not supported", str(warning.message)))
    }


def test_the_customer_managed_keys_deploy_and_encrypt_the_queues(synthesis: Synthesis) -> None:
    """moto's CloudFormation creates both keys, rotation on, and hands the data key to the
    queues (the local cloud runs this very deployment). It takes the tables' key too, but
    describes a table's encryption only when created through the API."""
    with mock_aws():
        _create_stack(synthesis)
        settings = deployed_settings(
            boto3.client("cloudformation", region_name="us-east-1"), "ServerlessScheduler"
        )
        kms = boto3.client("kms", region_name="us-east-1")
        keys = {
            key["KeyArn"]: kms.get_key_rotation_status(KeyId=key["KeyId"])["KeyRotationEnabled"]
            for key in kms.list_keys()["Keys"]
        }
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_keys = {
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])["Attributes"][
                "KmsMasterKeyId"
            ]
            for url in (settings.dlq_url, *(settings.queue_url(priority) for priority in Priority))
        }

    assert len(keys) == 3  # data, logs, secrets
    assert all(keys.values())
    (data_key,) = queue_keys
    assert data_key in keys
