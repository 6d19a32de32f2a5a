"""A job's secret headers (`target.secret_headers`): sealed (KMS, `Secrets`) when the API
takes them, held as `Job.sealed_headers` (one sealed value per header, under an encryption
context naming the tenant, the job and the header, so a sealed value copied elsewhere does
not open), shown as "***", and opened only by the worker at call time.

In a change, a secret header whose value is "***" keeps the value the job holds: what a GET
shows can be sent back as it is. A header left out is dropped.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from scheduler_core.domain.entities import Job
from scheduler_core.domain.errors import InvalidRequest, field_error
from scheduler_core.domain.target_spec import SECRET_MASK, HttpTarget, Target
from scheduler_core.ports import Secrets

FIELD = "target.secret_headers"


def header_context(tenant: str, job_id: str, name: str) -> dict[str, str]:
    """What a secret header's value is sealed under."""
    return {"purpose": "secret-header", "tenant": tenant, "job": job_id, "header": name.lower()}


def open_secret_headers(secrets: Secrets, job: Job) -> dict[str, str]:
    """A job's secret headers, opened (the worker's side)."""
    if not job.sealed_headers:
        return {}
    return {
        name: secrets.unseal(sealed, header_context(job.tenant, job.job_id, name))
        for name, sealed in job.sealed_headers.items()
    }


class SecretHeaders:
    """`secrets`: None in a deployment without a secrets key (some tests): secret headers are
    then refused."""

    def __init__(self, secrets: Secrets | None) -> None:
        self._secrets = secrets

    def seal(self, tenant: str, job_id: str, target: Target | None, before: Job | None) -> dict[str, Any]:
        """The job fields a target's secret headers come to: the target with each value
        shown as "***", and `sealed_headers`. `before`: the job as it is (a change)."""
        if not isinstance(target, HttpTarget) or not target.secret_headers:
            return {"target": target, "sealed_headers": None}
        if self._secrets is None:
            reason = "cannot be kept: this deployment has no secrets key; use headers, or ask the operator"
            raise InvalidRequest(f"{FIELD} {reason}", [field_error(FIELD, reason)])
        held = {name.lower(): sealed for name, sealed in ((before and before.sealed_headers) or {}).items()}
        if before is not None and not _same_origin(before.target, target):
            held = {}  # a kept secret never follows the target to another host: send it again
        sealed: dict[str, str] = {}
        for name, secret in target.secret_headers.items():
            value = secret.get_secret_value()
            if value != SECRET_MASK:
                sealed[name] = self._secrets.seal(value, header_context(tenant, job_id, name))
            elif name.lower() in held:
                sealed[name] = held[name.lower()]
            else:
                field = f"{FIELD}.{name}"
                reason = (
                    f'is "{SECRET_MASK}" but the job holds no value for {name} to keep at this URL\'s host '
                    "(a kept secret goes to the host it was given for only); send the value"
                )
                raise InvalidRequest(f"{field} {reason}", [field_error(field, reason)])
        shown = SecretStr(SECRET_MASK)
        masked = target.model_copy(update={"secret_headers": dict.fromkeys(target.secret_headers, shown)})
        return {"target": masked, "sealed_headers": sealed}


def _same_origin(before: Target | None, after: HttpTarget) -> bool:
    """Whether `after` calls the scheme, host and port `before` called."""
    if not isinstance(before, HttpTarget):
        return False
    old, new = urlsplit(before.url), urlsplit(after.url)
    return (old.scheme, old.hostname, old.port) == (new.scheme, new.hostname, new.port)
