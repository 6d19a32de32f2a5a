"""The API's use cases: create, read, list, change (see `job_control`) and cancel jobs;
read their runs.

Tenancy is enforced here: another tenant's job is indistinguishable from a missing one
(404), in every call.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from scheduler_core.domain import keys
from scheduler_core.domain.api_shapes import Backfill, JobCreate, JobPatch
from scheduler_core.domain.clock import Clock
from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    field_error,
    fields_within,
)
from scheduler_core.domain.job_firings import first_firing, waits_for_its_last_firing
from scheduler_core.domain.target_spec import HttpTarget
from scheduler_core.domain.tenancy import Tenancy
from scheduler_core.domain.vocabulary import JobKind, JobStatus, RunStatus
from scheduler_core.observability import logger
from scheduler_core.ports import AuditLog, CreateOnce, CursorNotValid, Page, Secrets
from scheduler_core.services.create_once import created_once
from scheduler_core.services.dispatch import Dispatcher
from scheduler_core.services.job_control import JobControl, JobControlStore
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.parallel import InOrder, Runner
from scheduler_core.services.quotas import TenantQuotas, put_counted, put_counted_each
from scheduler_core.services.secret_headers import SecretHeaders
from scheduler_core.services.signing import SigningSecrets
from scheduler_core.services.target_check import TargetCheck
from scheduler_core.services.workflows import WorkflowService


class BatchPartlyMade(Exception):
    """A batch's write that failed (`error`) after others were made (`job_ids`): the API
    answers as `error` would, and audits the jobs made."""

    def __init__(self, error: Exception, job_ids: list[str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.job_ids = job_ids


def _batch_job_ids(batch_id: str, requests: list[JobCreate]) -> list[str]:
    """The ids of a keyed batch's jobs: fixed by the batch's own id (its Idempotency-Key's),
    each job's place in it and its body, so the batch sent again finds the jobs the first one
    wrote, and a batch sent under the same key with other jobs (after the first failed) finds
    none of them."""
    namespace = uuid.UUID(batch_id)
    return [
        uuid.uuid5(namespace, f"{index}:{json.dumps(request.model_dump(mode='json'), sort_keys=True)}").hex
        for index, request in enumerate(requests)
    ]


# A batch writing fewer jobs than this lists each by its own tenant index entry (a write
# unit each), not by one listing item (one unit for 1 KB of ids, and its entry's one).
LISTED_TOGETHER_FROM = 3


@contextlib.contextmanager
def _cursor_checked() -> Iterator[None]:
    """A listing's cursor that is not one it handed out is the caller's mistake: a 400."""
    try:
        yield
    except CursorNotValid as error:
        raise InvalidRequest(
            "cursor is not valid; pass the next_cursor of the previous page",
            [
                field_error(
                    "cursor", f"not a cursor this listing returned ({error}); pass next_cursor back unchanged"
                )
            ],
        ) from error


class JobService:
    def __init__(
        self,
        store: JobControlStore,
        dispatcher: Dispatcher,
        clock: Clock,
        lifecycle: RunLifecycle,
        targets: TargetCheck | None = None,
        creates: CreateOnce | None = None,
        workflows: WorkflowService | None = None,
        secrets: Secrets | None = None,
        signing: SigningSecrets | None = None,
        quotas: TenantQuotas | None = None,
        audit: AuditLog | None = None,
        tenancy: Tenancy | None = None,
        runner: Runner | None = None,
        new_id: Callable[[], str] | None = None,
    ) -> None:
        """`workflows`: the workflows API (`self.workflows`), when this API serves one;
        `secrets`: where secret headers are sealed (None: refused); `signing`: the tenants'
        webhook signing secrets (None: not made); `runner`: how a batch's writes run side by
        side (default: one after the other); `new_id`: the id of a job made without a key
        (and of an unkeyed batch's listing), 32 hex digits (default: a random uuid4's)."""
        self._store = store
        # Who a caller is (the API's tenant of each request).
        self.tenancy = tenancy or Tenancy()
        # Creates sent with an Idempotency-Key; None: the header is not honoured (some tests).
        self._creates = creates
        self._dispatcher = dispatcher
        self._clock = clock
        self._lifecycle = lifecycle
        # What the worker may reach: never the scheduler's own queues or functions (a job could
        # forge run messages or API requests); what the target's execution role reaches, or
        # without one only what the deployment offers every tenant.
        self._targets = targets or TargetCheck()
        self._secret_headers = SecretHeaders(secrets)
        self._signing = signing
        self.signing = signing  # the API's signing-secrets routes
        self._quotas = quotas  # None: not counted (some tests)
        self.audit = audit  # where the API writes a line per mutating call (None: nowhere)
        self._control = JobControl(store, dispatcher, clock, lifecycle, self._admit_request, first_firing)
        self.workflows = workflows
        self._runner: Runner = runner or InOrder()
        self._new_id = new_id or (lambda: uuid.uuid4().hex)

    def _admit_request(self, request: JobCreate, job: Job) -> dict[str, Any]:
        """What a job's fields cannot say alone, for a create and for a patch alike (`job`: as
        it is, or as it is being made); the fields the request comes to beyond its own."""
        self._targets.check(job.tenant, request.target)
        if self._quotas is not None:
            self._quotas.check_schedule(request.schedule)
        if isinstance(request.target, HttpTarget) and self._signing is not None:
            self._signing.ensure(job.tenant)  # every delivery is signed: docs/security.md
        return self._secret_headers.seal(job.tenant, job.job_id, request.target, job)

    def begin_invocation(self, context: object) -> None:
        if self._creates is not None:
            self._creates.begin_invocation(context)

    def create(self, tenant: str, request: JobCreate, idempotency_key: str | None = None) -> Job:
        """A new job; or, for an `idempotency_key` this tenant sent before with the same
        request, the job that request made, as it is now (`created_once`)."""
        if idempotency_key is None or self._creates is None:
            return self._create(tenant, request)
        return created_once(
            self._creates,
            tenant,
            idempotency_key,
            request.model_dump(mode="json"),
            lambda job_id: self._create(tenant, request, job_id),
            lambda job_id: self.get(tenant, job_id),
        )

    def create_batch(
        self, tenant: str, requests: list[JobCreate], idempotency_key: str | None = None
    ) -> list[Job]:
        """New jobs, in the order asked (docs/api.md, "Create jobs in a batch"); or, for an
        `idempotency_key` this tenant sent before with the same batch, the jobs it made, as
        they are now. Every job is checked before any is written: one that is refused
        refuses the batch, its error naming `jobs[i].<field>`."""
        if idempotency_key is None or self._creates is None:
            return self._create_batch(tenant, requests)
        return created_once(
            self._creates,
            tenant,
            idempotency_key,
            {"jobs": [request.model_dump(mode="json") for request in requests]},
            lambda batch_id: self._create_batch(tenant, requests, batch_id),
            lambda batch_id: self._made_by_batch(tenant, _batch_job_ids(batch_id, requests)),
            kind="batch",
        )

    def _made_by_batch(self, tenant: str, job_ids: list[str]) -> list[Job]:
        """The jobs of a keyed batch made before, as they are now (in one read)."""
        found = self._store.get_jobs(job_ids)
        for job_id in job_ids:
            job = found.get(job_id)
            if job is None or job.tenant != tenant or job.kind is not JobKind.JOB:
                raise NotFound(f"job '{job_id}' not found")
        return [found[job_id] for job_id in job_ids]

    def _create(self, tenant: str, request: JobCreate, job_id: str | None = None) -> Job:
        """A new job (`job_id`: the id an idempotency key gives it; if that job exists, it is
        the one returned). Once the job is written, a failed claim leaves its firings to the
        poller rather than failing the create: the job exists, and a create sent again must
        not make another."""
        now = self._clock.now()
        job = self._new_job(tenant, request, job_id, now)
        claimed: list[list[Run]] = []

        def put() -> bool:
            written = self._put_new(job, now)
            if written is not None:
                claimed.append(written)
            return written is not None

        if not put_counted(self._quotas, job, put):
            if job_id is None:
                raise RuntimeError(f"job id {job.job_id} clashed with an existing job")
            return self.get(tenant, job.job_id)
        self._enqueue_claimed(claimed[0])
        return self._after_put(job, claimed[0], now)

    def _create_batch(self, tenant: str, requests: list[JobCreate], batch_id: str | None = None) -> list[Job]:
        """`_create` for each request, the writes side by side (`runner`), one quota write
        per counter and one send for the runs claimed at creation. Sent again with its key
        (`batch_id`), the jobs the first request made are answered as they are now (their
        firings due soon claimed, if they were not), and only the missing ones are counted
        and made. A write that fails raises `BatchPartlyMade` once the others are written,
        claimed and sent."""
        now = self._clock.now()
        ids = _batch_job_ids(batch_id, requests) if batch_id else [None] * len(requests)
        jobs = []
        for index, (request, job_id) in enumerate(zip(requests, ids, strict=True)):
            with fields_within(f"jobs[{index}]", named_in_message=True):
                jobs.append(self._new_job(tenant, request, job_id, now))
        # Eventually consistent (half the read units): a job it misses, made in the last
        # second, is found by its put's condition; only its quota count is not given back.
        existing = self._store.get_jobs([job.job_id for job in jobs], consistent=False) if batch_id else {}
        # One listing a key: whatever jobs it is sent with again (after a failure), a job's id
        # (fixed by the key, its place and its body) is in one listing at most.
        listing = batch_id or self._new_id()
        outcomes = self._put_batch(tenant, listing, [job for job in jobs if job.job_id not in existing], now)
        self._enqueue_claimed(
            [run for outcome in outcomes.values() if isinstance(outcome, list) for run in outcome]
        )
        made: list[Job] = []
        for job in jobs:
            outcome = outcomes.get(job.job_id)
            if isinstance(outcome, list):
                made.append(self._after_put(job, outcome, now))
            elif not isinstance(outcome, Exception):  # made before, or its write retried
                stored = existing.get(job.job_id) or self._store.get_job(job.job_id)
                if stored is None or stored.tenant != tenant:
                    raise RuntimeError(f"job id {job.job_id} clashed with another tenant's job")
                made.append(self._after_put(stored, [], now))
        failed = [outcome for outcome in outcomes.values() if isinstance(outcome, Exception)]
        if failed:
            raise BatchPartlyMade(failed[0], [job.job_id for job in made])
        return made

    def _put_batch(
        self, tenant: str, listing: str, jobs: list[Job], now: datetime
    ) -> dict[str, list[Run] | Exception | None]:
        """Write `jobs`, none of which exists (a new id each, or one read as missing), side by
        side and within the tenant's quotas: by id, the runs each write claimed, or the error
        it met, or None where the item was found there, which is this request's own write
        retried by botocore after an answer was lost (no count is given back for it). Once
        the quotas admit them, and before any is written, one item lists them all
        (`listing`: `Listing.list_together`), so none is ever unlisted; their own items then
        have no entry in the tenant index, a write unit less each. Fewer than
        `LISTED_TOGETHER_FROM` are listed each by its own entry (a listing and its entry cost
        two write units). In the same way, when as many wait for their last firing (one-offs),
        one due listing a minute holds those firings in the due index before they are
        written (`DueIndex.list_due_together`), instead of an entry each that the run's end
        takes out again: two write units less a job."""
        outcomes: dict[str, list[Run] | Exception | None] = {}

        listed_on_their_own = len(jobs) < LISTED_TOGETHER_FROM
        due_listed = {job.job_id for job in jobs if waits_for_its_last_firing(job)}
        if len(due_listed) < LISTED_TOGETHER_FROM:
            due_listed = set()

        def put_one(job: Job) -> None:
            try:
                outcomes[job.job_id] = self._put_new(
                    job, now, listed=listed_on_their_own, due_listed=job.job_id in due_listed
                )
            except Exception as error:  # the others are written all the same
                outcomes[job.job_id] = error

        def put_all(batch: list[Job]) -> list[bool]:
            if batch and not listed_on_their_own:
                self._store.list_together(tenant, listing, [job.job_id for job in batch], now)
            if waiting := [job for job in batch if job.job_id in due_listed]:
                self._store.list_due_together(self._new_id(), waiting)
            try:
                self._runner.map(put_one, batch)
            except Exception as error:  # the runner's own failure (a thread that would not start)
                # Writes it started may still land: every count is kept (stricter, never looser).
                for job in batch:
                    outcomes.setdefault(job.job_id, error)
                return [True] * len(batch)
            return [not isinstance(outcomes.get(job.job_id), Exception) for job in batch]

        put_counted_each(self._quotas, jobs, put_all)
        return outcomes

    def _new_job(self, tenant: str, request: JobCreate, job_id: str | None, now: datetime) -> Job:
        """The job a create makes, admitted (`_admit_request`), not yet written."""
        schedule = request.schedule
        job = Job(
            job_id=job_id or self._new_id(),
            tenant=tenant,
            name=request.name,
            status=JobStatus.SCHEDULED,
            schedule=schedule,
            target=request.target,
            payload=request.payload,
            priority=request.priority,
            retry=request.retry,
            concurrency=request.concurrency,
            misfire=request.misfire,
            catch_up_window_seconds=request.catch_up_window_seconds,
            next_fire_at=first_firing(schedule, now, now),
            created_at=now,
            updated_at=now,
            version=1,
        )
        return job.model_copy(update=self._admit_request(request, job))

    def _put_new(
        self, job: Job, now: datetime, listed: bool = True, due_listed: bool = False
    ) -> list[Run] | None:
        """Write a new job: a one-off due soon with its firing claimed, in one write. The runs
        claimed with it; None if the job exists already. Not `listed`: its batch's listing
        lists it (`Listing.list_together`); `due_listed`: its batch's due listing holds its
        firing (`DueIndex.list_due_together`)."""
        claiming = self._dispatcher.claimed_at_create(job, now)
        if claiming is None:
            return [] if self._store.put_job_if_absent(job, listed, due_listed) else None
        run = self._store.put_job_claimed_if_absent(job, claiming, now, listed, due_listed)
        return None if run is None else [run]

    def _enqueue_claimed(self, runs: list[Run]) -> None:
        if not runs:
            return
        try:
            self._dispatcher.enqueue(runs)  # one not sent: its timer has the poller send it
        except Exception:
            logger.exception(
                "send at create failed; the poller sends the runs",
                extra={"job_ids": [run.job_id for run in runs]},
            )

    def _after_put(self, job: Job, claimed: list[Run], now: datetime) -> Job:
        """The job as its create answers it, written (with `claimed`, the runs claimed in its
        write). A job written unclaimed has its firings due soon claimed now; a claim that
        fails leaves them to the poller."""
        if claimed:
            return job.model_copy(update={"version": job.version + 1, "next_fire_at": None})
        try:
            return self._dispatcher.claim_and_enqueue(job, now).job
        except Exception:
            logger.exception(
                "claim at create failed; the poller claims the job", extra={"job_id": job.job_id}
            )
            return job

    def get(self, tenant: str, job_id: str) -> Job:
        job = self._store.get_job(job_id)
        if job is None or job.tenant != tenant or job.kind is not JobKind.JOB:
            raise NotFound(f"job '{job_id}' not found")
        return job

    def list(
        self,
        tenant: str,
        limit: int,
        cursor: str | None,
        status: JobStatus | None,
        name_prefix: str | None = None,
    ) -> Page:
        with _cursor_checked():
            return self._store.list_jobs(tenant, limit, cursor, status, name_prefix)

    def cancel(self, tenant: str, job_id: str) -> Job:
        """Cancel a job (see docs/concepts/job-control.md, "Cancel"): the job's write first,
        then the sweep of its waiting runs (`JobControl.cancel_waiting_runs`)."""
        job = self.get(tenant, job_id)
        if job.status in (JobStatus.SCHEDULED, JobStatus.PAUSED):
            self._store.cancel_job_if_active(job_id, self._clock.now())
            job = self.get(tenant, job_id)
        if self._quotas is not None:  # also when cancelled already: a cancel that failed after its write
            self._quotas.ended(job_id)
        if job.status is JobStatus.COMPLETED:
            raise Conflict(f"job '{job_id}' already completed; there is nothing left to cancel")
        # Also when it was cancelled already: a cancel that failed after the job's write sweeps.
        self._control.cancel_waiting_runs(job_id)
        return job

    def pause(self, tenant: str, job_id: str) -> Job:
        return self._control.pause(self.get(tenant, job_id))

    def resume(self, tenant: str, job_id: str) -> Job:
        return self._control.resume(self.get(tenant, job_id))

    def backfill(self, tenant: str, job_id: str, request: Backfill) -> dict[str, int]:
        """Run the job's firings from `start` to `end` that have no run yet (`JobControl.backfill`)."""
        made, already = self._control.backfill(self.get(tenant, job_id), request.start, request.end)
        return {"runs": len(made), "already_run": already}

    def trigger(self, tenant: str, job_id: str) -> Run:
        return self._control.trigger(self.get(tenant, job_id))

    def update(self, tenant: str, job_id: str, patch: JobPatch, if_match: int | None = None) -> Job:
        before = self.get(tenant, job_id)
        schedule = patch.changes().get("schedule")
        if self._quotas is None or schedule is None:
            return self._control.update(before, patch, if_match)
        # A new schedule may move the job to another count (recurring, or a one-off's minute).
        after = before.model_copy(update={"schedule": schedule})
        return self._quotas.changing(before, after, lambda: self._control.update(before, patch, if_match))

    def list_runs(
        self, tenant: str, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None
    ) -> Page:
        self.get(tenant, job_id)
        with _cursor_checked():
            return self._store.list_runs(job_id, limit, cursor, status)

    def get_run(self, tenant: str, job_id: str, run_id: str) -> Run:
        self.get(tenant, job_id)
        scheduled_ms = keys.run_time_of(job_id, run_id)
        run = self._store.get_run(job_id, scheduled_ms) if scheduled_ms is not None else None
        if run is None:
            raise NotFound(f"run '{run_id}' not found for job '{job_id}'")
        return run

    def retry_run(self, tenant: str, job_id: str, run_id: str) -> Run:
        """Re-drive a FAILED run: a new attempt now, with a fresh round of `max_attempts`."""
        job = self.get(tenant, job_id)
        run = self.get_run(tenant, job_id, run_id)
        if job.status is JobStatus.CANCELLED:
            raise Conflict(f"job '{job_id}' is cancelled; its runs cannot be retried")
        if job.status is JobStatus.PAUSED:
            # The worker would set it aside until the resume, whose misfire policy may then
            # drop it: a retry asked for now must not wait for that, nor vanish in it.
            raise Conflict(f"job '{job_id}' is paused; resume it, then retry the run")
        if run.status is not RunStatus.FAILED:
            raise Conflict(f"run '{run_id}' is {run.status}; only a FAILED run can be retried")
        redriven = self._lifecycle.redrive(run, job)
        if redriven is None:
            raise Conflict(f"run '{run_id}' changed while it was being retried; read it again")
        return redriven
