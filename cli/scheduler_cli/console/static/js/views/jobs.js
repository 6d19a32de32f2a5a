// Jobs: your jobs, newest first, with their status, schedule and next firing (local time and
// UTC). Status and name prefix filter in the API; priority is not an API filter, so it
// filters the jobs loaded here (the page says how many that is).

import { api } from "../api.js";
import {
  badge,
  describeSchedule,
  describeTarget,
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
const PRIORITIES = ["HIGH", "NORMAL", "LOW"];
const PAGE = 50;

export async function render(root, ctx) {
  const filters = {
    status: ctx.query.get("status") || "",
    name_prefix: ctx.query.get("name_prefix") || "",
    priority: ctx.query.get("priority") || "",
  };
  let pages = 1;
  const body = el("tbody", {});
  const note = el("p", { class: "muted small" });
  const more = el("button", { type: "button", class: "secondary", hidden: true }, "Load more");
  const form = el(
    "form",
    { class: "filters", onsubmit: (e) => e.preventDefault() },
    selectFilter("status", "Status", STATUSES, filters.status),
    prefixFilter(filters.name_prefix, "billing-"),
    selectFilter("priority", "Priority", PRIORITIES, filters.priority),
  );

  replace(
    root,
    el(
      "div",
      { class: "title-row" },
      el("h1", {}, "Jobs"),
      el("a", { class: "button", href: "#/jobs/new" }, "New job"),
    ),
    form,
    table(["Name", "Status", "Schedule", "Next firing", "Priority", "Target"], body, { id: "jobs-table" }),
    el("div", { class: "below" }, note, more),
  );

  async function refresh() {
    const items = [];
    let cursor = null;
    for (let page = 0; page < pages; page++) {
      const reply = await api.jobs({
        limit: PAGE,
        cursor,
        status: filters.status,
        name_prefix: filters.name_prefix,
      });
      items.push(...reply.items);
      cursor = reply.next_cursor;
      if (!cursor) break;
    }
    const shown = filters.priority ? items.filter((j) => j.priority === filters.priority) : items;
    replace(
      body,
      shown.length
        ? shown.map(row)
        : emptyRow(
            6,
            filters.status || filters.name_prefix || filters.priority
              ? "No job matches these filters."
              : "No jobs yet: make one with New job.",
          ),
    );
    more.hidden = !cursor;
    note.textContent = filters.priority
      ? `${shown.length} of the ${items.length} jobs loaded have priority ${filters.priority}.`
      : `${items.length} job${items.length === 1 ? "" : "s"}${cursor ? " loaded" : ""}.`;
  }

  let typing = null;
  form.addEventListener("input", (event) => {
    filters[event.target.name] = event.target.value.trim();
    ctx.setQuery(filters);
    pages = 1;
    clearTimeout(typing);
    typing = setTimeout(() => ctx.refreshNow(), event.target.name === "name_prefix" ? 300 : 0);
  });
  more.addEventListener("click", () => {
    pages += 1;
    ctx.refreshNow();
  });
  await refresh();
  return { refresh, interval: 3000 };
}

function row(job) {
  return el(
    "tr",
    { dataset: { jobId: job.job_id, status: job.status } },
    el(
      "td",
      {},
      link(`#/jobs/${seg(job.job_id)}`, job.name, { class: "strong" }),
      el("div", { class: "muted mono small" }, job.job_id),
    ),
    el("td", {}, badge(job.status)),
    el("td", { class: "mono small" }, describeSchedule(job.schedule)),
    el(
      "td",
      {},
      job.next_fire_at
        ? when(job.next_fire_at)
        : el("span", { class: "muted" }, job.status === "PAUSED" ? "paused" : "—"),
    ),
    el("td", {}, el("span", { class: `priority priority-${job.priority.toLowerCase()}` }, job.priority)),
    el(
      "td",
      { class: "small ellipsis", title: describeTarget(job.target) },
      el("span", { class: "tag" }, job.target.type),
      " ",
      describeTarget(job.target),
    ),
  );
}
