"""Signed webhooks, the Standard Webhooks way (https://www.standardwebhooks.com/). Pure.

Every HTTP delivery carries `webhook-id` (the run id: the same on every attempt, so a
receiver can drop repeats), `webhook-timestamp` (the attempt's time, epoch seconds) and
`webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the
tenant's secret (`whsec_<base64 key>`), space-separated when two secrets sign (a rotation).
HMAC is the standard library's; the tests verify deliveries with the `standardwebhooks`
package, the receivers' side.

A tenant's secrets (`SigningKeys`): the current one, and for `ROTATION_OVERLAP` after a
rotation the previous one too, so receivers can switch at their pace. A secret made for a
tenant before it asked for one (its first HTTP job) has never been shown: the first
rotation replaces it outright, as nobody can be verifying with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # Standard Webhooks: 24 to 64 bytes
ROTATION_OVERLAP = timedelta(hours=24)


def new_secret(key: bytes) -> str:
    """A secret as receivers are given it, from `SECRET_BYTES` random bytes."""
    return SECRET_PREFIX + base64.b64encode(key).decode()


def _key_of(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,` signature of a delivery."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key_of(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def webhook_headers(secrets: list[str], message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers of a delivery signed with each of `secrets` (none: unsigned)."""
    headers = {"webhook-id": message_id, "webhook-timestamp": str(timestamp)}
    if secrets:
        headers["webhook-signature"] = " ".join(signature(s, message_id, timestamp, body) for s in secrets)
    return headers


@dataclass(frozen=True)
class SigningKeys:
    """A tenant's signing secrets (plain text: only ever held sealed, see `to_json`)."""

    current: str
    created_at: datetime
    revealed: bool = False  # whether the current secret was ever handed to the tenant
    previous: str | None = None
    previous_until: datetime | None = None

    def signing(self, now: datetime) -> list[str]:
        """The secrets that sign a delivery at `now`: the current one first."""
        keep = self.previous is not None and self.previous_until is not None and now < self.previous_until
        return [self.current, self.previous] if keep and self.previous else [self.current]

    def rotated(self, secret: str, now: datetime) -> SigningKeys:
        """The keys once `secret` replaces the current one (handed to the tenant as it is).
        An unrevealed current secret is dropped; a revealed one signs on for the overlap (a
        previous one still overlapping is dropped: two rotations in a day keep the last two)."""
        if not self.revealed:
            return SigningKeys(current=secret, created_at=now, revealed=True)
        return replace(
            self,
            current=secret,
            created_at=now,
            revealed=True,
            previous=self.current,
            previous_until=now + ROTATION_OVERLAP,
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "current": self.current,
                "created_at": self.created_at.isoformat(),
                "revealed": self.revealed,
                "previous": self.previous,
                "previous_until": self.previous_until.isoformat() if self.previous_until else None,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> SigningKeys:
        data = json.loads(text)
        until = data.get("previous_until")
        return cls(
            current=data["current"],
            created_at=datetime.fromisoformat(data["created_at"]),
            revealed=bool(data.get("revealed")),
            previous=data.get("previous"),
            previous_until=datetime.fromisoformat(until) if until else None,
        )
