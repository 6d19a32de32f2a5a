"""Random workflows through the real handlers on moto, their workers interleaved at random.

Each example makes a random DAG (up to 30 tasks, any trigger rules, each task's target
failing some attempts, one or two attempts allowed), triggers one workflow run and then, at
random: hands a random subset of the visible messages of the queues to the worker, in random
order and random batches (some messages sent twice first: SQS delivers at least once), has a
worker's join die after a task's end (or die between a join and the release it decided),
moves the clock on, polls, or lets the workflow run's watchdog (`reconcile`) catch up. Then
everything is drained and the watchdog given its time until nothing moves.

The script is drawn whole up front; the choices among the messages a step finds come from
that step's seed, so a failing example replays as drawn. The worker runs a batch's records
concurrently, as deployed: an outcome that hangs on a race the product loses only sometimes
shows as Hypothesis's Flaky error, which carries the failure.

Whatever the order: every attempt called its target at most once and a task succeeded at
most once (its run's start is fenced); each task ran iff its rule (written again here, from
Airflow's meanings) says so from how its upstream tasks ended, with their outputs; a task
that did not run is UPSTREAM_FAILED or SKIPPED as the rule says; the workflow run ended,
SUCCEEDED iff no task FAILED or UPSTREAM_FAILED, and gave its running slot back.
"""

from __future__ import annotations

import functools
import itertools
import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import boto3
import pytest
from freezegun import freeze_time
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st
from moto import mock_aws

from scheduler_core.adapters.aws import AwsClients
from scheduler_core.domain.messages import RunMessage
from scheduler_core.domain.vocabulary import Priority, RunStatus, TriggerRule
from scheduler_core.services import workflow_runs
from scheduler_core.services.workflow_runs import WorkflowRunner
from scheduler_core.settings import settings_from_env
from tests.integration.conftest import NOT_FROZEN, START
from tests.support.harness import FrozenClock, SchedulerHarness, create_scheduler_resources
from tests.support.receiver import Received, WebhookReceiver

R = TriggerRule
MAX_TASKS = 30
# Steps of random work before the drain (fewer once the workflow run has ended and nothing
# is visible any more).
MAX_STEPS = 40
# How often the drain gives the watchdog its time before the run must have ended.
SETTLE_ROUNDS = 12
WATCHDOG = workflow_runs.RECHECK + timedelta(seconds=1)
VISIBILITY = timedelta(seconds=541)  # past the queues' visibility timeout (and the lease)
# A message passed over this often is handed at last: moto dead-letters a message received
# maxReceiveCount (5) times, and an event source mapping does not receive without handing.
PASS_OVER_LIMIT = 3
# Interesting amounts of time: within a retry's backoff, past it, past the re-send timer.
ADVANCES = [1, 2, 10, 61]
# What becomes of one worker invocation: nothing, its joins die after the task's end is
# written, or each join dies between its write and the release of what it decided.
FAULTS = ["none"] * 8 + ["join dies", "release dies"]
ACTIONS = ["work", "work", "work", "work", "advance", "poll", "watchdog"]
ENDED_TASK = {"SUCCEEDED", "FAILED", "UPSTREAM_FAILED", "SKIPPED"}
FAILED_TASK = {"FAILED", "UPSTREAM_FAILED"}

_examples = itertools.count()


@dataclass(frozen=True)
class TaskPlan:
    task_id: str
    depends_on: tuple[str, ...]
    rule: TriggerRule
    max_attempts: int
    failures: int  # the attempts its target answers 500 before it answers 200
    priority: Priority

    def answers(self, calls: int) -> list[int]:
        """What its target answered to its first `calls` calls."""
        return [500 if index < self.failures else 200 for index in range(calls)]

    def __str__(self) -> str:
        parents = ",".join(self.depends_on) or "-"
        return (
            f"{self.task_id}<-[{parents}] {self.rule} attempts={self.max_attempts} "
            f"fails={self.failures} {self.priority}"
        )


