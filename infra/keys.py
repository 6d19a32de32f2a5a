"""The stack's customer managed KMS keys, behind context `customer_managed_keys`."""

from __future__ import annotations

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from infra.compliance import skip_checkov_check

AWS_KEYS_REASON = (
    "Context customer_managed_keys is false: the deployer chose encryption at rest under AWS's own keys."
)


class StackKeys(Construct):
    """`data` encrypts the tables, the queues and the functions' environment; `logs` the log
    groups, and lets CloudWatch Logs use it for this account's log groups only; `secrets`
    seals secret headers and webhook signing secrets (docs/security.md). All rotate yearly
    and outlive the stack, as the retained jobs table and log groups do.

    `logs` also encrypts the alarm topic (`infra.observability`): its policy lets CloudWatch
    alarms publish to a topic under it, which SNS's own AWS managed key does not.

    `data` and `logs` are None when context `customer_managed_keys` is false: AWS's own keys then encrypt
    everything at rest, as they do by default (no KMS charges, no key to administer), but for
    the alarm topic, which stays unencrypted (alarm names and states only).
    """

    def __init__(self, scope: Construct, construct_id: str, *, customer_managed: bool) -> None:
        super().__init__(scope, construct_id)
        # Whatever the switch: a tenant's secrets are sealed under a key of the stack's own,
        # which only the api (Encrypt) and the worker (Decrypt) may use.
        self.secrets = kms.Key(
            self,
            "Secrets",
            description="serverless-scheduler: secret headers and webhook signing secrets",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.data: kms.Key | None = None
        self.logs: kms.Key | None = None
        if not customer_managed:
            return
        self.data = kms.Key(
            self,
            "Data",
            description="serverless-scheduler: the tables, the run queues, the functions' environment",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.logs = kms.Key(
            self,
            "Logs",
            description="serverless-scheduler: the functions' and the API's log groups",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN,
        )
        stack = Stack.of(self)
        # CloudWatch Logs' own statement, as its documentation gives it, narrowed by the
        # encryption context to the log groups of this account and region.
        self.logs.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal(f"logs.{stack.region}.{stack.url_suffix}")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": stack.format_arn(
                            service="logs",
                            resource="log-group",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            )
        )
        # CloudWatch alarms publish to the alarm topic under this key: SNS makes and opens its
        # data keys as CloudWatch (AWS's statement for alarms and encrypted topics), here only
        # with the encryption context of a topic of this account and region.
        self.logs.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:sns:topicArn": stack.format_arn(
                            service="sns", resource="*", arn_format=ArnFormat.NO_RESOURCE_NAME
                        )
                    }
                },
            )
        )

    @property
    def customer_managed(self) -> bool:
        return self.data is not None

    def skip_if_aws_keys(self, construct: IConstruct, check_id: str) -> None:
        """Without customer managed keys, answer checkov's `check_id` (which asks for one) on
        `construct` with the deployer's choice."""
        if not self.customer_managed:
            skip_checkov_check(construct, check_id, AWS_KEYS_REASON)
