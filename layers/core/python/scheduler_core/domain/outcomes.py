"""What the worker's handling of one message comes to (`Outcome`), the words its log lines
end with, and the small judgements the start and the run's end share. Pure."""

from __future__ import annotations

from enum import StrEnum

from scheduler_core.domain.entities import Job, Run
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.run_state import WAITING
from scheduler_core.domain.vocabulary import BY_NAME, JobStatus

RUN_FINISHED = "run finished"  # the log message of every attempt's outcome
TAKEN_OVER = "run taken over by another attempt"  # how an attempt that lost its lease ends its line
# How often a start is decided again when the job's running slots changed meanwhile.
ADMISSION_TRIES = 5


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    RETRYING = "RETRYING"  # the attempt failed; the next one is scheduled
    FAILED = "FAILED"
    DUPLICATE = "DUPLICATE"  # the run was not waiting for this attempt: acknowledged, dropped
    CANCELLED = "CANCELLED"
    SET_ASIDE = "SET_ASIDE"  # its job is paused: the run waits for the resume; acknowledged
    WAITING_TURN = "WAITING_TURN"  # a caught-up run waits its turn for a running slot; acknowledged
    JOB_GONE = "JOB_GONE"
    LEASE_LOST = "LEASE_LOST"  # another attempt owns the run now; our result is discarded
    SKIPPED = "SKIPPED"  # the job's running slots were taken (overlap): the target was not called
    BUFFERED = "BUFFERED"  # waits for a running slot (overlap BUFFER_ONE); acknowledged
    BEGUN = "BEGUN"  # a workflow run began: its first tasks were released


def waits_for(run: Run, message: RunMessage) -> bool:
    """Whether `run` (as read) waits for the attempt `message` carries."""
    return run.attempt == message.attempt and run.status in WAITING


def goes_on_while_paused(job: Job, run: Run) -> bool:
    """A paused job stops its scheduled runs, not a manual or backfill one: asked for by name."""
    return job.status is JobStatus.PAUSED and run.trigger in BY_NAME