@st.composite
def workflows(draw: st.DrawFn) -> list[TaskPlan]:
    size = draw(st.integers(1, MAX_TASKS), label="tasks")
    # How often its targets fail: never for good (a retry may still be needed), now and then,
    # or often (failures pass down: ONE_FAILED needs some, the rest needs runs that succeed).
    failing = draw(st.sampled_from(["never", "seldom", "often"]), label="failing")
    tasks = []
    for index in range(size):
        parents = draw(st.lists(st.integers(0, index - 1), unique=True, max_size=4)) if index else []
        attempts = draw(st.sampled_from([1, 2]))
        failures = {
            "never": st.integers(0, attempts - 1),
            "seldom": st.sampled_from([0, 0, 0, 0, 0, *range(1, attempts + 1)]),
            "often": st.integers(0, attempts),
        }[failing]
        tasks.append(
            TaskPlan(
                task_id=f"t{index}",
                depends_on=tuple(f"t{parent}" for parent in parents),
                rule=draw(st.sampled_from(list(R))),
                max_attempts=attempts,
                failures=draw(failures),
                priority=draw(st.sampled_from([Priority.NORMAL, Priority.LOW, Priority.HIGH])),
            )
        )
    return draw(st.permutations(tasks))


# A step of the script: what happens (`ACTIONS`), by how much an `advance` moves the clock,
# and the seed of a `work` step's choices among the messages it finds.
Step = tuple[str, int, int]
steps = st.tuples(st.sampled_from(ACTIONS), st.sampled_from(ADVANCES), st.integers(0, 2**32 - 1))


@functools.cache
def shared_clients() -> AwsClients:
    """One set of clients for every example (building them is the slow part of a fresh moto
    world); each example's `mock_aws` gives them empty services."""
    return AwsClients(boto3.session.Session(region_name="us-east-1"))


def _nothing(*_: object) -> None:
    return None


Pooled = tuple[Priority, dict[str, Any]]


