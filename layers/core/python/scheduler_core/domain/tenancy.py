"""Who owns a job: the caller's IAM identity as API Gateway reports it. Pure.

A role's sessions are one tenant (`arn:aws:sts::123:assumed-role/Role/alice` and
`.../Role/bob` share jobs): the session name is dropped, the role is the owner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tenant_of(identity: Mapping[str, Any] | None) -> str | None:
    """The tenant for an API Gateway `requestContext.identity`; None if there is no IAM caller."""
    if not identity:
        return None
    arn = identity.get("userArn")
    if not arn:
        return None
    arn = str(arn)
    if ":assumed-role/" in arn:
        prefix, _, path = arn.partition(":assumed-role/")
        role = path.split("/", 1)[0]
        return f"{prefix}:assumed-role/{role}"
    return arn
