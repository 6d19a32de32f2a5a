// Building the page: elements from data (never HTML strings, so nothing the API returns is
// ever read as markup), status badges, and times shown both in the browser's zone and UTC.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "value") node.value = value;
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

export const LOCAL_ZONE = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";

export function badge(status) {
  if (!status) return el("span", { class: "badge" }, "—");
  return el("span", { class: `badge badge-${String(status).toLowerCase()}`, dataset: { status } }, status);
}

const localFormat = new Intl.DateTimeFormat(undefined, {
  year: "numeric",
  month: "short",
  day: "2-digit",
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hour12: false,
});

export function localTime(iso) {
  return iso ? localFormat.format(new Date(iso)) : "—";
}

export function utcTime(iso) {
  if (!iso) return "—";
  return (
    new Date(iso)
      .toISOString()
      .replace("T", " ")
      .replace(/\.\d+Z$/, "")
      .replace("Z", "") + " UTC"
  );
}

// A time as the browser's zone shows it, UTC under it, and how far from now.
export function when(iso, { relative = true } = {}) {
  if (!iso) return el("span", { class: "muted" }, "—");
  return el(
    "span",
    { class: "when", title: iso },
    el(
      "span",
      { class: "local" },
      localTime(iso),
      relative ? el("span", { class: "rel" }, ` · ${fromNow(iso)}`) : null,
    ),
    el("span", { class: "utc" }, utcTime(iso)),
  );
}

export function fromNow(iso) {
  const seconds = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  const size = Math.abs(seconds);
  if (size < 2) return "now";
  const text =
    size < 60
      ? `${size} s`
      : size < 3600
        ? `${Math.round(size / 60)} min`
        : size < 172800
          ? `${Math.round(size / 3600)} h`
          : `${Math.round(size / 86400)} d`;
  return seconds >= 0 ? `in ${text}` : `${text} ago`;
}

export function millis(ms) {
  if (ms === null || ms === undefined) return "—";
  return ms < 1000
    ? `${Math.round(ms)} ms`
    : ms < 60000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${(ms / 60000).toFixed(1)} min`;
}

// `rows`: row elements, or a <tbody> the caller keeps to redraw.
export function table(headers, rows, attrs = {}) {
  const body = rows instanceof HTMLTableSectionElement ? rows : el("tbody", {}, rows);
  return el(
    "table",
    { class: "grid", ...attrs },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        headers.map((h) => el("th", {}, h)),
      ),
    ),
    body,
  );
}

export function emptyRow(columns, text) {
  return el("tr", { class: "empty" }, el("td", { colspan: columns }, text));
}

export function link(href, text, attrs = {}) {
  return el("a", { href, ...attrs }, text);
}

// A message above the view: what an action did, or why it was refused.
export function flash(where, kind, text, details = []) {
  replace(
    where,
    el(
      "div",
      { class: `flash flash-${kind}`, role: kind === "error" ? "alert" : "status" },
      el("span", {}, text),
      details.length
        ? el(
            "ul",
            {},
            details.map((d) => el("li", {}, d.field ? `${d.field}: ${d.message}` : d.message)),
          )
        : null,
      el(
        "button",
        { class: "close", type: "button", "aria-label": "dismiss", onclick: () => where.replaceChildren() },
        "×",
      ),
    ),
  );
}

export function describeTarget(target) {
  if (!target) return "—";
  switch (target.type) {
    case "HTTP":
      return `${target.method || "POST"} ${target.url}`;
    case "SQS":
      return target.queue_url;
    case "SNS":
      return target.topic_arn;
    case "EVENTBRIDGE":
      return `${target.event_bus_name} (${target.source || ""} / ${target.detail_type || ""})`;
    case "LAMBDA":
      return target.function_arn;
    default:
      return JSON.stringify(target);
  }
}

export function describeSchedule(schedule) {
  if (!schedule) return "triggered only";
  if (schedule.at) return `at ${utcTime(schedule.at)}`;
  const zone = schedule.timezone && schedule.timezone !== "UTC" ? ` (${schedule.timezone})` : "";
  if (schedule.cron) return `cron ${schedule.cron}${zone}`;
  return `every ${schedule.rate}`;
}

export function section(title, ...children) {
  return el("section", { class: "card" }, el("h2", {}, title), children);
}

export function definition(pairs) {
  return el(
    "dl",
    { class: "pairs" },
    pairs.filter(Boolean).map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]),
  );
}

// A message for the next view (a form that saved hands over to the page it opens).
let nextFlash = null;
export function setNextFlash(text) {
  nextFlash = text;
}
export function takeNextFlash() {
  const text = nextFlash;
  nextFlash = null;
  return text;
}

// An id as a path segment: percent-encoded, but a run id's ':' kept as it is (a pchar of
// RFC 3986; API Gateway hands path parameters over as they were written).
export function seg(id) {
  return encodeURIComponent(id).replace(/%3A/gi, ":");
}

// A button's action: `action`, then what came of it said in `messages` (an API error's
// `details` listed), then the view refreshed.
export function actionsIn(messages, ctx) {
  return async function act(label, action) {
    try {
      const result = await action();
      flash(messages, "ok", typeof result === "string" ? result : `${label}: done.`);
    } catch (error) {
      flash(messages, "error", `${label}: ${error.message}`, Array.isArray(error?.details) ? error.details : []);
    }
    await ctx.refreshNow();
  };
}

// A list's filters: one value of `values` (or any), and a name prefix.
export function selectFilter(name, label, values, current) {
  return el(
    "label",
    { class: "filter" },
    label,
    el(
      "select",
      { name },
      el("option", { value: "" }, "any"),
      values.map((v) => el("option", { value: v, selected: v === current }, v)),
    ),
  );
}

export function prefixFilter(value, placeholder) {
  return el(
    "label",
    { class: "filter" },
    "Name starts with",
    el("input", { name: "name_prefix", type: "search", value, placeholder }),
  );
}