@dataclass
class World:
    """One example's scheduler on moto, its workflow run, and what the test did to them."""

    cloud: SchedulerHarness
    clock: FrozenClock
    receiver: WebhookReceiver
    prefix: str
    plan: list[TaskPlan]
    workflow_id: str = ""
    run_id: str = ""
    arns: dict[Priority, str] = field(default_factory=dict)

    @property
    def sqs(self) -> Any:
        return self.cloud.clients.sqs()

    def path(self, task_id: str) -> str:
        return f"{self.prefix}/{task_id}"

    def start(self) -> None:
        for priority in Priority:
            url = self.cloud.queue_url(priority)
            attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            self.arns[priority] = attributes["Attributes"]["QueueArn"]
        tasks = [
            {
                "task_id": task.task_id,
                "target": {
                    "type": "HTTP",
                    "url": self.receiver.answer_on(
                        self.path(task.task_id), {"from": task.task_id}, (500,) * task.failures
                    ),
                },
                "depends_on": list(task.depends_on),
                "trigger_rule": str(task.rule),
                "retry": {"max_attempts": task.max_attempts, "backoff_seconds": 1},
                "priority": str(task.priority),
            }
            for task in self.plan
        ]
        reply = self.cloud.call("POST", "/v1/workflows", {"name": "random", "tasks": tasks})
        assert reply.status == 201, reply.body
        self.workflow_id = reply.body["workflow_id"]
        triggered = self.cloud.call("POST", f"/v1/workflows/{self.workflow_id}/trigger")
        assert triggered.status == 202, triggered.body
        self.run_id = triggered.body["workflow_run_id"]

    def workflow_run(self) -> dict[str, Any]:
        reply = self.cloud.call("GET", f"/v1/workflows/{self.workflow_id}/runs/{self.run_id}")
        assert reply.status == 200, reply.body
        body: dict[str, Any] = reply.body
        return body

    # --- the queues, as event source mappings would see them ----------------------------

    def label(self, message: dict[str, Any]) -> str:
        body = RunMessage.model_validate_json(message["Body"])
        owner = body.job_id.rpartition(".")[2] if "." in body.job_id else "workflow"
        return f"{owner}#{body.attempt}"

    def _receive_visible(self) -> list[Pooled]:
        pool: list[Pooled] = []
        for priority in Priority:
            url = self.cloud.queue_url(priority)
            while True:
                got = self.sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], WaitTimeSeconds=0
                ).get("Messages", [])
                if not got:
                    break
                pool += [(priority, message) for message in got]
        return pool

    def _order_key(self, pooled: Pooled) -> tuple[int, str, int]:
        """The same for the same message in every run of an example (ids are random)."""
        priority, message = pooled
        body = message["Body"].replace(self.workflow_id, "W")
        return (list(Priority).index(priority), body, int(message["Attributes"]["ApproximateReceiveCount"]))

    def receive(self) -> list[Pooled]:
        return sorted(self._receive_visible(), key=self._order_key)

    def nothing_visible(self) -> bool:
        return all(self.cloud.visible_messages(priority) == 0 for priority in Priority)

    def put_back(self, passed: list[Pooled]) -> None:
        for priority, message in passed:
            self.sqs.change_message_visibility(
                QueueUrl=self.cloud.queue_url(priority),
                ReceiptHandle=message["ReceiptHandle"],
                VisibilityTimeout=0,
            )

    def invoke(self, priority: Priority, batch: list[dict[str, Any]], fault: str) -> None:
        note(f"worker ({priority}, {fault}): {[self.label(message) for message in batch]}")
        if fault != "none":
            event(f"a worker's {fault}")
        with pytest.MonkeyPatch.context() as patch:
            if fault == "join dies":
                patch.setattr(WorkflowRunner, "task_run_ended", _nothing)
            elif fault == "release dies":
                patch.setattr(WorkflowRunner, "_release", _nothing)
            self.cloud.invoke_worker(batch, self.cloud.queue_url(priority), self.arns[priority])

    # --- the steps ------------------------------------------------------------------------

    def work(self, seed: int) -> None:
        """The visible messages, some sent twice first; a random subset of them handed to the
        worker in random order and random batches (one queue each); the rest put back. How
        many messages are visible is the system's doing: the choices among them come from
        `seed`, so that every example draws its whole script up front."""
        choose = random.Random(seed)
        pool = self.receive()
        if not pool:
            note("work: nothing visible")
            return
        if choose.random() < 0.25:
            for _ in range(choose.randint(1, 3)):
                priority, message = pool[choose.randrange(len(pool))]
                note(f"sent twice: {self.label(message)}")
                event("a message sent twice")
                self.sqs.send_message(QueueUrl=self.cloud.queue_url(priority), MessageBody=message["Body"])
            pool = sorted(pool + self._receive_visible(), key=self._order_key)
        order = choose.sample(range(len(pool)), len(pool))
        count = choose.randint(1, len(pool))
        must = [
            index
            for index in order[count:]
            if int(pool[index][1]["Attributes"]["ApproximateReceiveCount"]) >= PASS_OVER_LIMIT
        ]
        handed = [*order[:count], *must]
        self.put_back([pool[index] for index in order[count:] if index not in must])
        while handed:
            size = choose.randint(1, min(10, len(handed)))
            chunk, handed = handed[:size], handed[size:]
            for priority in dict.fromkeys(pool[index][0] for index in chunk):
                batch = [pool[index][1] for index in chunk if pool[index][0] is priority]
                self.invoke(priority, batch, choose.choice(FAULTS))

    def advance(self, seconds: float) -> None:
        note(f"advance {seconds}s")
        self.clock.advance(seconds)

    def poll(self) -> None:
        note("poll")
        for report in self.cloud.poll():
            for action in report.watched:
                if action in ("workflow_joined", "workflow_released"):
                    event(f"the watchdog caught up: {action}")

    def watchdog(self) -> None:
        """Past the workflow run's timer: the poller reconciles it."""
        self.advance(WATCHDOG.total_seconds())
        self.poll()

    def ended(self) -> bool:
        """Whether the workflow run has ended (read from the table: the API's view is slower)."""
        ms = int(self.run_id.rsplit(":", 1)[1])
        run = self.cloud.poll_store.get_run(self.workflow_id, ms)
        assert run is not None
        return run.status not in (RunStatus.PENDING, RunStatus.RUNNING)

    def settle(self) -> None:
        """No fault any more: deliver everything, give the watchdog its time, until the
        workflow run has ended and nothing is left to deliver (bounded); then once more past
        the queues' visibility timeout, so that every message still in flight comes back."""
        for _ in range(SETTLE_ROUNDS):
            self.cloud.deliver()
            if self.ended() and self.nothing_visible():
                break
            self.watchdog()
        self.clock.advance(VISIBILITY.total_seconds())
        self.cloud.poll()
        self.cloud.deliver()


