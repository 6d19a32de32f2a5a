"""The interfaces the services depend on. Adapters (`adapters/dynamodb`, `queues`,
`targets`) implement them with boto3; `tests/support` has in-memory fakes of each."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from scheduler_core.domain.entities import Attempt, Job, Run
from scheduler_core.domain.messages import DeadLetter
from scheduler_core.domain.overlap import SlotsAsRead
from scheduler_core.domain.vocabulary import JobStatus, RunStatus
from scheduler_core.domain.workflows import Phase, WorkflowState
from scheduler_core.poll_ports import DueIndex, Watermarks


@dataclass(frozen=True)
class Page:
    """One page of a listing; `next_cursor` is opaque to callers (None at the end)."""

    items: list[Any]
    next_cursor: str | None


class RunRef(Protocol):
    """One attempt of one run, as a queue message or a run names it."""

    @property
    def job_id(self) -> str: ...

    @property
    def scheduled_for_ms(self) -> int: ...

    @property
    def attempt(self) -> int: ...

    @property
    def with_job(self) -> bool: ...


class StoreContention(Exception):
    """A write failed for a reason worth retrying later (throttling, transaction conflict),
    as opposed to a lost race, which callers see as a False/None result."""


class SlotsChanged(Exception):
    """A write conditioned on a job's running slots (`running_count`, `buffered_run_ms`) as
    read found them changed: read the job again and decide again."""


class CursorNotValid(Exception):
    """A listing's cursor that is not one it handed out: not decodable, another listing's, or
    another tenant's or job's. The caller's mistake: say so and ask for `next_cursor` back."""


class KeyReused(Exception):
    """An idempotency key sent again with another request than the one it was first sent with."""


class KeyInUse(Exception):
    """The first request with an idempotency key is still being served."""


class CreateOnce(Protocol):
    """Runs a job's creation once per (tenant, idempotency key) for a while (see `idempotency`)."""

    def job_id(self, tenant: str, key: str, body: dict[str, Any], create: Callable[[], str]) -> str:
        """The id of the job `create` made for this key: made now, or by an earlier request
        with the same `body`. KeyReused for another body, KeyInUse while the first runs."""
        ...

    def begin_invocation(self, context: Any) -> None:
        """Called once per API invocation with its Lambda context."""
        ...


class JobRecords(Protocol):
    """A job created once, read, replaced if unchanged since it was read, cancelled while active."""

    def put_job_if_absent(self, job: Job, listed: bool = True, due_listed: bool = False) -> bool:
        """A new job; False if one with its id exists. Not `listed`: the tenant's listing
        finds it through the listing its batch wrote first (`Listing.list_together`);
        `due_listed`: the polls find its firing through the due listing its batch wrote first
        (`DueIndex.list_due_together`)."""
        ...

    def put_job_claimed_if_absent(
        self, job: Job, run: Run, now: datetime, listed: bool = True, due_listed: bool = False
    ) -> Run | None:
        """A new job written with its only firing (`run`) claimed, as a put and the claim of
        that firing would leave it; the run as claimed, or None if the job exists already."""
        ...

    def list_due_together(self, listing_id: str, jobs: Sequence[Job]) -> None:
        """Hold the firings of `jobs` (one-offs of a batch, each with its firing, about to be
        written `due_listed`) in the due index together, under `listing_id` (a new id each
        time): the polls find them there as by entries of their own."""
        ...

    def get_job(self, job_id: str) -> Job | None: ...

    def get_jobs(self, job_ids: Sequence[str], consistent: bool = True) -> dict[str, Job]:
        """The jobs of `job_ids` that exist, by id; strongly consistent unless not
        `consistent` (half the read units: a job written in the last second may be missed)."""
        ...

    def update_job_if_unchanged(
        self,
        before: Job,
        after: Job,
        now: datetime,
        run: Run | None = None,
        catch_up: Sequence[int] = (),
    ) -> bool: ...

    def cancel_job_if_active(self, job_id: str, now: datetime) -> bool: ...

    def keep_ended_job_until(self, job_id: str, when: datetime) -> bool:
        """An ended job (it carries an expiry) kept for the run retention counted from `when`
        instead, if that is later; False if it has not ended, has gone, or is kept longer."""
        ...


class Listing(Protocol):
    """A tenant's jobs and a job's runs, newest first, a page at a time."""

    def list_jobs(
        self,
        tenant: str,
        limit: int,
        cursor: str | None,
        status: JobStatus | None,
        name_prefix: str | None = None,
    ) -> Page: ...

    def list_together(self, tenant: str, listing_id: str, job_ids: Sequence[str], now: datetime) -> None:
        """List `job_ids` (jobs of `tenant` a batch is about to write, not `listed`) among the
        tenant's jobs as made `now`, under one listing (`listing_id`: written again with more
        ids, it lists them all)."""
        ...

    def list_runs(
        self, job_id: str, limit: int, cursor: str | None, status: RunStatus | None = None
    ) -> Page: ...

    def recent_runs(
        self,
        job_id: str,
        limit: int,
        *,
        after: datetime | None = None,
        statuses: Collection[RunStatus] | None = None,
    ) -> list[Run]: ...


