"""SchedulerStack: the whole scheduler (DESIGN §1) in one CloudFormation stack."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from infra.api import Api
from infra.config import SchedulerConfig, output_key
from infra.dashboard import OperatorDashboard
from infra.function import shared_environment
from infra.job_store import JobStore
from infra.keys import StackKeys
from infra.layers import SharedLayers
from infra.observability import Alarms
from infra.poller import Poller
from infra.queues import SchedulerQueues
from infra.workers import Workers


class SchedulerStack(Stack):
    """Tables, queues, the poller, the worker and the API, wired as `config` says."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: SchedulerConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.keys = StackKeys(self, "Keys", customer_managed=config.customer_managed_keys)
        self.store = JobStore(self, "JobStore", capacity=config.table_capacity, keys=self.keys)
        self.queues = SchedulerQueues(
            self,
            "Queues",
            visibility_timeout_seconds=config.visibility_timeout_seconds,
            max_receive_count=config.max_receive_count,
            keys=self.keys,
        )
        self.layers = SharedLayers(self, "Layers")
        self.poller = Poller(
            self,
            "Poller",
            config=config,
            layers=self.layers,
            store=self.store,
            queues=self.queues,
            keys=self.keys,
        )
        self.workers = Workers(
            self,
            "Workers",
            config=config,
            layers=self.layers,
            store=self.store,
            queues=self.queues,
            keys=self.keys,
        )
        self.api = Api(
            self,
            "Api",
            config=config,
            layers=self.layers,
            store=self.store,
            queues=self.queues,
            keys=self.keys,
            worker_role_arn=self.workers.function.role.role_arn,
        )
        self.queues.take_sends_only_from(
            [
                self.api.function.role.role_arn,
                self.poller.function.role.role_arn,
                self.workers.function.role.role_arn,
            ],
            config.queue_sender_arns,
        )
        self.alarms = Alarms(
            self,
            "Alarms",
            queues=self.queues,
            functions={
                "api": self.api.function.function,
                "poller": self.poller.function.function,
                "worker": self.workers.function.function,
            },
            keys=self.keys,
        )
        self.dashboard = OperatorDashboard(
            self,
            "Dashboard",
            queues=self.queues,
            poller=self.poller.function.function,
            worker=self.workers.function.function,
            rest_api=self.api.rest_api,
            alarm_arns=self.alarms.alarm_arns,
        )
        CfnOutput(self, "ApiUrl", value=self.api.url, description="Base URL of the API; paths start at /v1")
        CfnOutput(
            self,
            output_key("WORKER_ROLE_ARN"),
            value=self.workers.function.role.role_arn,
            description="The role a tenant's execution role must trust (docs/security.md)",
        )
        CfnOutput(
            self,
            output_key("SECRETS_KEY_ID"),
            value=self.keys.secrets.key_arn,
            description="The KMS key of secret headers and signing keys (infra.migrate_tenants)",
        )
        CfnOutput(
            self,
            output_key("PER_SESSION_TENANT_ROLES"),
            value=json.dumps(list(config.per_session_tenant_roles)),
            description="Roles whose sessions are tenants each (infra.migrate_tenants)",
        )
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.alarms.topic.topic_arn,
            description="The SNS topic every alarm notifies; subscribe to it (docs/operations/alarms.md)",
        )
        CfnOutput(
            self,
            "DashboardName",
            value=self.dashboard.dashboard.dashboard_name,
            description="The operator's CloudWatch dashboard (docs/operations/alarms.md)",
        )
        # The settings all functions share (tables, queues, the DLQ, shards, timers), one output
        # each, so that operator tools (`make redrive`) act exactly as the functions do.
        for variable, value in shared_environment(config, self.store, self.queues).items():
            CfnOutput(
                self,
                output_key(variable),
                value=value,
                description=f"The functions' {variable} setting (read by make redrive)",
            )
