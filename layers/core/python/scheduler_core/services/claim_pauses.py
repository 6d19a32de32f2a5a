"""How long a poll's or a create's claim is tried again while the store is contended
(`contention.through_contention` runs the tries; `dispatch` claims)."""

from __future__ import annotations

from datetime import datetime, timedelta

# Pauses between the tries of a contended claim; after the last, the firing waits for a later poll.
CONTENTION_PAUSES_MS = (50, 200)
# In a poll, the claim of a recurring job's firing whose run starts within URGENT_WITHIN (or
# is past), which the next poll (a minute on, and a while into its read) would make too late
# to be on time, is tried after these pauses (7.75 s in all), up to the poll's stop. It is a
# transaction, which botocore does not retry when throttled; a busy table throttles for
# seconds at the crons' :00 burst of starts and ends, while the polls claim those crons'
# next firings. (A one-off's claim is one UpdateItem, which botocore retries itself.)
URGENT_CONTENTION_PAUSES_MS = (50, 200, 500, 1000, 2000, 4000)
URGENT_WITHIN = timedelta(seconds=90)


def claim_pauses(starts_at: datetime, recurring: bool, now: datetime, in_poll: bool) -> list[timedelta]:
    """The pauses of a claim of the firing whose run starts at `starts_at` (`recurring`: the
    job fires again after it), read at `now`, in a poll or not (a create, which answers a
    request: briefly)."""
    urgent = in_poll and recurring and starts_at < now + URGENT_WITHIN
    return [
        timedelta(milliseconds=pause)
        for pause in (URGENT_CONTENTION_PAUSES_MS if urgent else CONTENTION_PAUSES_MS)
    ]
