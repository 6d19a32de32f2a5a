"""Misfire policies: which of the firings a job missed run, each as its own run, as its
`misfire` says (`select`). Pure: schedule math only. What counts as missed and what each
policy runs is written once, in docs/concepts/misfires.md (at a resume, in job-control.md).

Why a tolerance rather than "any firing in the past": the poller claims firings ahead of
their time (its lookahead), so only a firing nothing claimed in time is more than
`TOLERANCE` past; one a late poll claims a few seconds after its time is late, and runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from scheduler_core.domain.schedule import ScheduleSpec, latest_fire_at_or_before
from scheduler_core.domain.vocabulary import MisfirePolicy

# How far in the past a firing may be when it is claimed and still count as on time (the
# same skew a create allows an `at` in the past).
TOLERANCE = timedelta(seconds=60)
# The most missed firings one catch-up runs: the newest ones in the window.
MAX_CATCH_UP_RUNS = 100

_MS = timedelta(milliseconds=1)


def is_misfire(fire_at: datetime, now: datetime) -> bool:
    """Whether the firing `fire_at`, not claimed before `now`, is missed (not just late)."""
    return fire_at < now - TOLERANCE


def oldest_kept(policy: MisfirePolicy, now: datetime, window: timedelta) -> datetime | None:
    """The oldest firing time `policy` still runs as its own run; None for FIRE_ONCE, whose
    one run stands for every missed firing however old."""
    if policy is MisfirePolicy.FIRE_ONCE:
        return None
    if policy is MisfirePolicy.SKIP:
        return now - TOLERANCE
    return now - max(window, TOLERANCE)


def select(
    firings: Sequence[datetime], now: datetime, policy: MisfirePolicy, window: timedelta
) -> list[datetime]:
    """Which of a job's `firings` run, each as its own run, oldest first.

    `firings`: the job's firings not run yet, oldest first, all at or before `now` (a poller
    that comes back after an outage, a resume). Those within `TOLERANCE` of now are late,
    not missed, and run under every policy (FIRE_ONCE folds them into its one run)."""
    if not firings:
        return []
    if policy is MisfirePolicy.FIRE_ONCE:
        return [firings[-1]]
    oldest = oldest_kept(policy, now, window)
    assert oldest is not None
    return [fire_at for fire_at in firings if fire_at >= oldest][-MAX_CATCH_UP_RUNS:]


def due_firings(
    spec: ScheduleSpec,
    anchor: datetime,
    since: datetime,
    now: datetime,
    policy: MisfirePolicy,
    window: timedelta,
) -> list[datetime]:
    """The schedule's firings in [`since`, `now`] that `select` may choose, oldest first:
    the newest one for FIRE_ONCE, else the newest `MAX_CATCH_UP_RUNS` no older than the
    policy keeps. Walks back from now, so a long outage costs no more than what it yields.
    `anchor`: where a rate counts from (the job's creation)."""
    limit = 1 if policy is MisfirePolicy.FIRE_ONCE else MAX_CATCH_UP_RUNS
    oldest = oldest_kept(policy, now, window)
    floor = since if oldest is None else max(since, oldest)
    found: list[datetime] = []
    when = now
    while len(found) < limit:
        fire_at = latest_fire_at_or_before(spec, anchor, when)
        if fire_at is None or fire_at < floor:
            break
        found.append(fire_at)
        when = fire_at - _MS
    found.reverse()
    return found


def firings_to_run(
    spec: ScheduleSpec,
    anchor: datetime,
    since: datetime,
    now: datetime,
    policy: MisfirePolicy,
    window: timedelta,
) -> list[datetime]:
    """Of the schedule's firings in [`since`, `now`] (none of them run yet), those that run,
    each as its own run, oldest first (see `select`)."""
    return select(due_firings(spec, anchor, since, now, policy, window), now, policy, window)
