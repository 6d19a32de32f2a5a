// Workflows: your DAGs of tasks, newest first, with their status, schedule and next firing.

import { api } from "../api.js";
import {
  badge,
  describeSchedule,
  el,
  emptyRow,
  link,
  prefixFilter,
  replace,
  seg,
  selectFilter,
  table,
  when,
} from "../dom.js";

const STATUSES = ["SCHEDULED", "PAUSED", "COMPLETED", "CANCELLED"];

export async function render(root, ctx) {
  const filters = { status: ctx.query.get("status") || "", name_prefix: ctx.query.get("name_prefix") || "" };
  const body = el("tbody", {});
  const form = el(
    "form",
    { class: "filters", onsubmit: (e) => e.preventDefault() },
    selectFilter("status", "Status", STATUSES, filters.status),
    prefixFilter(filters.name_prefix, "etl-"),
  );
  replace(
    root,
    el("div", { class: "title-row" }, el("h1", {}, "Workflows")),
    form,
    table(["Name", "Status", "Tasks", "Schedule", "Next firing"], body, { id: "workflows-table" }),
    el(
      "p",
      { class: "muted small" },
      "Make workflows with the API or `scheduler workflows create`; here you watch and steer their runs.",
    ),
  );

  async function refresh() {
    const reply = await api.workflows({ limit: 50, ...filters });
    replace(
      body,
      reply.items.length
        ? reply.items.map((w) =>
            el(
              "tr",
              { dataset: { workflowId: w.workflow_id } },
              el(
                "td",
                {},
                link(`#/workflows/${seg(w.workflow_id)}`, w.name, { class: "strong" }),
                el("div", { class: "muted mono small" }, w.workflow_id),
              ),
              el("td", {}, badge(w.status)),
              el("td", { class: "small" }, w.tasks.map((t) => t.task_id).join(" · ")),
              el("td", { class: "mono small" }, describeSchedule(w.schedule)),
              el("td", {}, w.next_fire_at ? when(w.next_fire_at) : el("span", { class: "muted" }, "—")),
            ),
          )
        : emptyRow(5, "No workflows."),
    );
  }
  let typing = null;
  form.addEventListener("input", (event) => {
    filters[event.target.name] = event.target.value.trim();
    ctx.setQuery(filters);
    clearTimeout(typing);
    typing = setTimeout(() => ctx.refreshNow(), 300);
  });
  await refresh();
  return { refresh, interval: 3000 };
}