def should_run(rule: TriggerRule, upstream: list[str]) -> bool:
    """Airflow's rules from the end state: whether a task whose direct upstream tasks ended so
    runs (a first task always does)."""
    if not upstream:
        return True
    failed = any(status in FAILED_TASK for status in upstream)
    return {
        R.ALL_SUCCESS: all(status == "SUCCEEDED" for status in upstream),
        R.ALL_DONE: True,
        R.ONE_SUCCESS: any(status == "SUCCEEDED" for status in upstream),
        R.ONE_FAILED: failed,
        R.NONE_FAILED: not failed,
    }[rule]


def not_run_as(rule: TriggerRule, upstream: list[str]) -> set[str]:
    """What a task that does not run may end as. ONE_FAILED: SKIPPED (no failure upstream).
    ONE_SUCCESS, decided once all upstream ended: SKIPPED if all were skipped, else
    UPSTREAM_FAILED. NONE_FAILED: UPSTREAM_FAILED. ALL_SUCCESS is decided at the first upstream
    task that did not succeed: UPSTREAM_FAILED for a failure, SKIPPED for a skip; with both
    upstream, whichever ended first decides."""
    failed = any(status in FAILED_TASK for status in upstream)
    skipped = "SKIPPED" in upstream
    if rule is R.ONE_FAILED:
        return {"SKIPPED"}
    if rule is R.ONE_SUCCESS:
        return {"SKIPPED"} if all(status == "SKIPPED" for status in upstream) else {"UPSTREAM_FAILED"}
    if rule is R.NONE_FAILED:
        return {"UPSTREAM_FAILED"}
    return {
        name for name, upstream_has in [("UPSTREAM_FAILED", failed), ("SKIPPED", skipped)] if upstream_has
    }