class RunRecords(Protocol):
    """A run read, alone or with its job, or created once."""

    def get_run(self, job_id: str, scheduled_for_ms: int) -> Run | None: ...

    def get_runs(self, refs: Sequence[tuple[str, int]]) -> list[Run | None]:
        """Runs by (job id, scheduled time), in the order asked; None where there is none."""
        ...

    def get_job_and_run(self, job_id: str, scheduled_for_ms: int) -> tuple[Job | None, Run | None]: ...

    def put_run_if_absent(self, run: Run, now: datetime) -> bool: ...


class RunTransitions(Protocol):
    """A run moved along its state machine (`run_state`), each write fenced by the attempt
    (and, for a running attempt, the lease owner) it expects: the worker's start and end, the
    timers' re-send and take-over, a pause's setting aside, a cancel, a re-drive."""

    def start_run_if_waiting(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str, timer: datetime | None = None
    ) -> Run | None: ...

    def extend_lease_if_held(self, run: RunRef, owner: str, lease_until: datetime) -> bool: ...

    def finish_run_if_held(
        self,
        run: RunRef,
        owner: str,
        status: RunStatus,
        now: datetime,
        error: str | None = None,
        response_code: int | None = None,
        lateness_ms: int | None = None,
        complete_job: bool = False,
        output: str | None = None,
    ) -> bool: ...

    def record_late_success_if_may_run_again(
        self, run: RunRef, response_code: int | None, now: datetime
    ) -> bool: ...

    def retry_run_if_held(
        self,
        run: RunRef,
        owner: str,
        ended: Attempt,
        next_attempt_at: datetime,
        due_at: datetime,
        lateness_ms: int | None = None,
    ) -> Run | None: ...

    def move_timer_to_lease_if_unchanged(self, run: Run) -> bool: ...

    def take_over_expired_lease(
        self,
        run: Run,
        now: datetime,
        status: RunStatus,
        error: str,
        next_attempt_at: datetime | None = None,
        due_at: datetime | None = None,
        complete_job: bool = False,
    ) -> Run | None: ...

    def resend_if_unchanged(self, run: Run, due_at: datetime, caught_up: bool = False) -> bool: ...

    def fail_waiting_run(self, run: Run, now: datetime, error: str) -> bool: ...

    def redrive_run_if_failed(self, run: Run, now: datetime, due_at: datetime) -> Run | None: ...

    def wait_turn_if_waiting(self, run: RunRef, due_at: datetime) -> bool: ...

    def set_aside_while_paused(self, run: RunRef, due_at: datetime) -> bool | None: ...

    def set_aside_if_held(self, run: Run, owner: str, due_at: datetime) -> bool | None: ...

    def cancel_run_if_not_started(self, run: RunRef, now: datetime) -> bool: ...


