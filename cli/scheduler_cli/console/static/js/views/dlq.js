// The dead-letter queue: what is on it and why (a run whose attempts are spent, a run message
// that kept crashing a worker, something unreadable), and a re-drive: one pass of
// `make redrive` (docs/operations/redrive.md). Read with the console server's AWS access, as
// the DLQ belongs to the deployment, not to a tenant.

import { ApiError, consoleApi } from "../api.js";
import { el, emptyRow, flash, link, replace, section, seg, table, when } from "../dom.js";

const OUTCOMES = {
  redriven: "failed runs given a new attempt",
  requeued: "run messages sent back to their queue",
  stale: "records of runs that moved on (dropped)",
  gone: "records of runs or jobs that no longer exist (dropped)",
  cancelled: "records of cancelled jobs (dropped)",
  paused: "kept: their job is paused",
  unreadable: "kept: neither a record nor a run message",
  failed_again: "kept: re-driven in this pass and failed again",
  deferred: "kept: AWS said not now",
};

export async function render(root, ctx) {
  const messages = el("div", { class: "messages" });
  const body = el("tbody", {});
  const report = el("div", { id: "redrive-report" });
  const count = el("span", { class: "muted" });
  const button = el("button", { type: "button", id: "redrive", onclick: redrive }, "Re-drive the DLQ");

  if (!ctx.config.operator) {
    replace(
      root,
      el("h1", {}, "Dead letters"),
      el(
        "div",
        { class: "flash flash-info" },
        "This console has no stack to read the DLQ of. Run `scheduler --stack NAME console` with credentials that may read its queues.",
      ),
    );
    return null;
  }
  replace(
    root,
    el("div", { class: "title-row" }, el("h1", {}, "Dead letters ", count), button),
    el(
      "p",
      { class: "muted small" },
      `Stack ${ctx.config.stack}. A run lands here when its attempts are spent or its message keeps
      crashing a worker. Re-driving gives failed runs a new attempt (as Retry run does), sends run messages back, and drops
      records of runs that moved on.`,
    ),
    messages,
    report,
    table(["Kind", "Job / run", "Why", "Attempts", "Code", "Failed", "Received", ""], body, { id: "dlq-table" }),
  );

  async function refresh() {
    const reply = await consoleApi.deadLetters(100);
    count.textContent = `(${reply.items.length}${reply.items.length >= reply.limit ? "+" : ""})`;
    replace(body, reply.items.length ? reply.items.map(letterRow) : emptyRow(8, "The DLQ is empty."));
  }

  async function redrive() {
    button.disabled = true;
    try {
      const result = await consoleApi.redrive();
      const rows = Object.entries(OUTCOMES)
        .filter(([key]) => result[key])
        .map(([key, text]) => el("tr", {}, el("td", { class: "num" }, result[key]), el("td", {}, text)));
      replace(
        report,
        section(
          `Re-drive: ${result.received} message(s) received, ${result.deleted} deleted, ${result.kept} kept`,
          rows.length ? table(["Count", "Outcome"], rows) : el("p", { class: "muted" }, "Nothing to re-drive."),
        ),
      );
    } catch (error) {
      flash(messages, "error", `Re-drive: ${error.message}`, error instanceof ApiError ? error.details : []);
    } finally {
      button.disabled = false;
    }
    await ctx.refreshNow();
  }

  await refresh();
  return { refresh, interval: 10000 }; // each look is a receive on the DLQ: not too often
}

function letterRow(letter) {
  const job = letter.job_id ? `#/jobs/${seg(letter.job_id)}` : null;
  return el(
    "tr",
    { dataset: { runId: letter.run_id || "", kind: letter.kind } },
    el("td", {}, el("span", { class: `tag tag-${letter.kind.toLowerCase()}` }, letter.kind)),
    el(
      "td",
      { class: "small" },
      job ? link(job, letter.job_id, { class: "mono" }) : "—",
      letter.run_id
        ? el("div", {}, link(`${job}/runs/${seg(letter.run_id)}`, letter.run_id, { class: "mono muted" }))
        : null,
    ),
    el("td", { class: "error-text" }, letter.reason),
    el("td", { class: "num" }, letter.attempts ?? "—"),
    el("td", { class: "num" }, letter.response_code ?? "—"),
    el("td", {}, when(letter.failed_at || letter.sent_at)),
    el("td", { class: "num" }, letter.receive_count),
    el(
      "td",
      {},
      el(
        "details",
        {},
        el("summary", {}, "body"),
        el("pre", { class: "json small" }, JSON.stringify(letter.body, null, 2)),
      ),
    ),
  );
}
