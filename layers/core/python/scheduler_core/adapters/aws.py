"""The one AWS client factory. Clients are built on first use (never at import time, so
moto can start first and tests can inject a session) and shared by the process.

Retries: botocore's standard mode in one place, for every client. `AWS_ENDPOINT_URL`
(honoured by botocore itself) points everything at moto in the local cloud.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_kms import KMSClient
    from mypy_boto3_lambda import LambdaClient
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_sns import SNSClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sts import STSClient

# AWS error codes that mean "slow down": the request may succeed if sent again later.
THROTTLING_CODES = frozenset(
    {"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "Throttling"}
)


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def is_throttling(error: ClientError) -> bool:
    return error_code(error) in THROTTLING_CODES


POOL_CONNECTIONS = 32  # the most claim_parallelism allows
# botocore's `max_attempts` counts retries: a call is made up to 6 times, standard mode
# waiting a random share of 1, 2, 4, 8 and 16 s before the retries (throttles, 5xx,
# timeouts). A cancelled transaction is not retried by it (see `transactions`).
RETRY_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5},
    connect_timeout=3,
    read_timeout=10,
    max_pool_connections=POOL_CONNECTIONS,
)


def client_config(threads: int) -> Config:
    """RETRY_CONFIG with a connection for each of `threads` callers, if they outnumber its pool."""
    if threads <= POOL_CONNECTIONS:
        return RETRY_CONFIG
    return RETRY_CONFIG.merge(Config(max_pool_connections=threads))


class AwsClients:
    def __init__(self, session: boto3.session.Session | None = None, config: Config = RETRY_CONFIG) -> None:
        self._session = session
        self._config = config
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def acting_as(self, access_key_id: str, secret_access_key: str, session_token: str) -> AwsClients:
        """Clients built as these are (the same region, the same botocore Config; the same
        AWS_ENDPOINT_URL) that act with other, temporary, credentials: an assumed role's."""
        region = (self._session or boto3.session.Session()).region_name
        session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
            region_name=region,
        )
        return AwsClients(session, self._config)

    def client(self, service: str, region: str | None = None) -> Any:
        """The process's client of `service`, in `region` (None: the session's own region).
        SNS topics, Lambda functions and event buses answer only in their own region."""
        key = f"{service}@{region or ''}"
        with self._lock:
            if key not in self._clients:
                session = self._session or boto3.session.Session()
                self._clients[key] = session.client(  # type: ignore[call-overload]
                    service, region_name=region, config=self._config
                )
            return self._clients[key]

    def dynamodb(self) -> DynamoDBClient:
        client: DynamoDBClient = self.client("dynamodb")
        return client

    def sqs(self) -> SQSClient:
        client: SQSClient = self.client("sqs")
        return client

    def sns(self, region: str | None = None) -> SNSClient:
        client: SNSClient = self.client("sns", region)
        return client

    def events(self, region: str | None = None) -> EventBridgeClient:
        client: EventBridgeClient = self.client("events", region)
        return client

    def logs(self) -> CloudWatchLogsClient:
        client: CloudWatchLogsClient = self.client("logs")
        return client

    def kms(self) -> KMSClient:
        client: KMSClient = self.client("kms")
        return client

    def lambda_(self, region: str | None = None) -> LambdaClient:
        client: LambdaClient = self.client("lambda", region)
        return client

    def iam(self) -> IAMClient:
        client: IAMClient = self.client("iam")
        return client

    def sts(self) -> STSClient:
        client: STSClient = self.client("sts")
        return client
