"""The API's check of a job's or a task's target, for the tenant making or changing it: the
deployment's rules (domain/target_access.py: pure), and for a target with an execution role,
that the role lets the worker assume it for this tenant (docs/security.md, "Execution roles").

The role check stands in for EventBridge Scheduler's `iam:PassRole`: there, passing a role
needs permission on it; here, a role must say itself, in its trust policy, that the worker
may assume it with sts:ExternalId = this tenant's external id — the binding STS enforces at
every delivery, so one tenant cannot use another tenant's role. A role of the stack's own
account is read (iam:GetRole) at create and change, so a role that does not let the worker in
is a 403 naming `target.role_arn` then, not a failed run later. A role that does not exist
is the same 403: the answer never says whether a role exists. A role of another account
cannot be read (GetRole is same-account): it is accepted, and STS checks its trust policy at
the first delivery (the run's error says what to fix).
"""

from __future__ import annotations

from scheduler_core.domain.errors import Forbidden, field_error
from scheduler_core.domain.execution_roles import arn_account, external_id, trust_allows, trust_requirement
from scheduler_core.domain.target_access import ROLE_FIELD, TargetAccess
from scheduler_core.domain.target_spec import HttpTarget, Target
from scheduler_core.ports import RoleDirectory


class TargetCheck:
    def __init__(
        self,
        access: TargetAccess | None = None,
        roles: RoleDirectory | None = None,
        worker_role_arn: str = "",
    ) -> None:
        """`roles`: the account's roles (None, or no `worker_role_arn`: roles are not read,
        as in some tests; STS still decides at delivery)."""
        self._access = access or TargetAccess()
        self._roles = roles
        self._worker_role_arn = worker_role_arn

    def check(self, tenant: str, target: Target) -> None:
        """A 400 naming the field the deployment refuses; a 403 naming `target.role_arn` for a
        role of this account that does not let the worker assume it for `tenant`."""
        self._access.check(target)
        if isinstance(target, HttpTarget) or target.role_arn is None:
            return
        if self._roles is None or not self._worker_role_arn:
            return
        if arn_account(target.role_arn) != arn_account(self._worker_role_arn):
            return  # another account's: STS checks its trust policy at the first delivery
        policy = self._roles.trust_policy(target.role_arn)
        if policy is None or not trust_allows(policy, self._worker_role_arn, external_id(tenant)):
            reason = trust_requirement(target.role_arn, self._worker_role_arn, tenant)
            raise Forbidden(f"{ROLE_FIELD}: {reason}", [field_error(ROLE_FIELD, reason)])
