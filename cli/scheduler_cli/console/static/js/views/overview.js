// The last hour at a glance: runs per minute by how they ended, lateness p50/p99 and the
// queues' depths. The runs are your own, read from the public API (each job active in the
// hour, its newest runs); a deployed console adds the whole stack's CloudWatch figures.

import { api, consoleApi, listAll } from "../api.js";
import { el, millis, replace, section, table } from "../dom.js";
import { runsChart } from "./chart.js";

const HOUR_MS = 3600e3;
const STATUSES = ["SUCCEEDED", "FAILED", "RETRYING", "SKIPPED", "CANCELLED", "RUNNING", "PENDING"];
const MAX_JOBS = 200;
const PARALLEL = 4;

export async function render(root, ctx) {
  const totals = el("div", { class: "stats", id: "overview-stats" });
  const chart = el("div", { id: "runs-chart" });
  const queues = el("div", { id: "queue-depths" });
  const stack = el("div", {});
  const note = el("p", { class: "muted small" });
  replace(
    root,
    el("h1", {}, "Overview ", el("span", { class: "muted small" }, "the last hour")),
    totals,
    section("Your runs per minute, by status", chart, note),
    el("div", { class: "cards two" }, section("Queue depth", queues), stack),
  );

  async function refresh() {
    const now = Date.now();
    const [runs, depths, metrics] = await Promise.all([
      recentRuns(now).catch((error) => ({ error })),
      ctx.config.operator ? consoleApi.queues().catch((error) => ({ error })) : null,
      ctx.config.metrics ? consoleApi.metrics().catch((error) => ({ error })) : null,
    ]);
    if (runs.error) throw runs.error;
    const minutes = bucket(runs.runs, now);
    const lateness = runs.runs
      .map((r) => r.lateness_ms)
      .filter((v) => v !== null && v !== undefined)
      .sort((a, b) => a - b);
    const counts = Object.fromEntries(STATUSES.map((s) => [s, runs.runs.filter((r) => r.status === s).length]));
    replace(
      totals,
      stat("Runs", runs.runs.length, "ended or under way"),
      stat("Succeeded", counts.SUCCEEDED, "", "ok"),
      stat("Failed", counts.FAILED, "", counts.FAILED ? "bad" : ""),
      stat(
        "Lateness p50",
        millis(percentile(lateness, 50)),
        `over ${lateness.length} run${lateness.length === 1 ? "" : "s"}`,
      ),
      stat("Lateness p99", millis(percentile(lateness, 99)), "from due to the target's first call"),
    );
    replace(chart, runsChart(minutes, STATUSES, now));
    note.textContent = `From the public API: ${runs.jobs} job(s) active in the hour, their newest runs (a run counts in the minute it ended, or was due while under way).`;
    drawQueues(depths);
    drawStack(metrics);
  }

  function drawQueues(depths) {
    if (!depths) {
      replace(queues, el("p", { class: "muted small" }, "This console has no stack to read the queues of."));
    } else if (depths.error) {
      replace(queues, el("p", { class: "error-text" }, depths.error.message));
    } else {
      const order = ["high", "normal", "low", "dlq"];
      replace(
        queues,
        table(
          ["Queue", "Waiting", "Delayed", "In flight", "Oldest"],
          order
            .filter((q) => depths.queues[q])
            .map((q) => {
              const d = depths.queues[q];
              return el(
                "tr",
                { dataset: { queue: q } },
                el("td", { class: "strong" }, q === "dlq" ? "DLQ" : q.toUpperCase()),
                el("td", { class: "num" }, d.visible),
                el("td", { class: "num" }, d.delayed),
                el("td", { class: "num" }, d.in_flight),
                el("td", { class: "num" }, d.oldest_age_seconds !== undefined ? `${d.oldest_age_seconds} s` : "—"),
              );
            }),
        ),
      );
    }
  }

  function drawStack(metrics) {
    if (!metrics || !metrics.source) {
      replace(
        stack,
        section(
          "Whole stack",
          el(
            "p",
            { class: "muted small" },
            "A deployed stack's console adds every tenant's runs and lateness from CloudWatch here; the local cloud's functions print their metrics instead.",
          ),
        ),
      );
      return;
    }
    if (metrics.error) {
      replace(
        stack,
        section("Whole stack (CloudWatch)", el("p", { class: "error-text" }, metrics.error.message || metrics.error)),
      );
      return;
    }
    const minutes = metrics.minutes.map((m, i) => ({
      start: Date.parse(m),
      counts: Object.fromEntries(Object.entries(metrics.runs).map(([s, v]) => [s, v[i]])),
    }));
    replace(
      stack,
      section(
        "Whole stack (CloudWatch)",
        runsChart(minutes, Object.keys(metrics.runs), Date.now()),
        el(
          "p",
          { class: "small" },
          `Lateness p50 ${millis(metrics.lateness_ms.p50)}, p99 ${millis(metrics.lateness_ms.p99)}`,
        ),
      ),
    );
  }

  await refresh();
  return { refresh, interval: 10000 };
}

function stat(label, value, hint = "", tone = "") {
  return el(
    "div",
    { class: `stat ${tone}` },
    el("div", { class: "value" }, value),
    el("div", { class: "label" }, label),
    hint ? el("div", { class: "hint" }, hint) : null,
  );
}

// The runs of the last hour of your jobs that may have some: those still scheduled or paused,
// and those changed within the hour.
async function recentRuns(now) {
  const since = now - HOUR_MS;
  const jobs = (await listAll("/v1/jobs", { limit: 100 }, MAX_JOBS)).filter(
    (j) => ["SCHEDULED", "PAUSED"].includes(j.status) || Date.parse(j.updated_at) >= since - HOUR_MS,
  );
  const runs = [];
  const queue = [...jobs];
  async function worker() {
    while (queue.length) {
      const job = queue.shift();
      const page = await api.runs(job.job_id, { limit: 100 });
      runs.push(...page.items.filter((r) => Date.parse(r.finished_at || r.scheduled_for) >= since));
    }
  }
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return { runs, jobs: jobs.length };
}

function bucket(runs, now) {
  const first = Math.floor((now - HOUR_MS) / 60e3) * 60e3;
  const minutes = Array.from({ length: 61 }, (_, i) => ({ start: first + i * 60e3, counts: {} }));
  for (const run of runs) {
    const at = Date.parse(run.finished_at || run.scheduled_for);
    const index = Math.floor((at - first) / 60e3);
    if (index >= 0 && index < minutes.length) {
      minutes[index].counts[run.status] = (minutes[index].counts[run.status] || 0) + 1;
    }
  }
  return minutes;
}

function percentile(sorted, p) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
