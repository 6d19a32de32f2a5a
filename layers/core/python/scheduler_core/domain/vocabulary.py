"""The scheduler's vocabulary: the enums every layer speaks and the limits the API holds
requests to. Imports nothing of the scheduler's own: everything else may import it."""

from __future__ import annotations

from enum import StrEnum


class Priority(StrEnum):
    HIGH = "HIGH"
    NORMAL = "NORMAL"
    LOW = "LOW"


class JobKind(StrEnum):
    """What a job item is: a job of the jobs API, a workflow (its firings are workflow runs),
    or one task of a workflow (its runs are the task's, one per workflow run; never listed,
    never fired by a schedule of its own)."""

    JOB = "JOB"
    WORKFLOW = "WORKFLOW"
    TASK = "TASK"


class JobStatus(StrEnum):
    SCHEDULED = "SCHEDULED"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"


# A job in one of these fires no more; it is kept for the run retention after its last
# change, then expires (docs/concepts/guarantees.md, "Run history").
ENDED_JOB = frozenset({JobStatus.COMPLETED, JobStatus.CANCELLED})


class RunStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    RETRYING = "RETRYING"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"
    CANCELLED = "CANCELLED"


class Trigger(StrEnum):
    SCHEDULE = "SCHEDULE"
    MANUAL = "MANUAL"
    BACKFILL = "BACKFILL"  # one of a backfill's runs: a past firing run again, asked for by name
    RETRY = "RETRY"


class TriggerRule(StrEnum):
    """When a workflow task runs, from its direct upstream tasks' ends (Airflow's meanings,
    docs/concepts/workflows.md)."""

    ALL_SUCCESS = "ALL_SUCCESS"  # every upstream task succeeded
    ALL_DONE = "ALL_DONE"  # every upstream task ended, however
    ONE_SUCCESS = "ONE_SUCCESS"  # one upstream task succeeded (it does not wait for the others)
    ONE_FAILED = "ONE_FAILED"  # one upstream task failed (it does not wait for the others)
    NONE_FAILED = "NONE_FAILED"  # every upstream task ended, none failed (skipped ones allowed)


class TaskStatus(StrEnum):
    """A task's status in a workflow run: waiting for its upstream tasks (PENDING, also once
    released until its run is picked up), its run's status, or decided without a run."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    RETRYING = "RETRYING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UPSTREAM_FAILED = "UPSTREAM_FAILED"  # its rule can no longer be met; never sent
    SKIPPED = "SKIPPED"  # its rule says it is not needed; never sent


class WorkflowRunStatus(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


# Runs asked for by name (a trigger, a backfill): no firing's run, so they go on while their
# job is paused, never complete it, and a resume leaves them be.
BY_NAME = frozenset({Trigger.MANUAL, Trigger.BACKFILL})


class Overlap(StrEnum):
    """What a run due to start does when `max_running` runs of its job are running."""

    SKIP = "SKIP"  # it ends SKIPPED, its target not called
    BUFFER_ONE = "BUFFER_ONE"  # it waits for a slot, if no other run waits already (else SKIPPED)
    ALLOW = "ALLOW"  # it starts: no limit


class MisfirePolicy(StrEnum):
    FIRE_ONCE = "FIRE_ONCE"
    SKIP = "SKIP"
    CATCH_UP = "CATCH_UP"


# A firing is spread over at most a day (and never over more than the schedule's interval).
MAX_JITTER_SECONDS = 86_400

# An HTTP target: its URL, and its headers (how many, how long each value).
MAX_URL_LENGTH = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE_LENGTH = 4096

# The highest `concurrency.max_running` a job may ask for.
MAX_RUNNING_LIMIT = 1_000

# How far back a CATCH_UP job catches up missed firings (`misfire`).
DEFAULT_CATCH_UP_WINDOW_SECONDS = 3_600
MIN_CATCH_UP_WINDOW_SECONDS = 60
MAX_CATCH_UP_WINDOW_SECONDS = 7 * 86_400

# The longest `error` a run keeps (characters); a longer one is cut.
MAX_RUN_ERROR = 2000
# The longest error a run keeps of each earlier attempt (`Run.past_attempts`), and how many
# earlier attempts a re-drive keeps (the oldest beyond that are dropped; the round after it
# adds at most `max_attempts` more): a run's item stays small whatever its errors and however
# often it is re-driven.
MAX_PAST_ATTEMPT_ERROR = 500
MAX_PAST_ATTEMPTS = 40

# Where an EVENTBRIDGE event's `detail` or a LAMBDA event carries the run's ids (DESIGN §7).
RUN_METADATA_KEY = "scheduler"

# The most runs one backfill makes (its window's firings).
MAX_BACKFILL_RUNS = 1_000
# A workflow: how many tasks, how many dependencies in all, what a task id may be.
MAX_WORKFLOW_TASKS = 100
MAX_WORKFLOW_EDGES = 1_000
TASK_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# The largest output a workflow task keeps (its target's JSON answer, in bytes).
MAX_OUTPUT_BYTES = 64 * 1024
# Where a workflow task's object payload gets its direct upstream tasks' outputs.
UPSTREAM_KEY = "upstream"
