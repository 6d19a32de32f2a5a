"""Signed webhooks (domain/webhooks.py) as receivers check them: with the `standardwebhooks`
package, not with our own code."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from scheduler_core.domain.webhooks import ROTATION_OVERLAP, SigningKeys, new_secret, webhook_headers

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)
OLD = new_secret(b"o" * 32)
NEW = new_secret(b"n" * 32)
BODY = json.dumps({"report": "daily"}).encode()


def now_seconds() -> int:
    return int(datetime.now(UTC).timestamp())  # the package checks the timestamp against its clock


def test_a_secret_is_whsec_and_32_random_bytes() -> None:
    secret = new_secret(bytes(range(32)))

    assert secret.startswith("whsec_")
    assert base64.b64decode(secret.removeprefix("whsec_")) == bytes(range(32))


def test_a_signed_delivery_verifies_with_the_standardwebhooks_package() -> None:
    headers = webhook_headers([NEW], "job-1:1893490200000", now_seconds(), BODY)

    assert Webhook(NEW).verify(BODY, headers) == {"report": "daily"}
    assert headers["webhook-id"] == "job-1:1893490200000"


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda h, b: (h | {"webhook-id": "job-1:other"}, b), id="another id"),
        pytest.param(lambda h, b: (h, b + b" "), id="another body"),
        pytest.param(
            lambda h, b: (h | {"webhook-timestamp": str(int(h["webhook-timestamp"]) - 1)}, b), id="time"
        ),
    ],
)
def test_a_tampered_delivery_does_not_verify(tamper) -> None:
    headers, body = tamper(webhook_headers([NEW], "job-1:1", now_seconds(), BODY), BODY)

    with pytest.raises(WebhookVerificationError):
        Webhook(NEW).verify(body, headers)


def test_another_tenants_secret_does_not_verify() -> None:
    headers = webhook_headers([OLD], "job-1:1", now_seconds(), BODY)

    with pytest.raises(WebhookVerificationError):
        Webhook(NEW).verify(BODY, headers)


def test_during_a_rotation_both_secrets_sign_and_either_verifies() -> None:
    keys = SigningKeys(current=OLD, created_at=NOW, revealed=True).rotated(NEW, NOW)
    headers = webhook_headers(keys.signing(NOW), "job-1:1", now_seconds(), BODY)

    assert len(headers["webhook-signature"].split(" ")) == 2
    Webhook(NEW).verify(BODY, headers)
    Webhook(OLD).verify(BODY, headers)


def test_the_previous_secret_stops_signing_24_hours_after_the_rotation() -> None:
    keys = SigningKeys(current=OLD, created_at=NOW, revealed=True).rotated(NEW, NOW)

    assert keys.signing(NOW + ROTATION_OVERLAP - timedelta(seconds=1)) == [NEW, OLD]
    assert keys.signing(NOW + ROTATION_OVERLAP) == [NEW]


def test_a_secret_never_shown_is_replaced_outright_by_the_first_rotation() -> None:
    made = SigningKeys(current=OLD, created_at=NOW)  # made at the tenant's first HTTP job

    rotated = made.rotated(NEW, NOW)

    assert rotated.signing(NOW) == [NEW]
    assert rotated.revealed


def test_a_second_rotation_within_a_day_keeps_the_last_two() -> None:
    third = new_secret(b"t" * 32)
    keys = SigningKeys(current=OLD, created_at=NOW, revealed=True).rotated(NEW, NOW)

    again = keys.rotated(third, NOW + timedelta(hours=1))

    assert again.signing(NOW + timedelta(hours=1)) == [third, NEW]


def test_keys_round_trip_through_their_sealed_text() -> None:
    keys = SigningKeys(current=OLD, created_at=NOW, revealed=True).rotated(NEW, NOW)

    assert SigningKeys.from_json(keys.to_json()) == keys


def test_without_a_secret_a_delivery_carries_its_id_and_time_unsigned() -> None:
    headers = webhook_headers([], "job-1:1", 1_800_000_000, BODY)

    assert headers == {"webhook-id": "job-1:1", "webhook-timestamp": "1800000000"}
