"""How the store reads DynamoDB's errors: a lost race, or worth trying again later."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from scheduler_core.adapters.dynamodb.table import is_contention


def error(code: str, status: int) -> ClientError:
    reply: Any = {"Error": {"Code": code, "Message": "x"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(reply, "Op")


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ProvisionedThroughputExceededException", 400),
        ("ThrottlingException", 400),
        ("TransactionConflictException", 400),
        ("InternalServerError", 500),
        ("500", 500),  # an error page instead of an error document
        ("ServiceUnavailable", 503),
    ],
)
def test_throttling_conflicts_and_server_errors_are_contention(code: str, status: int) -> None:
    assert is_contention(error(code, status))


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("ConditionalCheckFailedException", 400),
        ("ValidationException", 400),
        ("ResourceNotFoundException", 400),
    ],
)
def test_a_lost_race_or_a_bad_request_is_not_contention(code: str, status: int) -> None:
    assert not is_contention(error(code, status))
