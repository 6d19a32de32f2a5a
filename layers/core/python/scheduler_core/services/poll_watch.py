"""The poll's watchdog (DESIGN §3, "Poll"): the runs of a bucket whose timer is up (a lease
that may have expired, a retry to send, a message that may have been lost, a workflow run to
reconcile), each acted on by the run lifecycle, side by side like the claims."""

from __future__ import annotations

from datetime import datetime

from scheduler_core.domain.entities import Run
from scheduler_core.observability import logger
from scheduler_core.ports import StoreContention
from scheduler_core.services.lifecycle import RunLifecycle
from scheduler_core.services.parallel import Runner
from scheduler_core.services.polls import PollReport
from scheduler_core.services.workflow_runs import WorkflowRunner

# The watchdog's actions that may end a run (a workflow task's end moves its workflow run on).
_ENDING_ACTIONS = frozenset({"failed", "cancelled"})


class RunWatch:
    def __init__(self, lifecycle: RunLifecycle, runner: Runner, workflows: WorkflowRunner | None) -> None:
        self._lifecycle = lifecycle
        self._runner = runner
        self._workflows = workflows

    def watch_runs(self, runs: list[Run], now: datetime, report: PollReport) -> bool:
        """The watchdog: act on each run whose timer is up, side by side like the claims (each
        acts on its own run). True if none was left behind."""
        up = [run for run in runs if run.due_at is not None and run.due_at <= now]
        # A lease or retry still running: read again by a later poll.
        drained = len(up) == len(runs)
        for action in self._runner.map(lambda run: self._watch_or_log(run, now), up):
            if action is None:
                report.contended += 1
                drained = False
            else:
                report.watched[action] = report.watched.get(action, 0) + 1
        return drained

    def _watch_or_log(self, run: Run, now: datetime) -> str | None:
        """What the watchdog did with one run; None if contention left it for a later poll."""
        try:
            if run.workflow is not None and self._workflows is not None:
                return self._workflows.reconcile(run, now)
            action = self._lifecycle.watch(run, now)
            if action in _ENDING_ACTIONS and self._workflows is not None:
                self._workflows.watched_run_ended(run)
            return action
        except StoreContention:
            return None
        except Exception:
            # One run that cannot be handled (its job unreadable, a bug) must not stop the
            # shard's poll every minute: logged, left where it is, like an unreadable item.
            logger.exception("watchdog failed on a run; skipped", extra={"run_id": run.run_id})
            return "error"
