"""A tenant's execution role, as the worker acts with it (docs/security.md, "Execution
roles"): sts:AssumeRole with ExternalId = the tenant's external id, then the target's call
with that role's temporary credentials, never the worker's own.

Credentials are kept per (role, external id) and used until `REFRESH_BEFORE` their expiry,
so a busy role costs a worker instance one AssumeRole an hour; the worker runs a batch's
records in threads, and one assume per role is made at a time. At most `MAX_HELD` roles are
kept (the least recently used is dropped).

When STS refuses, the run fails with what to check — the role's trust policy — and nothing
about the target: AccessDenied (not trusted, wrong external id, or no such role: STS does
not say which) is final; throttling and STS faults are worth another attempt.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError

from scheduler_core.adapters.aws import AwsClients, error_code
from scheduler_core.adapters.aws_errors import aws_error_retryable
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.execution_roles import external_id, session_name, trust_requirement

if TYPE_CHECKING:
    from mypy_boto3_sts import STSClient

SESSION_SECONDS = 3600  # what every role allows (a role's maximum session is 1 to 12 hours)
REFRESH_BEFORE = timedelta(minutes=5)
MAX_HELD = 256


class RoleNotAssumed(Exception):
    """STS did not hand out a role's credentials: `str()` says what to check."""

    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class _Held:
    clients: AwsClients
    expires: datetime


class AssumedRoles:
    def __init__(
        self, clients: AwsClients, clock: Clock, *, worker_role_arn: str = "", sts: STSClient | None = None
    ) -> None:
        """`clients`: the worker's own, which assume the roles and which the roles' clients
        are built like; `worker_role_arn`: named in a refusal ("" : unknown); `sts`: the
        STS client to assume with (default: `clients`'), the seam a test answers through."""
        self._clients = clients
        self._clock = clock
        self._worker_role_arn = worker_role_arn
        self._sts = sts
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self._assuming: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def clients(self, role_arn: str, tenant: str, run_id: str) -> AwsClients:
        """Clients acting as `role_arn` for `tenant`; when no fresh credentials are held, the
        role is assumed with the tenant's external id in a session named after `run_id`.
        RoleNotAssumed when STS refuses."""
        key = (role_arn, external_id(tenant))
        held = self._fresh(key)
        if held is not None:
            return held.clients
        with self._lock:
            assuming = self._assuming.setdefault(key, threading.Lock())
        with assuming:
            held = self._fresh(key)  # another thread may have assumed it meanwhile
            if held is None:
                held = self._assume(role_arn, tenant, session_name(run_id))
                with self._lock:
                    self._held[key] = held
                    self._held.move_to_end(key)
                    while len(self._held) > MAX_HELD:
                        dropped, _ = self._held.popitem(last=False)
                        self._assuming.pop(dropped, None)
            return held.clients

    def _fresh(self, key: tuple[str, str]) -> _Held | None:
        with self._lock:
            held = self._held.get(key)
            if held is None or self._clock.now() >= held.expires - REFRESH_BEFORE:
                return None
            self._held.move_to_end(key)
            return held

    def _assume(self, role_arn: str, tenant: str, session: str) -> _Held:
        sts = self._sts or self._clients.sts()
        try:
            answer = sts.assume_role(
                RoleArn=role_arn,
                RoleSessionName=session,
                ExternalId=external_id(tenant),
                DurationSeconds=SESSION_SECONDS,
            )
        except ClientError as error:
            code = error_code(error)
            if code in ("AccessDenied", "AccessDeniedException"):
                raise RoleNotAssumed(
                    trust_requirement(role_arn, self._worker_role_arn, tenant), False
                ) from error
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise RoleNotAssumed(
                f"the scheduler could not assume {role_arn}: STS {code}: "
                f"{error.response.get('Error', {}).get('Message', '')}",
                aws_error_retryable(code, status),
            ) from error
        except ParamValidationError as error:  # botocore refused to send it: so would STS
            raise RoleNotAssumed(f"the scheduler could not assume {role_arn}: {error}", False) from error
        except BotoCoreError as error:
            raise RoleNotAssumed(
                f"the scheduler could not assume {role_arn}: STS unreachable: {error}", True
            ) from error
        credentials = answer["Credentials"]
        return _Held(
            self._clients.acting_as(
                credentials["AccessKeyId"], credentials["SecretAccessKey"], credentials["SessionToken"]
            ),
            credentials["Expiration"],
        )
