"""Each tenant's webhook signing secrets (domain/webhooks.py): made, rotated and handed out
once by the API; read (sealed, opened with KMS) by the worker to sign deliveries.

- `rotate` (POST /v1/signing-secrets) makes a new secret and returns it: the only time it is
  shown. The write is conditioned on the version read (two rotations at once: one wins, the
  other reads again and rotates after it).
- `ensure` (a tenant's first job or workflow with an HTTP target) makes a secret nobody has
  seen if the tenant has none, so that every delivery is signed; the tenant's first
  rotation replaces it outright.
- `signing` (the worker) the secrets that sign a tenant's deliveries now, kept per tenant
  for `CACHE_FOR`: a rotation reaches deliveries within that, while the old secret goes
  on signing for 24 hours, so no receiver sees a gap.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from scheduler_core.domain.clock import Clock
from scheduler_core.domain.errors import Conflict
from scheduler_core.domain.webhooks import SECRET_BYTES, SigningKeys, new_secret
from scheduler_core.observability import logger
from scheduler_core.ports import SealedSigningKeys, Secrets, SigningKeyRecords

CACHE_FOR = timedelta(seconds=60)
WRITE_TRIES = 5


def signing_context(tenant: str) -> dict[str, str]:
    """What a tenant's signing keys are sealed under."""
    return {"purpose": "webhook-signing-keys", "tenant": tenant}


class SigningSecrets:
    def __init__(
        self,
        records: SigningKeyRecords,
        secrets: Secrets,
        clock: Clock,
        random_bytes: Callable[[int], bytes] = os.urandom,
    ) -> None:
        self._records = records
        self._secrets = secrets
        self._clock = clock
        self._random = random_bytes
        self._known: set[str] = set()  # tenants seen with keys (keys are never removed)
        self._cache: dict[str, tuple[datetime, SigningKeys | None]] = {}
        self._lock = threading.Lock()

    def _open(self, tenant: str, stored: SealedSigningKeys) -> SigningKeys:
        return SigningKeys.from_json(self._secrets.unseal(stored.sealed, signing_context(tenant)))

    def _write(self, tenant: str, keys: SigningKeys, version: int, expected: int | None) -> bool:
        sealed = SealedSigningKeys(
            sealed=self._secrets.seal(keys.to_json(), signing_context(tenant)),
            version=version,
            created_at=keys.created_at,
            previous_until=keys.previous_until if keys.previous else None,
        )
        return self._records.put_signing_keys_if_unchanged(tenant, sealed, expected)

    def rotate(self, tenant: str) -> dict[str, Any]:
        """A new signing secret for `tenant`, returned this once."""
        for _ in range(WRITE_TRIES):
            now = self._clock.now()
            stored = self._records.get_signing_keys(tenant)
            secret = new_secret(self._random(SECRET_BYTES))
            if stored is None:
                keys = SigningKeys(current=secret, created_at=now, revealed=True)
            else:
                keys = self._open(tenant, stored).rotated(secret, now)
            if self._write(
                tenant, keys, (stored.version + 1) if stored else 1, stored.version if stored else None
            ):
                logger.info("signing secret rotated", extra={"tenant": tenant})
                return {
                    "secret": secret,
                    "created_at": now.isoformat(),
                    "previous_expires_at": keys.previous_until.isoformat() if keys.previous_until else None,
                }
        raise Conflict("the signing secret is being rotated by other requests; try again")

    def describe(self, tenant: str) -> dict[str, Any]:
        """What may be shown of a tenant's secrets: when made, and until when the previous
        one signs too. Never a secret."""
        stored = self._records.get_signing_keys(tenant)
        if stored is None:
            return {"created_at": None, "previous_expires_at": None}
        now = self._clock.now()
        until = stored.previous_until if stored.previous_until and stored.previous_until > now else None
        return {
            "created_at": stored.created_at.isoformat(),
            "previous_expires_at": until.isoformat() if until else None,
        }

    def ensure(self, tenant: str) -> None:
        """Make a (never shown) secret for `tenant` unless it has one."""
        if tenant in self._known:
            return
        if self._records.get_signing_keys(tenant) is None:
            keys = SigningKeys(current=new_secret(self._random(SECRET_BYTES)), created_at=self._clock.now())
            self._write(tenant, keys, 1, None)  # False: another request made one first
        self._known.add(tenant)

    def signing(self, tenant: str) -> list[str]:
        """The secrets that sign `tenant`'s deliveries now (none: the tenant has none, a job
        made before signing existed; its deliveries go out unsigned)."""
        now = self._clock.now()
        with self._lock:
            found = self._cache.get(tenant)
        if found is None or found[0] <= now:
            stored = self._records.get_signing_keys(tenant)
            found = (now + CACHE_FOR, None if stored is None else self._open(tenant, stored))
            with self._lock:
                self._cache[tenant] = found
        keys = found[1]
        return [] if keys is None else keys.signing(now)
