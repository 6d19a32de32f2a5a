"""The tenant-facing security controls through the whole local cloud (docs/security.md): a
delivery verifies with the `standardwebhooks` package under the tenant's own secret and
carries its secret header, which no response shows; the metadata address is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from infra.local.cloud import LocalCloud
from tests.e2e.api_client import ApiClient, arrivals, assert_error_shape, http_job
from tests.e2e.polling import now_ms, seconds_until, wait_for
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

MARGIN_SECONDS = 10
TENANT = "arn:aws:iam::123456789012:user/security-e2e"  # a tenant of this test's own
OTHER = "arn:aws:iam::123456789012:user/security-e2e-other"


def test_a_delivery_is_signed_for_its_tenant_and_carries_its_secret_header(
    api: ApiClient, receiver: WebhookReceiver
) -> None:
    made = api.call("POST", "/v1/signing-secrets", caller=TENANT)
    assert made.status == 201, made.body
    secret = made.body["secret"]
    others = api.call("POST", "/v1/signing-secrets", caller=OTHER).body["secret"]
    fire_at = now_ms() + timedelta(seconds=3)
    body = http_job(receiver, "signed", {"at": iso(fire_at)})
    body["target"]["secret_headers"] = {"Authorization": "Bearer e2e-s3cr3t"}
    created = api.call("POST", "/v1/jobs", body, caller=TENANT)
    assert created.status == 201, created.body
    job_id = created.body["job_id"]

    [request] = wait_for(
        lambda: arrivals(receiver, job_id), seconds_until(fire_at) + MARGIN_SECONDS, "the delivery"
    )
    assert Webhook(secret).verify(request.raw, request.headers) == body["payload"]
    with pytest.raises(WebhookVerificationError):
        Webhook(others).verify(request.raw, request.headers)
    assert request.headers["webhook-id"] == request.headers["idempotency-key"]
    assert request.headers["authorization"] == "Bearer e2e-s3cr3t"
    shown = api.call("GET", f"/v1/jobs/{job_id}", caller=TENANT)
    assert shown.body["target"]["secret_headers"] == {"Authorization": "***"}
    secrets = api.call("GET", "/v1/signing-secrets", caller=TENANT)
    assert "e2e-s3cr3t" not in json.dumps([created.body, shown.body, secrets.body])
    assert secret.removeprefix("whsec_") not in json.dumps(secrets.body)


@pytest.mark.parametrize(
    "url",
    ["http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://[::ffff:169.254.169.254]/"],
)
def test_the_metadata_address_is_refused_even_where_loopback_is_allowed(
    api: ApiClient, receiver: WebhookReceiver, url: str
) -> None:
    body = http_job(receiver, "metadata", {"at": iso(now_ms() + timedelta(minutes=5))})
    body["target"]["url"] = url

    details = assert_error_shape(api.call("POST", "/v1/jobs", body), 400, "VALIDATION_ERROR")

    assert details[0]["field"] == "target.url"
    assert "link-local" in details[0]["message"]


def test_the_tenant_move_finds_the_deployed_stack_and_nothing_kept_under_an_arn(
    local_cloud: LocalCloud,
) -> None:
    """`python -m infra.migrate_tenants` against the local cloud: the stack's outputs (table,
    secrets key, worker role) are enough to run it, and this release keeps no ARN tenant."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "infra.migrate_tenants",
            "--endpoint-url",
            local_cloud.moto_url,
            "--dry-run",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
