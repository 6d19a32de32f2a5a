from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler_core.domain.messages import delay_seconds

NOW = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fire_in", "delay"),
    [
        (timedelta(seconds=0), 0),
        (timedelta(milliseconds=999), 0),  # the worker waits the fraction itself
        (timedelta(seconds=1, milliseconds=999), 1),  # floored, never late
        (timedelta(seconds=119, milliseconds=500), 119),
        (timedelta(seconds=900), 900),
        (timedelta(hours=1), 900),  # SQS's ceiling
        (timedelta(seconds=-30), 0),  # already due
    ],
)
def test_delay_is_the_whole_seconds_left_clamped_to_what_sqs_takes(fire_in: timedelta, delay: int) -> None:
    assert delay_seconds(NOW + fire_in, NOW) == delay


@pytest.mark.parametrize(
    ("fire_in", "delay"),
    [
        (timedelta(seconds=10, milliseconds=300), 9),
        (timedelta(seconds=1, milliseconds=500), 0),
        (timedelta(seconds=0), 0),
        (timedelta(seconds=1000), 900),
    ],
)
def test_a_lead_makes_the_message_visible_that_many_seconds_early(fire_in: timedelta, delay: int) -> None:
    assert delay_seconds(NOW + fire_in, NOW, lead_seconds=1) == delay
