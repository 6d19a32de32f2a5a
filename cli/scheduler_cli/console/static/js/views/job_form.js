// Create or change a job. The API validates; its errors' `details` appear beside the fields
// they name. While the schedule is typed, the console server says it in words with its next
// firings (and its mistakes, beside the field). A change sends only the fields that changed,
// with If-Match (the version read), so it neither undoes another change nor resends the
// `***` the API shows for secret headers.

import { api, ApiError, consoleApi } from "../api.js";
import { LOCAL_ZONE, el, localTime, replace, seg, setNextFlash, utcTime } from "../dom.js";
import { area, clearErrors, field, numberOrText, options, parseJson, showErrors, text } from "./fields.js";

const TARGETS = ["HTTP", "SQS", "SNS", "EVENTBRIDGE", "LAMBDA"];
const ZONES = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : [];

export const renderCreate = (root, ctx) => jobForm(root, ctx, null);

export async function renderEdit(root, ctx, jobId) {
  return jobForm(root, ctx, await api.job(jobId));
}

function inSeconds(seconds) {
  return new Date(Date.now() + seconds * 1000).toISOString().replace(/\.\d+Z$/, "Z");
}

async function jobForm(root, ctx, job) {
  const s = job?.schedule || {};
  const t = job?.target || { type: "HTTP" };
  const kind = s.at ? "at" : s.rate ? "rate" : s.cron ? "cron" : "at";
  const i = {
    name: text({ value: job?.name || "", placeholder: "send-invoice-42", required: true }),
    priority: options("priority", [["HIGH"], ["NORMAL"], ["LOW"]], job?.priority || "NORMAL"),
    kind: el(
      "div",
      { class: "segmented", role: "radiogroup" },
      ["at", "cron", "rate"].map((k) =>
        el(
          "label",
          {},
          el("input", { type: "radio", name: "schedule-kind", value: k, checked: k === kind }),
          { at: "once, at", cron: "cron", rate: "every" }[k],
        ),
      ),
    ),
    at: text({ value: s.at || "", placeholder: "2026-12-01T09:00:00Z" }),
    cron: text({ value: s.cron || "", placeholder: "*/5 * * * *" }),
    rate: text({ value: s.rate || "", placeholder: "5 minutes" }),
    timezone: text({ value: s.timezone || "UTC", list: "zones" }),
    start_at: text({ value: s.start_at || "", placeholder: "optional" }),
    end_at: text({ value: s.end_at || "", placeholder: "optional" }),
    jitter: text({ value: s.jitter_seconds ? String(s.jitter_seconds) : "", placeholder: "0", inputmode: "numeric" }),
    type: options(
      "target.type",
      TARGETS.map((v) => [v]),
      t.type,
    ),
    url: text({ value: t.url || "", placeholder: "https://example.com/hooks/invoice" }),
    method: options(
      "target.method",
      ["POST", "PUT", "PATCH", "GET", "DELETE"].map((v) => [v]),
      t.method || "POST",
    ),
    timeout: text({ value: t.timeout_seconds ?? "", placeholder: "10", inputmode: "decimal" }),
    headers: area({ rows: 2, placeholder: '{"X-Tenant": "acme"}' }),
    secrets: area({ rows: 2, placeholder: '{"Authorization": "Bearer …"}' }),
    queue_url: text({ value: t.queue_url || "" }),
    topic_arn: text({ value: t.topic_arn || "" }),
    bus: text({ value: t.event_bus_name || "", placeholder: "default" }),
    source: text({ value: t.source || "" }),
    detail_type: text({ value: t.detail_type || "" }),
    function_arn: text({ value: t.function_arn || "" }),
    role_arn: text({ value: t.role_arn || "", placeholder: "arn:aws:iam::123456789012:role/scheduler-delivery" }),
    payload: area({ rows: 5, placeholder: '{"invoice": 42}' }),
    attempts: text({ value: job ? String(job.retry.max_attempts) : "", placeholder: "3", inputmode: "numeric" }),
    backoff: text({ value: job ? String(job.retry.backoff_seconds) : "", placeholder: "10", inputmode: "numeric" }),
    max_backoff: text({
      value: job ? String(job.retry.max_backoff_seconds) : "",
      placeholder: "3600",
      inputmode: "numeric",
    }),
    overlap: options("concurrency.overlap", [["SKIP"], ["BUFFER_ONE"], ["ALLOW"]], job?.concurrency.overlap || "SKIP"),
    max_running: text({
      value: job?.concurrency.max_running ? String(job.concurrency.max_running) : "",
      placeholder: "1",
      inputmode: "numeric",
    }),
    misfire: options("misfire", [["FIRE_ONCE"], ["SKIP"], ["CATCH_UP"]], job?.misfire || "FIRE_ONCE"),
    window: text({
      value: job?.catch_up_window_seconds ? String(job.catch_up_window_seconds) : "",
      placeholder: "3600",
      inputmode: "numeric",
    }),
  };
  if (t.headers && Object.keys(t.headers).length) i.headers.value = JSON.stringify(t.headers);
  if (t.secret_headers && Object.keys(t.secret_headers).length) i.secrets.value = JSON.stringify(t.secret_headers);
  if (job && job.payload !== null && job.payload !== undefined) i.payload.value = JSON.stringify(job.payload, null, 2);

  const scheduleFields = {
    at: field(
      "schedule.at",
      "At",
      i.at,
      el(
        "span",
        {},
        "ISO-8601; without Z or an offset it is a time of the time zone below. ",
        [10, 60, 3600].map((sec) =>
          el(
            "button",
            {
              type: "button",
              class: "link",
              onclick: () => {
                i.at.value = inSeconds(sec);
                i.at.dispatchEvent(new Event("input", { bubbles: true }));
              },
            },
            sec < 60 ? `in ${sec} s` : sec < 3600 ? "in 1 min" : "in 1 h",
          ),
        ),
      ),
    ),
    cron: field(
      "schedule.cron",
      "Cron",
      i.cron,
      "5 fields: minute hour day-of-month month day-of-week, in the time zone below",
    ),
    rate: field("schedule.rate", "Every", i.rate, '"<n> minutes", "<n> hours" or "<n> days"'),
  };
  const windowFields = el(
    "div",
    { class: "row" },
    field("schedule.start_at", "Not before", i.start_at),
    field("schedule.end_at", "Not after", i.end_at),
    field("schedule.jitter_seconds", "Jitter (s)", i.jitter),
  );
  const targetGroups = {
    HTTP: el(
      "div",
      {},
      field("target.url", "URL", i.url),
      el(
        "div",
        { class: "row" },
        field("target.method", "Method", i.method),
        field("target.timeout_seconds", "Timeout (s)", i.timeout),
      ),
      field("target.headers", "Headers (JSON)", i.headers),
      field(
        "target.secret_headers",
        "Secret headers (JSON, stored encrypted)",
        i.secrets,
        job ? "The API shows their values as ***: type them again to change the target." : null,
      ),
    ),
    SQS: field("target.queue_url", "Queue URL", i.queue_url),
    SNS: field("target.topic_arn", "Topic ARN", i.topic_arn),
    EVENTBRIDGE: el(
      "div",
      {},
      field("target.event_bus_name", "Event bus", i.bus),
      el(
        "div",
        { class: "row" },
        field("target.source", "Source", i.source),
        field("target.detail_type", "Detail type", i.detail_type),
      ),
    ),
    LAMBDA: field("target.function_arn", "Function ARN", i.function_arn),
  };
  const roleField = field("target.role_arn", "Role ARN (assumed for the call)", i.role_arn);
  const windowField = field("catch_up_window_seconds", "Catch-up window (s)", i.window);
  const preview = el("div", { class: "preview", id: "schedule-preview", "aria-live": "polite" });
  const summary = el("div", { class: "summary" });
  const submit = el("button", { type: "submit" }, job ? "Save changes" : "Create job");

  const form = el(
    "form",
    { class: "job-form", novalidate: true },
    summary,
    el(
      "fieldset",
      {},
      el("legend", {}, "Job"),
      el("div", { class: "row" }, field("name", "Name", i.name), field("priority", "Priority", i.priority)),
    ),
    el(
      "fieldset",
      {},
      el("legend", {}, "Schedule"),
      el(
        "div",
        { class: "field", dataset: { field: "schedule" } },
        el("span", { class: "label" }, "Fires"),
        i.kind,
        el("p", { class: "field-error", role: "alert" }),
      ),
      Object.values(scheduleFields),
      field("schedule.timezone", "Time zone", i.timezone, `IANA name; this browser is in ${LOCAL_ZONE}`),
      windowFields,
      preview,
    ),
    el(
      "fieldset",
      {},
      el("legend", {}, "Target"),
      field("target.type", "Type", i.type),
      Object.values(targetGroups),
      roleField,
    ),
    el("fieldset", {}, el("legend", {}, "Payload"), field("payload", "JSON sent to the target", i.payload)),
    el(
      "fieldset",
      {},
      el("legend", {}, "Retries, overlap, missed firings"),
      el(
        "div",
        { class: "row" },
        field("retry.max_attempts", "Attempts", i.attempts),
        field("retry.backoff_seconds", "Backoff (s)", i.backoff),
        field("retry.max_backoff_seconds", "Max backoff (s)", i.max_backoff),
      ),
      el(
        "div",
        { class: "row" },
        field("concurrency.overlap", "Overlap", i.overlap),
        field("concurrency.max_running", "Max running", i.max_running),
      ),
      el("div", { class: "row" }, field("misfire", "Misfire", i.misfire), windowField),
    ),
    el(
      "div",
      { class: "actions" },
      submit,
      el("a", { class: "button secondary", href: job ? `#/jobs/${seg(job.job_id)}` : "#/jobs" }, "Back"),
    ),
  );

  function currentKind() {
    return form.querySelector('input[name="schedule-kind"]:checked').value;
  }

  function showGroups() {
    for (const [k, holder] of Object.entries(scheduleFields)) holder.hidden = k !== currentKind();
    windowFields.hidden = currentKind() === "at";
    for (const [type, group] of Object.entries(targetGroups)) group.hidden = type !== i.type.value;
    roleField.hidden = i.type.value === "HTTP";
    windowField.hidden = i.misfire.value !== "CATCH_UP";
  }

  function schedule() {
    const k = currentKind();
    const value = { [k]: i[k].value.trim(), timezone: i.timezone.value.trim() || "UTC" };
    if (k !== "at") {
      if (i.start_at.value.trim()) value.start_at = i.start_at.value.trim();
      if (i.end_at.value.trim()) value.end_at = i.end_at.value.trim();
      const jitter = numberOrText(i.jitter.value);
      if (jitter !== undefined) value.jitter_seconds = jitter;
    }
    return value;
  }

  function collect(errors) {
    const type = i.type.value;
    const target = { type };
    const put = (key, input, convert = (v) => v.trim()) => {
      const value = convert(input.value);
      if (value !== undefined && value !== "") target[key] = value;
    };
    if (type === "HTTP") {
      put("url", i.url);
      put("method", i.method);
      put("timeout_seconds", i.timeout, numberOrText);
      const headers = parseJson(i.headers, "target.headers", errors, { object: true });
      if (headers) target.headers = headers;
      const secrets = parseJson(i.secrets, "target.secret_headers", errors, { object: true });
      if (secrets) target.secret_headers = secrets;
    } else {
      const keys = {
        SQS: [["queue_url", i.queue_url]],
        SNS: [["topic_arn", i.topic_arn]],
        LAMBDA: [["function_arn", i.function_arn]],
        EVENTBRIDGE: [
          ["event_bus_name", i.bus],
          ["source", i.source],
          ["detail_type", i.detail_type],
        ],
      }[type];
      for (const [key, input] of keys) put(key, input);
      put("role_arn", i.role_arn);
    }
    const body = { name: i.name.value.trim(), priority: i.priority.value, schedule: schedule(), target };
    const payload = parseJson(i.payload, "payload", errors);
    if (payload !== undefined) body.payload = payload;
    const retry = {};
    for (const [key, input] of [
      ["max_attempts", i.attempts],
      ["backoff_seconds", i.backoff],
      ["max_backoff_seconds", i.max_backoff],
    ]) {
      const value = numberOrText(input.value);
      if (value !== undefined) retry[key] = value;
    }
    if (Object.keys(retry).length) body.retry = retry;
    body.concurrency = { overlap: i.overlap.value };
    const running = numberOrText(i.max_running.value);
    if (running !== undefined && i.overlap.value !== "ALLOW") body.concurrency.max_running = running;
    body.misfire = i.misfire.value;
    const windowSeconds = numberOrText(i.window.value);
    if (i.misfire.value === "CATCH_UP" && windowSeconds !== undefined) body.catch_up_window_seconds = windowSeconds;
    return body;
  }

  let previewTimer = null;
  let previewAsked = 0;
  async function drawPreview() {
    const asked = ++previewAsked;
    const request = { schedule: schedule(), count: 5 };
    if (!request.schedule[currentKind()]) {
      replace(preview, el("span", { class: "muted" }, "Give the schedule to see its next firings."));
      return;
    }
    try {
      const answer = await consoleApi.schedule(request);
      if (asked !== previewAsked) return;
      replace(
        preview,
        el("strong", {}, answer.words),
        el(
          "ol",
          {},
          answer.firings.map((f) =>
            el("li", {}, localTime(f.fire_at), el("span", { class: "muted small" }, ` · ${utcTime(f.fire_at)}`)),
          ),
        ),
      );
    } catch (error) {
      if (asked !== previewAsked) return;
      const details = error instanceof ApiError ? error.details : [];
      replace(
        preview,
        el(
          "span",
          { class: "preview-error" },
          details.length ? details.map((d) => `${d.field}: ${d.message}`).join("; ") : error.message,
        ),
      );
    }
  }

  form.addEventListener("change", showGroups);
  form.addEventListener("input", (event) => {
    showGroups();
    if (event.target.closest('[data-field^="schedule"]')) {
      clearTimeout(previewTimer);
      previewTimer = setTimeout(drawPreview, 250);
    }
  });
  form.addEventListener("change", (event) => {
    if (event.target.name === "schedule-kind") drawPreview();
  });

  const initial = job ? collect([]) : null;
  const idempotencyKey = crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const errors = [];
    const body = collect(errors);
    if (errors.length) {
      showErrors(form, summary, "Fix the fields marked below.", errors);
      return;
    }
    let changes = body;
    if (job) {
      changes = Object.fromEntries(
        Object.entries(body).filter(([key, value]) => JSON.stringify(value) !== JSON.stringify(initial[key])),
      );
      if (changes.target && JSON.stringify(changes.target.secret_headers || {}).includes('"***"')) {
        showErrors(form, summary, "Type the secret headers again.", [
          {
            field: "target.secret_headers",
            message: "the API never shows their values: replace each *** with the value",
          },
        ]);
        return;
      }
      if (!Object.keys(changes).length) {
        showErrors(form, summary, "Nothing changed.", []);
        return;
      }
    }
    submit.disabled = true;
    clearErrors(form, summary);
    try {
      const saved = job
        ? await api.updateJob(job.job_id, changes, job.version)
        : await api.createJob(body, idempotencyKey);
      setNextFlash(job ? `Saved: ${Object.keys(changes).join(", ")}.` : `Created job ${saved.name}.`);
      ctx.navigate(`#/jobs/${seg(saved.job_id)}`);
    } catch (error) {
      const details = error instanceof ApiError ? error.details : [];
      showErrors(form, summary, `${error.status ? `${error.status}: ` : ""}${error.message}`, details);
    } finally {
      submit.disabled = false;
    }
  });

  replace(
    root,
    el("p", { class: "crumbs" }, el("a", { href: "#/jobs" }, "Jobs"), " / ", job ? job.name : "new"),
    el("h1", {}, job ? `Change ${job.name}` : "New job"),
    el(
      "datalist",
      { id: "zones" },
      ZONES.map((z) => el("option", { value: z })),
    ),
    el("div", { class: "form-layout" }, form),
  );
  showGroups();
  drawPreview();
  return null; // a form is not refreshed under the user's hands
}
