"""The poll's outbox: claimed runs leave a full batch of one priority at a time; what is
left goes at the flush; what a send could not deliver is kept for the report."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from scheduler_core.domain.entities import Run
from scheduler_core.domain.messages import Outbox
from scheduler_core.domain.vocabulary import Priority

AT = datetime(2030, 1, 1, tzinfo=UTC)


def run_of(number: int, priority: Priority) -> Run:
    return Run(
        run_id=f"job-{number}:1",
        job_id=f"job-{number}",
        status="PENDING",
        trigger="SCHEDULE",
        scheduled_for=AT,
        attempt=1,
        priority=priority,
    )


def test_a_batch_leaves_when_one_priority_fills_it_and_the_rest_at_the_flush() -> None:
    sent: list[list[str]] = []

    def send(runs: list[Run]) -> list[Run]:
        sent.append([run.job_id for run in runs])
        return []

    outbox = Outbox(send, batch=3)

    for number in range(4):
        outbox.add([run_of(number, Priority.HIGH if number % 2 else Priority.LOW)])
    outbox.add([run_of(4, Priority.LOW)])  # the third LOW: its batch is full
    assert sent == [["job-0", "job-2", "job-4"]]

    outbox.flush()
    assert sent == [["job-0", "job-2", "job-4"], ["job-1", "job-3"]]
    outbox.flush()
    assert len(sent) == 2  # nothing left to send twice


def test_what_a_send_could_not_deliver_is_kept_from_every_thread() -> None:
    def send(runs: list[Run]) -> list[Run]:
        return runs[:1]  # the first of each batch is refused

    outbox = Outbox(send, batch=2)
    threads = [
        threading.Thread(target=lambda n=n: outbox.add([run_of(n, Priority.NORMAL)])) for n in range(40)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outbox.flush()

    assert len(outbox.unsent) == 20
    assert len({run.run_id for run in outbox.unsent}) == 20
