// A run: its times, every attempt with how it ended and its error (the API's `attempts`), its
// DLQ record when it has one, and a retry when it FAILED (a fresh round of the job's
// max_attempts).

import { api, ApiError, consoleApi } from "../api.js";
import { badge, definition, el, emptyRow, flash, link, millis, replace, section, seg, table, when } from "../dom.js";

export async function render(root, ctx, jobId, runId) {
  const job = await api.job(jobId);
  const messages = el("div", { class: "messages" });
  const head = el("div", { class: "title-row" });
  const actions = el("div", { class: "actions" });
  const facts = el("div", {});
  const attempts = el("tbody", {});
  const letters = el("div", {});
  replace(
    root,
    el("p", { class: "crumbs" }, link("#/jobs", "Jobs"), " / ", link(`#/jobs/${seg(jobId)}`, job.name), " / run"),
    head,
    actions,
    messages,
    el(
      "div",
      { class: "cards two" },
      section("Run", facts),
      section(
        "Attempts",
        table(["Attempt", "Outcome", "Started", "Took", "Code", "Error"], attempts, { id: "attempts-table" }),
      ),
    ),
    section("Dead-letter queue", letters),
  );

  let shownFor = null;
  let lettersFor = null;
  let lettersPeekedAt = 0;
  async function refresh() {
    const run = await api.run(jobId, runId);
    replace(head, el("h1", {}, "Run ", badge(run.status)), el("span", { class: "mono muted small" }, run.run_id));
    if (shownFor !== run.status) {
      shownFor = run.status;
      replace(
        actions,
        run.status === "FAILED"
          ? el("button", { type: "button", id: "retry-run", onclick: () => retry(run) }, "Retry run")
          : null,
      );
    }
    replace(
      facts,
      definition([
        ["Status", badge(run.status)],
        ["Trigger", run.trigger],
        ["Scheduled for", when(run.scheduled_for)],
        ["Started", when(run.started_at)],
        ["Finished", when(run.finished_at)],
        run.next_attempt_at ? ["Next attempt", when(run.next_attempt_at)] : null,
        ["Lateness", millis(run.lateness_ms)],
        ["Priority", run.priority],
        ["Response code", run.response_code ?? "—"],
        ["Attempts", `${run.attempt} (a round is ${job.retry.max_attempts})`],
        run.error
          ? [run.status === "FAILED" ? "Error" : "Last error", el("span", { class: "error-text" }, run.error)]
          : null,
      ]),
    );
    replace(attempts, attemptRows(run));
    await drawLetters(run);
  }

  async function retry(run) {
    try {
      const again = await api.retryRun(jobId, run.run_id);
      flash(messages, "ok", `Retrying: attempt ${again.attempt} is ${again.status}.`);
    } catch (error) {
      flash(messages, "error", `Retry: ${error.message}`, error instanceof ApiError ? error.details : []);
    }
    await ctx.refreshNow();
  }

  async function drawLetters(run) {
    if (!ctx.config.operator) {
      replace(letters, el("p", { class: "muted small" }, "This console cannot read the DLQ (no stack given)."));
      return;
    }
    // A DLQ peek is a receive: once per status the run is in, and every 10 s while it FAILED.
    const fresh = Date.now() - lettersPeekedAt < 10000;
    if (lettersFor === run.status && (run.status !== "FAILED" || fresh)) return;
    lettersFor = run.status;
    lettersPeekedAt = Date.now();
    const reply = await consoleApi.deadLetters(100);
    const mine = reply.items.filter((letter) => letter.run_id === run.run_id);
    replace(
      letters,
      mine.length
        ? table(
            ["Kind", "Why", "Attempts", "Code", "Failed at"],
            mine.map((letter) =>
              el(
                "tr",
                {},
                el("td", {}, letter.kind),
                el("td", { class: "error-text" }, letter.reason),
                el("td", { class: "num" }, letter.attempts ?? "—"),
                el("td", { class: "num" }, letter.response_code ?? "—"),
                el("td", {}, when(letter.failed_at || letter.sent_at)),
              ),
            ),
          )
        : el("p", { class: "muted small" }, "No record of this run is on the DLQ."),
    );
  }

  await refresh();
  return { refresh, interval: 2000 };
}

// One row per attempt, newest first, as the API lists them; a RETRYING run's next attempt
// on top, with when it is due.
function attemptRows(run) {
  const made = [...(run.attempts || [])].reverse();
  if (!made.length && run.status !== "RETRYING") return emptyRow(6, "No attempt yet.");
  const rows = [];
  if (run.status === "RETRYING") {
    rows.push(
      el(
        "tr",
        { dataset: { attempt: run.attempt, status: "PENDING" } },
        el("td", { class: "num" }, run.attempt),
        el("td", {}, badge("PENDING")),
        el("td", { class: "small" }, run.next_attempt_at ? ["due ", when(run.next_attempt_at)] : "—"),
        el("td", {}, "—"),
        el("td", { class: "num" }, "—"),
        el("td", {}, ""),
      ),
    );
  }
  for (const attempt of made) {
    const took =
      attempt.started_at && attempt.finished_at
        ? millis(Date.parse(attempt.finished_at) - Date.parse(attempt.started_at))
        : "—";
    rows.push(
      el(
        "tr",
        { dataset: { attempt: attempt.attempt, status: attempt.status } },
        el("td", { class: "num" }, attempt.attempt),
        el("td", {}, badge(attempt.status)),
        el("td", { class: "small" }, attempt.started_at ? when(attempt.started_at) : "—"),
        el("td", { class: "num" }, took),
        el("td", { class: "num" }, attempt.response_code ?? "—"),
        el("td", { class: "error-text small" }, attempt.error || ""),
      ),
    );
  }
  return rows;
}
