// A job: what it is, its schedule in words and its next five firings (computed by the console
// server with the scheduler's own schedule code), the actions the API allows in its status,
// and its runs: a timeline and a table with each run's status, lateness, attempts, error and
// response code.

import { api, consoleApi } from "../api.js";
import {
  actionsIn,
  badge,
  definition,
  describeTarget,
  el,
  emptyRow,
  flash,
  link,
  localTime,
  millis,
  replace,
  section,
  seg,
  table,
  takeNextFlash,
  utcTime,
  when,
} from "../dom.js";
import { timeline } from "./timeline.js";

const RUN_STATUSES = ["PENDING", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "CANCELLED", "SKIPPED"];
const ENDED = new Set(["COMPLETED", "CANCELLED"]);

export async function render(root, ctx, jobId) {
  let job = await api.job(jobId);
  let runStatus = ctx.query.get("runs") || "";
  let backfillOpen = false;
  const messages = el("div", { class: "messages" });
  const head = el("div", { class: "title-row" });
  const actions = el("div", { class: "actions" });
  const backfill = el("div", { class: "backfill" });
  const what = el("div", { class: "cards" });
  const payload = el("div", {});
  const schedule = el("div", {});
  const runsBody = el("tbody", {});
  const strip = el("div", { class: "timeline-wrap" });
  const runFilter = el(
    "select",
    { name: "runs" },
    el("option", { value: "" }, "any"),
    RUN_STATUSES.map((s) => el("option", { value: s, selected: s === runStatus }, s)),
  );
  runFilter.addEventListener("change", () => {
    runStatus = runFilter.value;
    ctx.setQuery({ runs: runStatus });
    ctx.refreshNow();
  });

  replace(
    root,
    el("p", { class: "crumbs" }, link("#/jobs", "Jobs"), " / ", jobId),
    head,
    actions,
    backfill,
    messages,
    el("div", { class: "cards two" }, el("div", { class: "cards" }, section("Schedule", schedule), payload), what),
    el(
      "section",
      { class: "card" },
      el("div", { class: "title-row" }, el("h2", {}, "Runs"), el("label", { class: "filter" }, "Status", runFilter)),
      strip,
      table(
        ["Status", "Trigger", "Scheduled for", "Started", "Finished", "Lateness", "Attempts", "Code", "Error"],
        runsBody,
        { id: "runs-table" },
      ),
    ),
  );

  const handedOver = takeNextFlash();
  if (handedOver) flash(messages, "ok", handedOver);

  const act = actionsIn(messages, ctx);

  let actionsFor = null;
  function drawHead() {
    replace(
      head,
      el("h1", {}, job.name, " ", badge(job.status)),
      el("span", { class: "mono muted small" }, job.job_id, ` · version ${job.version}`),
    );
    if (actionsFor === job.status) return; // a question being asked stays
    actionsFor = job.status;
    const open = !ENDED.has(job.status);
    const buttons = [];
    if (open) {
      buttons.push(
        el(
          "button",
          {
            type: "button",
            onclick: () =>
              act("Trigger", async () => {
                const run = await api.jobAction(job.job_id, "trigger");
                return `Triggered: run ${run.run_id} (${run.status}).`;
              }),
          },
          "Trigger now",
        ),
      );
      if (job.status === "PAUSED") {
        buttons.push(
          el(
            "button",
            { type: "button", onclick: () => act("Resume", () => api.jobAction(job.job_id, "resume")) },
            "Resume",
          ),
        );
      } else {
        buttons.push(
          el(
            "button",
            { type: "button", onclick: () => act("Pause", () => api.jobAction(job.job_id, "pause")) },
            "Pause",
          ),
        );
      }
      buttons.push(el("a", { class: "button secondary", href: `#/jobs/${seg(job.job_id)}/edit` }, "Edit"));
      buttons.push(
        el(
          "button",
          {
            type: "button",
            class: "secondary",
            onclick: () => {
              backfillOpen = !backfillOpen;
              drawBackfill();
            },
          },
          "Backfill…",
        ),
      );
      buttons.push(
        confirmButton("Cancel job", "Cancel this job? It fires no more.", () =>
          act("Cancel", () => api.cancelJob(job.job_id)),
        ),
      );
    }
    replace(actions, buttons);
  }

  function drawBackfill() {
    if (!backfillOpen) {
      backfill.replaceChildren();
      return;
    }
    const hourAgo = new Date(Date.now() - 3600e3).toISOString().replace(/\.\d+Z$/, "Z");
    const now = new Date().toISOString().replace(/\.\d+Z$/, "Z");
    const start = el("input", { name: "start", value: hourAgo, size: 24 });
    const end = el("input", { name: "end", value: now, size: 24 });
    replace(
      backfill,
      el(
        "form",
        {
          class: "inline-form",
          onsubmit: (e) => {
            e.preventDefault();
            act("Backfill", async () => {
              const result = await api.jobAction(job.job_id, "backfill", {
                start: start.value.trim(),
                end: end.value.trim(),
              });
              backfillOpen = false;
              drawBackfill();
              return `Backfill: ${result.runs} run(s) made, ${result.already_run} firing(s) had one already.`;
            });
          },
        },
        "Run every firing from ",
        start,
        " to ",
        end,
        " (ISO-8601, both included) ",
        el("button", { type: "submit" }, "Backfill"),
      ),
    );
  }

  function drawDetails() {
    const t = job.target;
    replace(payload, section("Payload", el("pre", { class: "json" }, JSON.stringify(job.payload, null, 2) ?? "null")));
    replace(
      what,
      section(
        "Target",
        definition([
          ["Type", t.type],
          ["Where", el("span", { class: "mono break" }, describeTarget(t))],
          t.headers && Object.keys(t.headers).length
            ? ["Headers", el("span", { class: "mono small" }, JSON.stringify(t.headers))]
            : null,
          t.secret_headers && Object.keys(t.secret_headers).length
            ? ["Secret headers", Object.keys(t.secret_headers).join(", ")]
            : null,
          t.role_arn ? ["Role", el("span", { class: "mono small" }, t.role_arn)] : null,
        ]),
      ),
      section(
        "Policies",
        definition([
          ["Priority", job.priority],
          [
            "Retry",
            `${job.retry.max_attempts} attempts, backoff ${job.retry.backoff_seconds} s (max ${job.retry.max_backoff_seconds} s)`,
          ],
          [
            "Overlap",
            `${job.concurrency.overlap}${job.concurrency.max_running ? `, ${job.concurrency.max_running} running at most` : ""}`,
          ],
          [
            "Misfire",
            `${job.misfire}${job.catch_up_window_seconds ? ` (${job.catch_up_window_seconds} s window)` : ""}`,
          ],
          ["Created", when(job.created_at)],
          ["Changed", when(job.updated_at)],
        ]),
      ),
    );
  }

  async function drawSchedule() {
    const rows = [
      job.schedule.at ? ["Fires at", when(job.schedule.at)] : null,
      [
        "Next firing",
        job.next_fire_at
          ? when(job.next_fire_at)
          : el("span", { class: "muted" }, job.status === "PAUSED" ? "none while paused" : "none"),
      ],
    ];
    let preview = null;
    try {
      preview = await consoleApi.schedule({
        schedule: job.schedule,
        created_at: job.created_at,
        job_id: job.job_id,
        count: 5,
      });
    } catch (error) {
      rows.push(["Preview", el("span", { class: "muted" }, error.message)]);
    }
    const upcoming = preview && !ENDED.has(job.status) && !job.schedule.at ? preview.firings : [];
    replace(
      schedule,
      el(
        "p",
        { class: "words", id: "schedule-words" },
        preview ? preview.words : el("span", { class: "mono" }, JSON.stringify(job.schedule)),
      ),
      definition(rows),
      upcoming.length
        ? el(
            "div",
            {},
            el(
              "h3",
              {},
              job.status === "PAUSED"
                ? "Its next firings (once resumed)"
                : `Next ${upcoming.length} firing${upcoming.length > 1 ? "s" : ""}`,
            ),
            table(
              ["Local time", "UTC", job.schedule.jitter_seconds ? "Starts (jitter)" : null].filter(Boolean),
              upcoming.map((f) =>
                el(
                  "tr",
                  {},
                  el("td", {}, localTime(f.fire_at)),
                  el("td", { class: "mono small" }, utcTime(f.fire_at)),
                  job.schedule.jitter_seconds
                    ? el("td", { class: "small" }, f.starts_at ? localTime(f.starts_at) : "—")
                    : null,
                ),
              ),
              { id: "next-firings", class: "grid compact" },
            ),
          )
        : null,
    );
  }

  async function drawRuns() {
    const reply = await api.runs(job.job_id, { limit: 50, status: runStatus });
    const runs = reply.items;
    replace(
      runsBody,
      runs.length
        ? runs.map((run) => runRow(job, run))
        : emptyRow(9, runStatus ? `No ${runStatus} runs.` : "No runs yet."),
    );
    replace(strip, timeline(runs));
  }

  let drawnVersion = null;
  async function refresh() {
    job = await api.job(jobId);
    drawHead();
    if (drawnVersion !== job.version) {
      drawnVersion = job.version;
      drawDetails();
    }
    await Promise.all([drawSchedule(), drawRuns()]);
  }
  await refresh();
  return { refresh, interval: 2000 };
}

