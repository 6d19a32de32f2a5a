"""Fair share between tenants (domain/fairness.py): a poll's page of due jobs is claimed and
sent by due time, round-robin by tenant within each due time."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler_core.domain.fairness import fair_order
from tests.support.builders import T0, a_job


def job(name: str, tenant: str, seconds: int = 0):
    return a_job(name, tenant=tenant, next_fire_at=T0 + timedelta(seconds=seconds))


def test_a_flood_of_one_tenant_does_not_go_out_ahead_of_another_tenants_jobs_due_then() -> None:
    flood = [job(f"a{i}", "A") for i in range(300)]
    few = [job(f"b{i}", "B") for i in range(10)]

    ordered = fair_order(flood + few)  # as the index might list them: A's first

    positions = [index for index, j in enumerate(ordered) if j.tenant == "B"]
    assert positions == list(range(1, 20, 2))  # B's among the first 20
    assert [j.job_id for j in ordered if j.tenant == "A"] == [j.job_id for j in flood]  # A's order kept


def test_an_earlier_due_time_still_goes_first_whatever_the_tenant() -> None:
    late_b = job("b-late", "B", seconds=30)
    early_a = [job(f"a{i}", "A") for i in range(3)]

    assert fair_order([late_b, *early_a])[-1] is late_b


@given(
    st.lists(st.tuples(st.sampled_from("ABC"), st.integers(0, 3)), max_size=40),
)
def test_fair_order_is_a_permutation_sorted_by_due_time_with_each_tenants_order_kept(items) -> None:
    jobs = [job(f"j{i}", tenant, seconds) for i, (tenant, seconds) in enumerate(items)]

    ordered = fair_order(jobs)

    assert sorted(j.job_id for j in ordered) == sorted(j.job_id for j in jobs)
    assert [j.next_fire_at for j in ordered] == sorted(j.next_fire_at for j in jobs)
    for tenant in "ABC":
        assert [j.job_id for j in ordered if j.tenant == tenant] == [
            j.job_id for j in sorted(jobs, key=lambda j: j.next_fire_at) if j.tenant == tenant
        ]
