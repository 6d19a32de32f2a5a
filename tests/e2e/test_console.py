"""The admin console in a real browser: Debian's chromium (`make browser`), driven by
Playwright's sync API, against the local cloud's console at /console/. Each test does what a
user would: fills the form, waits for the page to show what happened (the page refreshes on
its own: no reload), clicks. Screenshots go to test-results/console/ (docs/console.md shows
them).

Playwright's waits (`expect`) are deadlines for a failure message, not measures: nothing
here asserts how long anything took."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from infra.config import REPO_ROOT
from infra.local.cloud import LocalCloud
from tests.e2e.api_client import ApiClient, arrivals, http_job, unique_name
from tests.e2e.polling import API_POLL_INTERVAL_SECONDS, now_ms, seconds_until, wait_for
from tests.support.helpers import iso
from tests.support.receiver import WebhookReceiver

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = REPO_ROOT / "test-results" / "console"
# How long the page may take to show what the test waits for: a firing a few seconds away,
# a queue hop, a function call, and the page's next refresh (2 s).
DEADLINE_MS = 30_000
A_COUNT = re.compile(r"^[1-9][0-9]*$")  # one or more
FAST_RETRY = {"max_attempts": 2, "backoff_seconds": 1, "max_backoff_seconds": 1}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    expect.set_options(timeout=DEADLINE_MS)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Browser, local_cloud: LocalCloud) -> Iterator[Page]:
    """A fresh tab on the console, in a time zone that is not UTC (the page shows both)."""
    context = browser.new_context(viewport={"width": 1360, "height": 900}, timezone_id="Europe/Berlin")
    tab = context.new_page()
    tab.set_default_timeout(DEADLINE_MS)
    failures: list[str] = []
    tab.on("pageerror", lambda error: failures.append(str(error)))
    # What the page logged, printed for a failing test's report (pytest shows its output).
    tab.on("console", lambda message: print(f"browser {message.type}: {message.text}"))
    tab.on("requestfailed", lambda request: print(f"browser request failed: {request.url} {request.failure}"))
    yield tab
    context.close()
    assert not failures, f"the page threw: {failures}"


@pytest.fixture
def own_receiver() -> Iterator[WebhookReceiver]:
    """A receiver of the test's own: its scripted failures reach no other test's jobs."""
    with WebhookReceiver() as server:
        yield server


def open_console(page: Page, cloud: LocalCloud, route: str) -> None:
    page.goto(f"{cloud.api_url}/console/#{route}")


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def failed_run(
    api: ApiClient, receiver: WebhookReceiver, purpose: str, statuses: tuple[int, ...] = (404,)
) -> dict[str, Any]:
    """A one-off job whose target answers `statuses` (by default 404, final: no retry), once
    its run FAILED."""
    receiver.respond_with(*statuses)
    fire_at = now_ms() + timedelta(seconds=2)
    job = api.create_job(http_job(receiver, purpose, {"at": iso(fire_at)}, retry=FAST_RETRY))
    run: dict[str, Any] = wait_for(
        lambda: api.run_in_status(job["job_id"], "FAILED"),
        seconds_until(fire_at) + DEADLINE_MS / 1000,
        f"{purpose}'s run to fail",
        API_POLL_INTERVAL_SECONDS,
    )
    return run


def test_a_job_made_with_the_form_fires_and_its_run_appears(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    name = unique_name("console-form")
    open_console(page, local_cloud, "/jobs/new")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("At", exact=True).fill(iso(now_ms() + timedelta(seconds=6)))
    page.get_by_label("URL", exact=True).fill(own_receiver.url)
    page.get_by_label("JSON sent to the target").fill('{"from": "the console"}')
    page.get_by_label("Priority", exact=True).select_option("HIGH")
    expect(page.locator("#schedule-preview")).to_contain_text("Once, at")  # the server's preview
    shot(page, "job-form")

    page.get_by_role("button", name="Create job").click()

    expect(page.locator("h1")).to_contain_text(name)
    expect(page.locator(".flash-ok")).to_contain_text(f"Created job {name}")
    job_id = page.url.rsplit("/", 1)[-1]
    succeeded = page.locator("#runs-table tbody tr[data-status=SUCCEEDED]")
    expect(succeeded).to_have_count(1)  # fired, and shown without a reload
    expect(succeeded).to_contain_text("200")
    expect(page.locator("h1 .badge")).to_have_text("COMPLETED")
    shot(page, "job")
    [delivery] = arrivals(own_receiver, job_id)
    assert delivery.body == {"from": "the console"}
    assert api.job(job_id)["priority"] == "HIGH"

    open_console(page, local_cloud, "/jobs")
    page.get_by_label("Name starts with").fill(name)
    rows = page.locator("#jobs-table tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("COMPLETED")
    page.get_by_label("Status").select_option("SCHEDULED")
    expect(page.locator(f'#jobs-table tbody tr[data-job-id="{job_id}"]')).to_have_count(0)
    page.get_by_label("Status").select_option("COMPLETED")
    expect(page.locator(f'#jobs-table tbody tr[data-job-id="{job_id}"]')).to_have_count(1)


def test_the_apis_validation_errors_appear_beside_their_fields(
    page: Page, local_cloud: LocalCloud, api: ApiClient
) -> None:
    name = unique_name("console-invalid")
    open_console(page, local_cloud, "/jobs/new")
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("cron", exact=True).check()
    page.get_by_label("Cron", exact=True).fill("61 * * * *")
    expect(page.locator("#schedule-preview")).to_contain_text("not a valid cron expression")  # as typed
    page.get_by_label("URL", exact=True).fill("ftp://example.com/hook")
    page.get_by_label("Attempts", exact=True).fill("50")

    page.get_by_role("button", name="Create job").click()

    expect(page.locator(".summary .flash-error")).to_contain_text("400")
    beside = {
        "schedule.cron": "not a valid cron expression",
        "target.url": "absolute http:// or https:// URL",
        "retry.max_attempts": "20",
    }
    for field, message in beside.items():
        holder = page.locator(f'.field.invalid[data-field="{field}"]')
        expect(holder.locator(".field-error")).to_contain_text(message)
    expect(page.locator(".field.invalid")).to_have_count(len(beside))
    shot(page, "validation")
    assert api.call("GET", f"/v1/jobs?name_prefix={name}").body["items"] == []


def test_a_failed_run_shows_every_attempt_with_its_error_and_is_retried_from_its_page(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    # Attempt 1 gets a 503 (retried), attempt 2 a 404 (final).
    run = failed_run(api, own_receiver, "console-retry", statuses=(503, 404))
    open_console(page, local_cloud, f"/jobs/{run['job_id']}/runs/{run['run_id']}")
    expect(page.locator("h1 .badge")).to_have_text("FAILED")
    first = page.locator('#attempts-table tr[data-attempt="1"]')
    second = page.locator('#attempts-table tr[data-attempt="2"]')
    expect(first).to_contain_text("FAILED")
    expect(first).to_contain_text("HTTP 503")
    expect(second).to_contain_text("FAILED")
    expect(second).to_contain_text("HTTP 404")
    shot(page, "run-failed")

    page.get_by_role("button", name="Retry run").click()  # the receiver answers 200 now

    expect(page.locator("h1 .badge")).to_have_text("SUCCEEDED")
    expect(page.locator('#attempts-table tr[data-attempt="3"]')).to_contain_text("SUCCEEDED")
    expect(page.locator('#attempts-table tr[data-attempt="3"]')).to_contain_text("200")
    expect(first).to_contain_text("HTTP 503")
    expect(second).to_contain_text("HTTP 404")
    expect(page.locator("#attempts-table tbody tr")).to_have_count(3)
    shot(page, "run-retried")
    assert len(arrivals(own_receiver, run["job_id"])) == 3
    assert api.run(run["job_id"], run["run_id"])["trigger"] == "RETRY"


def test_the_dlq_shows_why_a_run_is_there_and_a_redrive_runs_it_again(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    run = failed_run(api, own_receiver, "console-dlq")
    open_console(page, local_cloud, "/dlq")
    record = page.locator(f'#dlq-table tr[data-run-id="{run["run_id"]}"]')
    expect(record).to_contain_text("RUN_FAILED")
    expect(record).to_contain_text("failed after 1 attempt(s): HTTP 404")
    shot(page, "dlq")

    page.get_by_role("button", name="Re-drive the DLQ").click()

    expect(page.locator("#redrive-report")).to_contain_text("failed runs given a new attempt")
    expect(record).to_have_count(0)
    wait_for(
        lambda: api.run_in_status(run["job_id"], "SUCCEEDED", run["run_id"]),
        DEADLINE_MS / 1000,
        "the re-driven run to succeed",
        API_POLL_INTERVAL_SECONDS,
    )
    shot(page, "dlq-redriven")


def test_a_workflow_runs_graph_shows_each_tasks_state_and_a_failed_task_is_retried(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    def task(task_id: str, *depends_on: str, statuses: tuple[int, ...] = ()) -> dict[str, Any]:
        url = own_receiver.answer_on(f"{prefix}/{task_id}", {"task": task_id}, statuses)
        return {"task_id": task_id, "target": {"type": "HTTP", "url": url}, "depends_on": list(depends_on)}

    prefix = unique_name("console-graph")
    tasks = [
        task("extract"),
        task("clean", "extract"),
        task("transform", "extract", statuses=(404,)),  # fails once, final
        task("load", "clean", "transform"),
        task("report", "load"),
    ]
    reply = api.call("POST", "/v1/workflows", {"name": prefix, "tasks": tasks})
    assert reply.status == 201, reply.body
    workflow_id = reply.body["workflow_id"]
    open_console(page, local_cloud, f"/workflows/{workflow_id}")
    expect(page.locator("#workflow-graph")).to_have_attribute("data-rendered", "true")

    page.get_by_role("button", name="Trigger now").click()  # opens the new run's page

    graph = page.locator("#workflow-graph")
    states = {
        "extract": "SUCCEEDED",
        "clean": "SUCCEEDED",
        "transform": "FAILED",
        "load": "UPSTREAM_FAILED",
        "report": "UPSTREAM_FAILED",
    }
    expect(graph).to_have_attribute("data-states", json.dumps(states, separators=(",", ":")))
    expect(page.locator('#tasks-table tr[data-task-id="transform"]')).to_contain_text("HTTP 404")
    expect(graph.locator("canvas").first).to_be_visible()
    shot(page, "workflow-failed")

    page.locator('button[data-retry-task="transform"]').click()

    done = dict.fromkeys(states, "SUCCEEDED")
    expect(graph).to_have_attribute("data-states", json.dumps(done, separators=(",", ":")))
    expect(page.locator("#graph-title .badge")).to_have_text("SUCCEEDED")
    shot(page, "workflow")


def test_the_overview_counts_the_last_hours_runs_and_the_queues(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    soon = iso(now_ms() + timedelta(seconds=1))
    job = api.create_job(http_job(own_receiver, "console-overview", {"at": soon}))
    wait_for(
        lambda: api.run_in_status(job["job_id"], "SUCCEEDED"),
        DEADLINE_MS / 1000,
        "a run to count",
        API_POLL_INTERVAL_SECONDS,
    )
    open_console(page, local_cloud, "/overview")
    chart = page.locator("#runs-chart svg")
    expect(chart).to_have_attribute("data-total", A_COUNT)
    expect(page.locator("#runs-chart rect.bar-succeeded").first).to_be_attached()
    for queue in ("high", "normal", "low", "dlq"):
        expect(page.locator(f'#queue-depths tr[data-queue="{queue}"]')).to_have_count(1)
    expect(page.locator("#overview-stats")).to_contain_text("Lateness p99")
    expect(page.locator("#overview-stats .stat").nth(3).locator(".value")).not_to_have_text("—")
    shot(page, "overview")


def test_a_cron_jobs_page_says_its_schedule_and_next_firings_and_its_actions_work(
    page: Page, local_cloud: LocalCloud, api: ApiClient, own_receiver: WebhookReceiver
) -> None:
    weekdays = {"cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin"}
    job = api.create_job(
        http_job(own_receiver, "console-standup", weekdays) | {"schedule": weekdays | {"jitter_seconds": 300}}
    )
    open_console(page, local_cloud, f"/jobs/{job['job_id']}")
    expect(page.locator("#schedule-words")).to_have_text(
        "At 09:00, Monday through Friday, in Europe/Berlin, each start up to 300 s late (jitter)"
    )
    firings = page.locator("#next-firings tbody tr")
    expect(firings).to_have_count(5)
    for row in firings.all():  # the browser is in Berlin too: 09:00 local, 08:00 or 07:00 UTC
        expect(row.locator("td").nth(0)).to_contain_text("09:00:00")
        expect(row.locator("td").nth(1)).to_contain_text(re.compile(r"0[78]:00:00 UTC"))

    page.get_by_role("button", name="Pause").click()
    expect(page.locator("h1 .badge")).to_have_text("PAUSED")
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("h1 .badge")).to_have_text("SCHEDULED")
    page.get_by_role("button", name="Trigger now").click()
    manual = page.locator("#runs-table tbody tr[data-status=SUCCEEDED]")
    expect(manual).to_contain_text("MANUAL")
    shot(page, "job-cron")

    open_console(page, local_cloud, "/jobs")  # with what the tests before this one made
    expect(page.locator(f'#jobs-table tbody tr[data-job-id="{job["job_id"]}"]')).to_contain_text("SCHEDULED")
    shot(page, "jobs")

    open_console(page, local_cloud, f"/jobs/{job['job_id']}")
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_role("button", name="Yes, cancel job").click()
    expect(page.locator("h1 .badge")).to_have_text("CANCELLED")
    assert api.job(job["job_id"])["status"] == "CANCELLED"
