// Form fields that know which field of the API they are (`data-field`, as the API's error
// `details` name them: `schedule.cron`, `target.url`), so an error appears beside the field
// it is about; an error about a field the form does not show goes to the summary above it.

import { el, replace } from "../dom.js";

let counter = 0;

export function field(path, label, input, help) {
  const id = `f-${path.replace(/[^a-z0-9]+/gi, "-")}-${++counter}`;
  input.id = id;
  if (!input.name) input.name = path;
  const error = el("p", { class: "field-error", id: `${id}-error`, role: "alert" });
  input.setAttribute("aria-describedby", `${id}-error`);
  return el(
    "div",
    { class: "field", dataset: { field: path } },
    el("label", { for: id }, label),
    input,
    help ? el("p", { class: "help" }, help) : null,
    error,
  );
}

export function text(attrs = {}) {
  return el("input", { type: "text", autocomplete: "off", spellcheck: "false", ...attrs });
}

export function options(name, values, current) {
  return el(
    "select",
    { name },
    values.map(([value, label]) => el("option", { value, selected: value === current }, label ?? value)),
  );
}

export function area(attrs = {}) {
  return el("textarea", { rows: 4, spellcheck: "false", ...attrs });
}

// A number as the API takes it; anything else as typed, so the API's own message says why.
export function numberOrText(value) {
  const trimmed = value.trim();
  if (trimmed === "") return undefined;
  return /^-?\d+(\.\d+)?$/.test(trimmed) ? Number(trimmed) : trimmed;
}

export function clearErrors(form, summary) {
  for (const holder of form.querySelectorAll(".field.invalid")) holder.classList.remove("invalid");
  for (const error of form.querySelectorAll(".field-error")) error.textContent = "";
  summary.replaceChildren();
}

// Each detail beside the visible field it names (or the nearest one above it: a detail on
// `target.headers.X-Key` goes beside `target.headers`); the rest, and `message`, above.
export function showErrors(form, summary, message, details) {
  clearErrors(form, summary);
  const unplaced = [];
  let first = null;
  for (const detail of details) {
    const holder = holderFor(form, detail.field || "body");
    if (!holder) {
      unplaced.push(detail);
      continue;
    }
    holder.classList.add("invalid");
    const error = holder.querySelector(".field-error");
    error.textContent = error.textContent ? `${error.textContent}; ${detail.message}` : detail.message;
    first = first || holder;
  }
  replace(
    summary,
    el(
      "div",
      { class: "flash flash-error", role: "alert" },
      el("span", {}, message),
      unplaced.length
        ? el(
            "ul",
            {},
            unplaced.map((d) => el("li", {}, `${d.field}: ${d.message}`)),
          )
        : null,
    ),
  );
  first?.querySelector("input, select, textarea")?.focus();
}

function holderFor(form, path) {
  let name = path;
  while (name) {
    const holder = [...form.querySelectorAll(".field")].find((h) => h.dataset.field === name && !h.closest("[hidden]"));
    if (holder) return holder;
    const cut = Math.max(name.lastIndexOf("."), name.lastIndexOf("["));
    name = cut > 0 ? name.slice(0, cut) : "";
  }
  return null;
}

// A JSON field: its value, or an error beside it (never sent).
export function parseJson(input, holderPath, errors, { object = false } = {}) {
  const raw = input.value.trim();
  if (!raw) return undefined;
  try {
    const value = JSON.parse(raw);
    if (object && (typeof value !== "object" || value === null || Array.isArray(value))) {
      errors.push({ field: holderPath, message: 'must be a JSON object, e.g. {"X-Tenant": "acme"}' });
      return undefined;
    }
    return value;
  } catch (error) {
    errors.push({ field: holderPath, message: `not valid JSON: ${error.message}` });
    return undefined;
  }
}
