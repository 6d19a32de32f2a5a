// The console's shell: hash routes to views, the header (where this console points, who you
// are to the API), and the live loop that refreshes the open view while the page is visible.
//
// A view is `render(root, ctx)` → `{ refresh, interval }`: it draws itself, and `refresh`
// redraws only its data (never a form being typed in); the loop calls it every `interval` ms.

import { api, ApiError, consoleApi } from "./api.js";
import { el, replace } from "./dom.js";
import * as dlq from "./views/dlq.js";
import * as jobForm from "./views/job_form.js";
import * as job from "./views/job.js";
import * as jobs from "./views/jobs.js";
import * as overview from "./views/overview.js";
import * as run from "./views/run.js";
import * as workflow from "./views/workflow.js";
import * as workflows from "./views/workflows.js";

const ROUTES = [
  [/^\/overview$/, overview.render, "overview"],
  [/^\/jobs$/, jobs.render, "jobs"],
  [/^\/jobs\/new$/, jobForm.renderCreate, "jobs"],
  [/^\/jobs\/([^/]+)\/edit$/, jobForm.renderEdit, "jobs"],
  [/^\/jobs\/([^/]+)\/runs\/([^/]+)$/, run.render, "jobs"],
  [/^\/jobs\/([^/]+)$/, job.render, "jobs"],
  [/^\/workflows$/, workflows.render, "workflows"],
  [/^\/workflows\/([^/]+)\/runs\/([^/]+)$/, workflow.render, "workflows"],
  [/^\/workflows\/([^/]+)$/, workflow.render, "workflows"],
  [/^\/dlq$/, dlq.render, "dlq"],
];
const DEFAULT_ROUTE = "#/jobs";
const DEFAULT_INTERVAL_MS = 3000;
const HIDDEN_INTERVAL_MS = 15000;

const state = { view: null, timer: null, live: true, generation: 0, config: {}, refreshing: null };

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const [path, query = ""] = raw.split("?");
  return { path, query: new URLSearchParams(query) };
}

function context(generation, query) {
  return {
    config: state.config,
    query,
    // The view's filters into the address (so a reload keeps them) without a new render.
    setQuery(params) {
      const { path } = parseHash();
      const text = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
      history.replaceState(null, "", `#${path}${text ? `?${text}` : ""}`);
    },
    navigate(hash) {
      location.hash = hash;
    },
    current: () => generation === state.generation,
    refreshNow: () => tick(generation),
  };
}

async function show() {
  const { path, query } = parseHash();
  const found = ROUTES.map(([pattern, render, section]) => [path.match(pattern), render, section]).find(
    ([match]) => match,
  );
  if (!found) {
    location.replace(DEFAULT_ROUTE);
    return;
  }
  const [match, render, section] = found;
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.section === section);
  }
  clearTimeout(state.timer);
  const generation = ++state.generation;
  state.view = null;
  const root = document.getElementById("view");
  const container = el("div", { class: "view", dataset: { route: section } });
  replace(root, container);
  const params = match.slice(1).map(decodeURIComponent);
  try {
    const view = await render(container, context(generation, query), ...params);
    if (generation !== state.generation) return;
    state.view = view || null;
    markUpdated();
    schedule(generation);
  } catch (error) {
    if (generation !== state.generation) return;
    replace(container, el("div", { class: "flash flash-error", role: "alert" }, describe(error)));
  }
}

function describe(error) {
  if (error instanceof ApiError) return `${error.status || ""} ${error.message}`.trim();
  console.error(error);
  return `The page failed: ${error.message}`;
}

function schedule(generation) {
  // An older view's refresh that ends after the view changed must not touch the timer: it is
  // the new view's (clearing it first once stopped a freshly opened page from refreshing).
  if (generation !== state.generation) return;
  clearTimeout(state.timer);
  if (!state.live || !state.view?.refresh) return;
  const interval = state.view.interval || DEFAULT_INTERVAL_MS;
  // A tab out of sight refreshes less often (and at once when it is seen again), never not at
  // all: a browser may call a tab hidden that is on a screen all the same.
  state.timer = setTimeout(() => tick(generation), document.hidden ? Math.max(interval, HIDDEN_INTERVAL_MS) : interval);
}

// One refresh at a time: a refresh asked for while one runs (after an action, say) runs
// after it, so an older answer never paints over a newer one.
function tick(generation) {
  state.refreshing = (state.refreshing || Promise.resolve()).catch(() => {}).then(() => refreshOnce(generation));
  return state.refreshing;
}

async function refreshOnce(generation) {
  if (generation !== state.generation || !state.view?.refresh) return;
  clearTimeout(state.timer);
  try {
    await state.view.refresh();
    if (generation === state.generation) markUpdated();
  } catch (error) {
    if (generation === state.generation) markStale(error);
  }
  schedule(generation);
}

function markUpdated() {
  const text = document.getElementById("live-text");
  const button = document.getElementById("live");
  button.classList.remove("stale");
  text.textContent = state.live ? `live · ${new Date().toLocaleTimeString(undefined, { hour12: false })}` : "paused";
}

function markStale(error) {
  console.warn("refresh failed:", error);
  document.getElementById("live").classList.add("stale");
  document.getElementById("live-text").textContent = `refresh failed: ${describe(error)}`;
}

async function header() {
  try {
    state.config = await consoleApi.config();
  } catch (error) {
    state.config = { mode: "unknown", error: describe(error) };
  }
  const mode = document.getElementById("mode");
  if (state.config.mode === "local") {
    mode.textContent = "local cloud";
  } else if (state.config.mode === "deployed") {
    mode.textContent = `deployed · ${new URL(state.config.api_url).host}`;
    mode.title = `${state.config.api_url}, signed with ${state.config.signed_as}`;
  } else {
    mode.textContent = "console server unreachable";
  }
  mode.dataset.mode = state.config.mode;
  try {
    const tenant = await api.tenant();
    const who = document.getElementById("who");
    who.textContent = tenant.principal_arn.split(/[:/]/).pop();
    who.title = `${tenant.principal_arn}\ntenant ${tenant.tenant}`;
  } catch {
    // An API without /v1/tenant: the header just does not say who you are.
  }
}

document.getElementById("live").addEventListener("click", () => {
  state.live = !state.live;
  document.getElementById("live").classList.toggle("on", state.live);
  markUpdated();
  if (state.live) tick(state.generation);
  else clearTimeout(state.timer);
});
document.addEventListener("visibilitychange", () => {
  console.info(`the page is ${document.visibilityState}`);
  if (!document.hidden && state.live) tick(state.generation);
});
window.addEventListener("hashchange", show);

await header();
if (!location.hash || location.hash === "#/") location.replace(DEFAULT_ROUTE);
else show();
