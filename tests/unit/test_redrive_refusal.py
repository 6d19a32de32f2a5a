"""What `make redrive` and `scheduler dlq redrive` say when AWS refuses (infra.redrive.refusal)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from infra.redrive import refusal


def _error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "not authorized"}}, operation)


def test_a_send_the_queue_policy_refuses_says_to_list_the_operator() -> None:
    said = refusal(_error("AccessDenied", "SendMessageBatch"))
    assert "not authorized" in said
    assert "queue_sender_arns" in said


def test_other_refusals_are_said_as_aws_said_them() -> None:
    for error in (_error("AccessDenied", "ReceiveMessage"), _error("Throttling", "SendMessage")):
        said = refusal(error)
        assert "queue_sender_arns" not in said
        assert error.operation_name in said