def check(world: World) -> None:
    run = world.workflow_run()
    tasks: dict[str, dict[str, Any]] = run["tasks"]
    status = {task_id: task["status"] for task_id, task in tasks.items()}
    note(f"ended: {run['status']} {status}")
    event(f"workflow run {run['status']}")
    for value in status.values():
        event(f"a task {value}")
    plan = {task.task_id: task for task in world.plan}
    assert set(status) == set(plan)
    # (3, first: what follows reads an ended run) No workflow run is left stuck.
    assert run["status"] not in ("PENDING", "RUNNING"), ("stuck", run["status"], status)

    # What each task's target saw, in the order the receiver recorded it.
    calls: dict[str, list[tuple[int, Received]]] = {task_id: [] for task_id in plan}
    for position, request in enumerate(world.receiver.requests):
        owner, _, task_id = request.path.removeprefix("/hook/").partition("/")
        if owner == world.prefix:
            calls[task_id].append((position, request))

    # (1) Each attempt called its target once at most, in turn; a task succeeded once at most,
    # and its run's record says what its target answered.
    for task_id, task in plan.items():
        seen = [request for _, request in calls[task_id]]
        attempts = [int(request.headers["x-scheduler-attempt"]) for request in seen]
        answers = task.answers(len(seen))
        assert attempts == list(range(1, len(seen) + 1)), (task_id, attempts)
        assert answers.count(200) <= 1, (task_id, attempts, answers)
        assert {request.headers["x-scheduler-run-id"] for request in seen} <= {tasks[task_id]["run_id"]}
        if status[task_id] == "SUCCEEDED":
            assert answers.count(200) == 1, (task_id, answers)
            assert answers[-1] == 200, (task_id, answers)
            assert tasks[task_id]["attempt"] == len(seen)
        elif status[task_id] == "FAILED":
            assert answers == [500] * task.max_attempts, (task_id, answers)
            assert tasks[task_id]["attempt"] == task.max_attempts
        else:
            assert seen == [], (task_id, status[task_id], attempts)
            assert tasks[task_id]["run_id"] is None, (task_id, tasks[task_id])

    # (2) Each task ran iff its rule says so from how its upstream tasks ended; one that did not
    # run ended as its rule says. One that ran was called after what it waited for, with its
    # upstream tasks' outputs.
    for task_id, task in plan.items():
        upstream = [status[parent] for parent in task.depends_on]
        assert status[task_id] in ENDED_TASK, (task_id, status[task_id])
        ran = status[task_id] in ("SUCCEEDED", "FAILED")
        expected = should_run(task.rule, upstream)
        assert ran == expected, (
            task_id,
            task.rule,
            status[task_id],
            dict(zip(task.depends_on, upstream, strict=True)),
        )
        assert ran == bool(calls[task_id]), (task_id, status[task_id])
        if not ran:
            assert status[task_id] in not_run_as(task.rule, upstream), (task_id, task.rule, upstream)
            continue
        first, request = calls[task_id][0]
        outputs = request.body["upstream"]
        assert set(outputs) == set(task.depends_on), (task_id, request.body)
        for parent in task.depends_on:
            succeeded_before = [
                position for position, answer in _answered(plan[parent], calls[parent]) if answer == 200
            ]
            if outputs[parent] is not None:
                assert outputs[parent] == {"from": parent}, (task_id, parent, outputs[parent])
                assert succeeded_before, (task_id, parent)
                assert succeeded_before[0] < first, (task_id, parent)
            if task.rule in (R.ALL_SUCCESS, R.ALL_DONE, R.NONE_FAILED):
                # It waited for every upstream task to end: their calls came first.
                assert all(position < first for position, _ in calls[parent]), (task_id, parent)
                assert outputs[parent] == ({"from": parent} if status[parent] == "SUCCEEDED" else None)
        if task.rule is R.ONE_SUCCESS and task.depends_on:
            assert any(outputs[parent] is not None for parent in task.depends_on), (task_id, outputs)

    # (3) The workflow run ended, SUCCEEDED iff no task failed, and gave its running slot back.
    failed = any(value in FAILED_TASK for value in status.values())
    assert run["status"] == ("FAILED" if failed else "SUCCEEDED"), (run["status"], status)
    assert run["finished_at"] is not None
    workflow = world.cloud.poll_store.get_job(world.workflow_id)
    assert workflow is not None
    assert workflow.running_count == 0, workflow


def _answered(task: TaskPlan, seen: list[tuple[int, Received]]) -> list[tuple[int, int]]:
    """(position in the receiver's record, what the target answered) of each call."""
    return list(zip([position for position, _ in seen], task.answers(len(seen)), strict=True))


