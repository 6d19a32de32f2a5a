"""`python -m infra.migrate_tenants` (`make migrate-tenants`): move tenants kept under their
ARN, by releases before tenants were unique principal ids, to those ids
(scheduler_core.services.tenant_migration; docs/security.md, "Tenants").

Run it once after deploying this version (until then, callers whose jobs are kept under an
ARN see none of them). `--dry-run` prints what would move. Prints, per old tenant, the id it
became (or why it stays) and the jobs whose target names an execution role: that role's
trust policy must now require the new id as its sts:ExternalId.

Your AWS credentials need dynamodb:Scan/UpdateItem/PutItem/DeleteItem/GetItem on the jobs
table, iam:GetUser and iam:GetRole, and kms:ReEncrypt* on the secrets key. The local cloud:
`--endpoint-url` the moto URL `make run` prints.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from infra.config import STACK_NAME
from infra.redrive import StackNotReady, deployed_settings, make_session
from scheduler_core.adapters.aws import AwsClients
from scheduler_core.composition import build_tenant_migration
from scheduler_core.domain.clock import SystemClock
from scheduler_core.domain.execution_roles import arn_account
from scheduler_core.services.tenant_migration import TenantMove


def render(moves: list[TenantMove], dry_run: bool) -> str:
    if not moves:
        return "no tenant is kept under an ARN: nothing to move"
    lines = []
    for move in moves:
        if move.new is None:
            lines.append(f"{move.old}: stays ({move.why}); {move.items} jobs")
            continue
        if dry_run:
            lines.append(f"{move.old}: would move to {move.new}; {move.items} jobs")
        else:
            lines.append(
                f"{move.old}: moved to {move.new}; {move.moved} of {move.items} jobs, "
                f"{move.quota_counters} quota counters, signing keys: {move.signing_keys}"
            )
        for job_id, why in move.failed.items():
            lines.append(f"  job {job_id} not moved: {why}")
        if move.role_targets:
            lines.append(
                f"  jobs {', '.join(move.role_targets)} name execution roles: their trust policies must "
                f'accept sts:ExternalId "{move.external_id}" (a list ["{move.old}", "{move.external_id}"] '
                "accepts both while you change them)"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra.migrate_tenants",
        description="Move tenants kept under their ARN to their principal's unique id.",
    )
    parser.add_argument("--stack", default=STACK_NAME, help=f"the stack's name (default {STACK_NAME})")
    parser.add_argument("--endpoint-url", default=None, help="an AWS endpoint such as the local cloud's moto")
    parser.add_argument("--region", default=None, help="default: your configured region")
    parser.add_argument("--dry-run", action="store_true", help="print what would move; change nothing")
    parser.add_argument("--json", action="store_true", help="print the moves as JSON")
    args = parser.parse_args(argv)
    try:
        session = make_session(args.endpoint_url, args.region)
        settings = deployed_settings(session.client("cloudformation"), args.stack)
        if not (settings.worker_role_arn and settings.secrets_key_id):
            raise StackNotReady(
                f"stack {args.stack!r} has no WorkerRoleArn or SecretsKeyId output: deploy this version "
                "of the stack first (make deploy)"
            )
        account = arn_account(settings.worker_role_arn)
        migration = build_tenant_migration(settings, AwsClients(session), SystemClock(), account)
        moves = migration.run(dry_run=args.dry_run)
    except StackNotReady as error:
        print(f"migrate-tenants: {error}", file=sys.stderr)
        return 2
    except (NoCredentialsError, NoRegionError) as error:
        print(f"migrate-tenants: {error} (configure AWS credentials and a region)", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError, RuntimeError) as error:
        print(f"migrate-tenants: {error}", file=sys.stderr)
        return 1
    print(json.dumps([m.to_json() for m in moves]) if args.json else render(moves, args.dry_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
