"""The pure rules a batch create rests on: counts summed per counter (`domain.quotas.summed`)
and a refused item's fields named within it (`domain.errors.fields_within`)."""

from __future__ import annotations

import pytest

from scheduler_core.domain.errors import InvalidRequest, SchedulerError, field_error, fields_within
from scheduler_core.domain.quotas import Charge, QuotaExceeded, summed


def test_charges_on_one_counter_are_summed_in_the_order_counters_first_come() -> None:
    minute_a = Charge("MINUTE#202612010000", "tenant_max_firings_per_minute", 6000)
    minute_b = Charge("MINUTE#202612010001", "tenant_max_firings_per_minute", 6000)
    jobs = Charge("JOBS", "tenant_max_jobs", 10000)

    total = summed([minute_b, minute_a, minute_b, jobs, minute_b])

    assert [(charge.counter, charge.count) for charge in total] == [
        ("MINUTE#202612010001", 3),
        ("MINUTE#202612010000", 1),
        ("JOBS", 1),
    ]
    assert summed([]) == []


def test_a_refused_items_fields_and_message_name_it() -> None:
    with pytest.raises(SchedulerError) as raised, fields_within("jobs[3]", named_in_message=True):
        raise InvalidRequest("target.url is not https", [field_error("target.url", "must be https")])
    error = raised.value
    assert (error.status, error.code) == (400, "VALIDATION_ERROR")
    assert error.message == "jobs[3]: target.url is not https"
    assert error.details == [{"field": "jobs[3].target.url", "message": "must be https"}]


def test_a_quota_refusal_keeps_the_limits_name_and_a_workflow_task_keeps_its_message() -> None:
    with pytest.raises(SchedulerError) as raised, fields_within("jobs[1]", named_in_message=True):
        raise QuotaExceeded("min_interval_seconds", "fires every 60 s")
    assert raised.value.status == 429
    assert [detail["field"] for detail in raised.value.details] == ["min_interval_seconds"]
    assert raised.value.message.startswith("jobs[1]: ")

    with pytest.raises(SchedulerError) as raised, fields_within("tasks[0]"):
        raise InvalidRequest("bad", [{"message": "no field"}])
    assert raised.value.message == "bad"
    assert raised.value.details == [{"message": "no field", "field": "tasks[0]"}]
