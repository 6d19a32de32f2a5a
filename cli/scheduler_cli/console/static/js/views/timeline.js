// A job's runs on a time axis: each run a bar from when it was due to when it ended (or now),
// in its status's colour; the gap between its tick and its bar's start is its lateness.

import { el, localTime, millis } from "../dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 1000;
const HEIGHT = 46;
const LANE = 26;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) node.append(child);
  return node;
}

export function timeline(runs) {
  const known = runs.filter((r) => r.scheduled_for);
  if (!known.length) return el("p", { class: "muted small" }, "The timeline shows runs once there are some.");
  const now = Date.now();
  const times = known.flatMap((r) =>
    [r.scheduled_for, r.started_at, r.finished_at].filter(Boolean).map((t) => Date.parse(t)),
  );
  const start = Math.min(...times);
  const end = Math.max(now, ...times);
  const span = Math.max(end - start, 1000);
  const x = (t) => 10 + ((t - start) / span) * (WIDTH - 20);
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "timeline",
    role: "img",
    "aria-label": "runs over time",
  });
  chart.append(svg("line", { x1: 10, x2: WIDTH - 10, y1: LANE, y2: LANE, class: "axis" }));
  for (const run of known) {
    const due = Date.parse(run.scheduled_for);
    const from = run.started_at ? Date.parse(run.started_at) : due;
    const to = run.finished_at
      ? Date.parse(run.finished_at)
      : ["RUNNING", "RETRYING", "PENDING"].includes(run.status)
        ? now
        : from;
    const group = svg(
      "g",
      { class: `run run-${run.status.toLowerCase()}` },
      svg(
        "title",
        {},
        `${run.status} · due ${localTime(run.scheduled_for)} · lateness ${millis(run.lateness_ms)} · attempt ${run.attempt}${run.error ? ` · ${run.error}` : ""}`,
      ),
    );
    group.append(svg("line", { x1: x(due), x2: x(due), y1: LANE - 12, y2: LANE + 12, class: "due" }));
    group.append(svg("rect", { x: x(from), y: LANE - 7, width: Math.max(x(to) - x(from), 5), height: 14, rx: 3 }));
    chart.append(group);
  }
  chart.append(svg("text", { x: 10, y: HEIGHT - 2, class: "tick" }, localTime(new Date(start).toISOString())));
  chart.append(svg("text", { x: WIDTH - 10, y: HEIGHT - 2, class: "tick end" }, "now"));
  return chart;
}