export function confirmButton(label, question, onYes) {
  const holder = el("span", { class: "confirm" });
  const ask = () =>
    replace(
      holder,
      el("span", { class: "question" }, question, " "),
      el(
        "button",
        {
          type: "button",
          class: "danger",
          onclick: () => {
            replace(holder, button);
            onYes();
          },
        },
        `Yes, ${label.toLowerCase()}`,
      ),
      el("button", { type: "button", class: "secondary", onclick: () => replace(holder, button) }, "No"),
    );
  const button = el("button", { type: "button", class: "danger", onclick: ask }, label);
  return replace(holder, button);
}

function runRow(job, run) {
  const href = `#/jobs/${seg(job.job_id)}/runs/${seg(run.run_id)}`;
  return el(
    "tr",
    { dataset: { runId: run.run_id, status: run.status } },
    el("td", {}, link(href, badge(run.status), { title: "open the run" })),
    el("td", { class: "small" }, run.trigger),
    el("td", {}, link(href, when(run.scheduled_for))),
    el("td", { class: "small" }, run.started_at ? localTime(run.started_at) : "—"),
    el(
      "td",
      { class: "small" },
      run.finished_at
        ? localTime(run.finished_at)
        : run.next_attempt_at
          ? `next try ${localTime(run.next_attempt_at)}`
          : "—",
    ),
    el("td", { class: "num" }, millis(run.lateness_ms)),
    el("td", { class: "num" }, `${run.attempt}/${job.retry.max_attempts}`),
    el("td", { class: "num" }, run.response_code ?? "—"),
    el("td", { class: "error-text small", title: run.error || "" }, run.error || ""),
  );
}