class RunningSlots(Protocol):
    """A run admitted under its job's concurrency policy (`overlap`), each write conditioned
    on the job's running slots as the service read them."""

    def start_run_in_slot(
        self,
        run: Run,
        slots: SlotsAsRead,
        now: datetime,
        lease_until: datetime,
        owner: str,
        timer: datetime | None = None,
    ) -> Run | None: ...

    def start_kept_run_if_job_idle(
        self, run: RunRef, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        """Start a run kept on its job's item without reading it first, in a running slot,
        if it waits at this attempt (nothing recorded on it, its re-send timer within the
        lease) and its job is SCHEDULED with nothing running or waiting for a slot (then
        every concurrency policy starts it). The job and the run as written; None if not."""
        ...

    def claim_and_start_if_unchanged(
        self, run: Run, seen_version: int, now: datetime, lease_until: datetime, owner: str
    ) -> tuple[Job, Run] | None:
        """Claim a one-off's firing that a poll sent without a claim (`run.claim_version`)
        and start its run, kept on the job's item, in a running slot: one write, if the job
        is still as the poll read it (`seen_version`, SCHEDULED, that firing next) and keeps
        no run. `run`: the run as its claim would make it (its re-send timer within the
        lease). The job and the run as written; None if not."""
        ...

    def buffer_run_if_waiting(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool: ...

    def skip_run_if_waiting(
        self, run: RunRef, slots: SlotsAsRead, now: datetime, reason: str, complete_job: bool = False
    ) -> bool: ...

    def rejoin_catch_up_queue(self, run: RunRef, slots: SlotsAsRead, due_at: datetime) -> bool: ...

    def leave_catch_up_queue(self, job_id: str, run_ms: int) -> bool: ...

    def clear_buffered_run(self, job_id: str, run_ms: int) -> bool: ...


class WorkflowRuns(Protocol):
    """A workflow run begun, moved on by its tasks' ends (each change conditioned on the
    version of the phases it was computed from), ended; its task runs read together."""

    def begin_workflow_run_if_held(
        self, run: Run, owner: str, state: WorkflowState, timer: datetime
    ) -> Run | None: ...

    def advance_workflow_run_if_unchanged(
        self,
        run: Run,
        phases: Mapping[str, Phase],
        now: datetime,
        *,
        timer: datetime | None = None,
        end: RunStatus | None = None,
        complete_job: bool = False,
    ) -> bool: ...

    def cancel_started_workflow_run_if_not_begun(self, run: Run, now: datetime) -> bool: ...

    def reopen_workflow_run_if_unchanged(
        self, run: Run, phases: Mapping[str, Phase], timer: datetime
    ) -> bool: ...


class Secrets(Protocol):
    """Values kept encrypted at rest (KMS): each sealed under an encryption context naming
    what it belongs to, so a sealed value moved to another tenant, job or header no longer
    opens."""

    def seal(self, plaintext: str, context: Mapping[str, str]) -> str: ...

    def unseal(self, sealed: str, context: Mapping[str, str]) -> str: ...

    def reseal(self, sealed: str, context: Mapping[str, str], new_context: Mapping[str, str]) -> str:
        """A sealed value moved to `new_context` (what it belongs to has a new name)."""
        ...


class RoleDirectory(Protocol):
    """The IAM roles of the stack's account, as the API checks a target's execution role."""

    def trust_policy(self, role_arn: str) -> Mapping[str, Any] | None:
        """The role's trust policy; None when the account has no role of that ARN."""
        ...


@dataclass(frozen=True)
class SealedSigningKeys:
    """A tenant's webhook signing keys as stored: sealed (`Secrets`), versioned, with what
    may be shown without opening them."""

    sealed: str
    version: int
    created_at: datetime
    previous_until: datetime | None


class SigningKeyRecords(Protocol):
    """Per tenant, its webhook signing keys (domain/webhooks.py), sealed."""

    def get_signing_keys(self, tenant: str) -> SealedSigningKeys | None: ...

    def put_signing_keys_if_unchanged(
        self, tenant: str, keys: SealedSigningKeys, expected_version: int | None
    ) -> bool:
        """Write `keys` if the tenant's stored version is still `expected_version` (None: the
        tenant has none yet); False when another write came first."""
        ...


class AuditLog(Protocol):
    """Where the API writes one line per mutating call: who, what, which, when."""

    def record(self, entry: Mapping[str, Any]) -> None: ...


class QuotaCounters(Protocol):
    """Per tenant, counters of what it holds (domain/quotas.py)."""

    def charge_if_within(
        self, tenant: str, counter: str, limit: int, expires_at: datetime | None, count: int = 1
    ) -> int | None:
        """Add `count` to the tenant's `counter` unless that takes it over `limit`; the count
        after, or None (refused: nothing added)."""
        ...

    def refund(self, tenant: str, counter: str, count: int = 1) -> None:
        """Take `count` off the tenant's `counter`, unless that would take it below zero."""
        ...

    def mark_quota_released_if_ended(self, job_id: str) -> Job | None:
        """Mark an ended (CANCELLED or COMPLETED) job's counts as given back, once: the job
        as stored when this call marked it, None when it is not ended or was marked already."""
        ...


class JobStore(JobRecords, Listing, RunRecords, RunTransitions, RunningSlots, DueIndex, Watermarks, Protocol):
    """Every port of the jobs table: what the composition root builds and hands each service,
    which names only the ports it uses."""


class RunQueue(Protocol):
    def send_runs(self, runs: list[Run]) -> list[Run]:
        """Enqueue runs on their priority queues, each delayed until its time; returns the
        runs that could not be sent (never raises for a failed send)."""
        ...

    def send_dead_letter(self, record: DeadLetter) -> bool:
        """Put a record of a run whose attempts are spent on the DLQ; False if it failed."""
        ...


@dataclass(frozen=True)
class Delivery:
    """What a target said: ok, or an error and whether trying again may help."""

    ok: bool
    status_code: int | None = None
    error: str | None = None
    retryable: bool = False
    # What the target answered, as JSON text (a workflow task's output, for the tasks after
    # it): an HTTP 2xx body that is JSON of at most MAX_OUTPUT_BYTES, else the message or
    # event id AWS gave; None when there is none.
    output: str | None = None


class TargetInvoker(Protocol):
    def deliver(self, job: Job, run: Run) -> Delivery: ...

    def begin_invocation(self, context: Any) -> None:
        """Called once per worker invocation with its Lambda context."""
        ...


class MessageLease(Protocol):
    """The queue message a worker is processing."""

    def hide_for(self, seconds: int) -> None:
        """Keep the message invisible for `seconds` from now (extend or shorten its lease)."""
        ...


@dataclass(frozen=True)
class DeadLetterMessage:
    message_id: str
    receipt_handle: str
    body: str


class DeadLetterQueue(Protocol):
    """The DLQ as a pass reads it."""

    def receive(self, max_messages: int) -> list[DeadLetterMessage]:
        """Up to `max_messages` (≤ 10) messages, hidden from other receives for the pass."""
        ...

    def delete(self, messages: Sequence[DeadLetterMessage]) -> int:
        """Delete handled messages; how many were deleted (failures are logged)."""
        ...

    def release(self, messages: Sequence[DeadLetterMessage]) -> None:
        """Make messages left on the queue visible again now."""
        ...
