// A workflow: its DAG drawn as a graph, its runs, and for the run opened each task's state on
// the graph and in a table, with a retry for a FAILED task (the API re-decides what its
// failure decided downstream) and a cancel for a run under way.

import { api } from "../api.js";
import {
  actionsIn,
  badge,
  definition,
  describeSchedule,
  describeTarget,
  el,
  emptyRow,
  link,
  localTime,
  replace,
  section,
  seg,
  table,
  when,
} from "../dom.js";
import { confirmButton } from "./job.js";
import { TaskGraph } from "./graph.js";

const RUN_ENDED = new Set(["SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"]);
const CLOSED = new Set(["COMPLETED", "CANCELLED"]);

export async function render(root, ctx, workflowId, runId = null) {
  let workflow = await api.workflow(workflowId);
  const base = `#/workflows/${seg(workflowId)}`;
  const messages = el("div", { class: "messages" });
  const head = el("div", { class: "title-row" });
  const actions = el("div", { class: "actions" });
  const graphBox = el("div", { class: "graph", id: "workflow-graph" });
  const graphTitle = el("h2", { id: "graph-title" });
  const runActions = el("div", { class: "actions" });
  const tasksBody = el("tbody", {});
  const runsBody = el("tbody", {});
  const facts = el("div", {});
  const graph = new TaskGraph(graphBox, (taskId) => {
    const row = tasksBody.querySelector(`tr[data-task-id="${CSS.escape(taskId)}"]`);
    for (const other of tasksBody.querySelectorAll("tr.selected")) other.classList.remove("selected");
    row?.classList.add("selected");
    row?.scrollIntoView({ block: "nearest" });
  });

  replace(
    root,
    el(
      "p",
      { class: "crumbs" },
      link("#/workflows", "Workflows"),
      " / ",
      runId ? link(base, workflow.name) : workflow.name,
      runId ? " / run" : "",
    ),
    head,
    actions,
    messages,
    el(
      "section",
      { class: "card" },
      el("div", { class: "title-row" }, graphTitle, runActions),
      graphBox,
      table(["Task", "State", "Depends on", "Attempt", "Started", "Finished", "Code", "Error", ""], tasksBody, {
        id: "tasks-table",
      }),
    ),
    el(
      "div",
      { class: "cards two" },
      section(
        "Runs",
        table(["Status", "Trigger", "Scheduled for", "Finished"], runsBody, { id: "workflow-runs-table" }),
      ),
      section("Workflow", facts),
    ),
  );

  const act = actionsIn(messages, ctx);

  let actionsFor = null;
  function drawHead() {
    replace(
      head,
      el("h1", {}, workflow.name, " ", badge(workflow.status)),
      el("span", { class: "mono muted small" }, workflow.workflow_id),
    );
    if (actionsFor === workflow.status) return;
    actionsFor = workflow.status;
    replace(
      actions,
      CLOSED.has(workflow.status)
        ? null
        : [
            el(
              "button",
              {
                type: "button",
                onclick: () =>
                  act("Trigger", async () => {
                    const run = await api.workflowAction(workflowId, "trigger");
                    ctx.navigate(`${base}/runs/${seg(run.workflow_run_id)}`);
                    return `Triggered: run ${run.workflow_run_id}.`;
                  }),
              },
              "Trigger now",
            ),
            workflow.status === "PAUSED"
              ? el(
                  "button",
                  { type: "button", onclick: () => act("Resume", () => api.workflowAction(workflowId, "resume")) },
                  "Resume",
                )
              : el(
                  "button",
                  { type: "button", onclick: () => act("Pause", () => api.workflowAction(workflowId, "pause")) },
                  "Pause",
                ),
            confirmButton("Cancel workflow", "Cancel this workflow? No run starts any more.", () =>
              act("Cancel", () => api.cancelWorkflow(workflowId)),
            ),
          ],
    );
    replace(
      facts,
      definition([
        ["Schedule", describeSchedule(workflow.schedule)],
        ["Next firing", when(workflow.next_fire_at)],
        ["Overlap", workflow.concurrency.overlap],
        ["Misfire", workflow.misfire],
        ["Created", when(workflow.created_at)],
      ]),
    );
  }

  let runActionsFor = null;
  function drawRun(run) {
    const specs = Object.fromEntries(workflow.tasks.map((t) => [t.task_id, t]));
    graphTitle.replaceChildren(
      run ? (runId ? "Run " : "Newest run ") : "Tasks",
      run ? badge(run.status) : "",
      run ? el("span", { class: "muted small" }, ` ${run.trigger} · scheduled ${localTime(run.scheduled_for)}`) : "",
    );
    const key = run ? `${run.workflow_run_id}:${run.status}` : "none";
    if (runActionsFor !== key) {
      runActionsFor = key;
      replace(
        runActions,
        run && !RUN_ENDED.has(run.status)
          ? confirmButton("Cancel run", "Cancel what has not started?", () =>
              act("Cancel run", () => api.cancelWorkflowRun(workflowId, run.workflow_run_id)),
            )
          : null,
      );
    }
    const order = workflow.tasks.map((t) => t.task_id);
    replace(
      tasksBody,
      order.map((taskId) => {
        const task = run?.tasks[taskId];
        const spec = specs[taskId];
        return el(
          "tr",
          { dataset: { taskId, state: task?.status || "" } },
          el(
            "td",
            { class: "strong" },
            taskId,
            el("div", { class: "muted small ellipsis" }, describeTarget(spec.target)),
          ),
          el("td", {}, task ? badge(task.status) : el("span", { class: "muted" }, "—")),
          el("td", { class: "small" }, (spec.depends_on || []).join(", ") || "—"),
          el("td", { class: "num" }, task?.attempt ?? "—"),
          el("td", { class: "small" }, task?.started_at ? localTime(task.started_at) : "—"),
          el("td", { class: "small" }, task?.finished_at ? localTime(task.finished_at) : "—"),
          el("td", { class: "num" }, task?.response_code ?? "—"),
          el("td", { class: "error-text small" }, task?.error || ""),
          el(
            "td",
            {},
            task?.status === "FAILED"
              ? el(
                  "button",
                  {
                    type: "button",
                    class: "small-button",
                    dataset: { retryTask: taskId },
                    onclick: () =>
                      act(`Retry ${taskId}`, async () => {
                        await api.retryTask(workflowId, run.workflow_run_id, taskId);
                        return `Retrying ${taskId}; what waited on it is decided again.`;
                      }),
                  },
                  "Retry task",
                )
              : "",
          ),
        );
      }),
    );
    const states = run ? Object.fromEntries(Object.entries(run.tasks).map(([id, t]) => [id, t.status])) : {};
    return graph.draw(workflow.tasks, states);
  }

  async function refresh() {
    const [fresh, runs, opened] = await Promise.all([
      api.workflow(workflowId),
      api.workflowRuns(workflowId, { limit: 20 }),
      runId ? api.workflowRun(workflowId, runId) : Promise.resolve(null),
    ]);
    const run = opened || runs.items[0] || null; // no run opened: the newest one
    workflow = fresh;
    drawHead();
    replace(
      runsBody,
      runs.items.length
        ? runs.items.map((r) =>
            el(
              "tr",
              {
                class: r.workflow_run_id === run?.workflow_run_id ? "selected" : "",
                dataset: { workflowRunId: r.workflow_run_id, status: r.status },
              },
              el("td", {}, link(`${base}/runs/${seg(r.workflow_run_id)}`, badge(r.status))),
              el("td", { class: "small" }, r.trigger),
              el("td", {}, link(`${base}/runs/${seg(r.workflow_run_id)}`, when(r.scheduled_for))),
              el("td", { class: "small" }, r.finished_at ? localTime(r.finished_at) : "—"),
            ),
          )
        : emptyRow(4, "No runs yet: Trigger now starts one."),
    );
    await drawRun(run);
  }

  await refresh();
  return { refresh, interval: 2000 };
}