def queues_in_the_environment(cloud: SchedulerHarness, patch: pytest.MonkeyPatch) -> None:
    """The worker finds a record's queue among its settings' queue URLs (the environment, as
    deployed), to hide a message that came too early and keep a long call's message hidden."""
    for priority in Priority:
        patch.setenv(f"QUEUE_URL_{priority}", cloud.queue_url(priority))
    settings_from_env.cache_clear()


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=workflows(), script=st.lists(steps, min_size=15, max_size=MAX_STEPS))
@example(  # every rule's SKIPPED / UPSTREAM_FAILED split, and a run or two below each
    plan=[
        TaskPlan("fails", (), R.ALL_SUCCESS, 1, 1, Priority.NORMAL),
        TaskPlan("ok", (), R.ALL_SUCCESS, 2, 1, Priority.LOW),
        TaskPlan("skipped", ("ok",), R.ONE_FAILED, 1, 0, Priority.NORMAL),
        TaskPlan("one_success", ("fails", "skipped"), R.ONE_SUCCESS, 1, 0, Priority.HIGH),
        TaskPlan("below_skips", ("skipped",), R.ONE_SUCCESS, 1, 0, Priority.NORMAL),
        TaskPlan("none_failed", ("skipped", "one_success"), R.NONE_FAILED, 1, 0, Priority.NORMAL),
        TaskPlan("cleanup", ("one_success", "below_skips", "none_failed"), R.ALL_DONE, 1, 0, Priority.LOW),
        TaskPlan("alert", ("one_success",), R.ONE_FAILED, 2, 0, Priority.HIGH),
        TaskPlan("all_success", ("ok", "skipped"), R.ALL_SUCCESS, 1, 0, Priority.NORMAL),
        TaskPlan("all_skipped", ("skipped", "below_skips"), R.NONE_FAILED, 1, 0, Priority.NORMAL),
    ],
    script=[("work", 1, seed) for seed in range(6)] + [("watchdog", 1, 0), ("work", 1, 6)],
)
@example(  # a join dies a minute after the run began; the watchdog's poll must still find it
    plan=[
        TaskPlan("t0", (), R.ALL_SUCCESS, 1, 0, Priority.NORMAL),
        TaskPlan("t1", ("t0",), R.ALL_SUCCESS, 1, 0, Priority.NORMAL),
        TaskPlan("t2", ("t0", "t1"), R.ALL_SUCCESS, 1, 0, Priority.NORMAL),
    ],
    script=[("work", 1, 815), ("advance", 61, 0), ("work", 1, 90643877), ("watchdog", 1, 0)],
)
def test_any_interleaving_of_workers_runs_each_task_by_its_rule_once_and_ends(
    receiver: WebhookReceiver, plan: list[TaskPlan], script: list[Step]
) -> None:
    note("workflow: " + "; ".join(str(task) for task in plan))
    with (
        freeze_time(START, ignore=NOT_FROZEN) as frozen,
        mock_aws(),
        pytest.MonkeyPatch.context() as patch,
    ):
        clock = FrozenClock(frozen)
        clients = shared_clients()
        # One shard, no look back past the first poll, no grace for the index: faster polls,
        # the same guarantees (moto reads its index consistently; nothing predates the first
        # poll, made at once as the deployed poller's would have been: the watermark exists).
        resources = create_scheduler_resources(clients, shard_count=1)
        fast = {"first_poll_lookback_seconds": 0, "poll_grace_seconds": 0}
        cloud = SchedulerHarness(clients, resources.model_copy(update=fast), clock)
        cloud.poll()
        queues_in_the_environment(cloud, patch)
        world = World(cloud, clock, receiver, f"wfi{next(_examples)}", plan)
        world.start()
        for action, seconds, seed in script:
            if action == "work":
                world.work(seed)
            elif action == "advance":
                world.advance(seconds)
            elif action == "poll":
                world.poll()
            else:
                world.watchdog()
            if world.nothing_visible() and world.ended():
                event("the workflow run ended within the random work")
                break
        world.settle()
        check(world)
    settings_from_env.cache_clear()


def test_the_checks_oracle_reads_the_rules_as_airflow_does() -> None:
    """The oracle above, on the cases its SKIPPED / UPSTREAM_FAILED split turns on."""
    assert not should_run(R.ALL_SUCCESS, ["SUCCEEDED", "SKIPPED"])
    assert not_run_as(R.ALL_SUCCESS, ["SUCCEEDED", "SKIPPED"]) == {"SKIPPED"}
    assert not_run_as(R.ALL_SUCCESS, ["SUCCEEDED", "FAILED"]) == {"UPSTREAM_FAILED"}
    assert not_run_as(R.ALL_SUCCESS, ["SKIPPED", "UPSTREAM_FAILED"]) == {"SKIPPED", "UPSTREAM_FAILED"}
    assert should_run(R.NONE_FAILED, ["SKIPPED", "SKIPPED"])
    assert not_run_as(R.NONE_FAILED, ["SKIPPED", "FAILED"]) == {"UPSTREAM_FAILED"}
    assert not_run_as(R.ONE_SUCCESS, ["SKIPPED", "SKIPPED"]) == {"SKIPPED"}
    assert not_run_as(R.ONE_SUCCESS, ["SKIPPED", "FAILED"]) == {"UPSTREAM_FAILED"}
    assert should_run(R.ONE_FAILED, ["SUCCEEDED", "UPSTREAM_FAILED"])
    assert not_run_as(R.ONE_FAILED, ["SUCCEEDED", "SKIPPED"]) == {"SKIPPED"}
    assert should_run(R.ALL_DONE, ["FAILED", "SKIPPED"])
    assert should_run(R.ONE_FAILED, [])  # a first task always runs
