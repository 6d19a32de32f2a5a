// The page's only way out: relative URLs, so the same page works on the local cloud (where
// /v1 is its API Gateway) and behind `scheduler console` (which signs /v1 for a deployed
// stack). /v1 is the public API; /console/api is the console server's own routes.

// Every call says it comes from the console page: the console server refuses requests that
// act without it (another site open in the browser cannot send it).
import { seg } from "./dom.js";

const CONSOLE_HEADER = { "X-Scheduler-Console": "1" };
// A read that has not answered by then is given up (the next refresh asks again, on another
// connection): one stuck request must not hold the live view still. Changes are never given
// up on: their outcome is the server's to say.
const READ_TIMEOUT_MS = 10_000;

export class ApiError extends Error {
  constructor(status, body) {
    const error = body && typeof body === "object" ? body.error : null;
    super(error?.message || body?.message || (typeof body === "string" && body) || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || null;
    this.details = Array.isArray(error?.details) ? error.details : [];
  }
}

export function withQuery(path, params = {}) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, value);
  }
  const text = query.toString();
  return text ? `${path}${path.includes("?") ? "&" : "?"}${text}` : path;
}

export async function call(method, path, body, headers = {}) {
  const init = { method, headers: { ...CONSOLE_HEADER, ...headers }, cache: "no-store" };
  if (method === "GET") init.signal = AbortSignal.timeout(READ_TIMEOUT_MS);
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(0, { error: { message: `cannot reach the console server: ${error.message}` } });
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = text;
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

export const get = (path, params) => call("GET", withQuery(path, params));
export const post = (path, body, headers) => call("POST", path, body, headers);

// Every item of a listing, following next_cursor, at most `max`.
export async function listAll(path, params = {}, max = 500) {
  const items = [];
  let cursor = null;
  do {
    const page = await get(path, { ...params, cursor });
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items;
}

// The API's routes, by what they do.
const job = (id) => `/v1/jobs/${seg(id)}`;
const workflow = (id) => `/v1/workflows/${seg(id)}`;

export const api = {
  jobs: (params) => get("/v1/jobs", params),
  job: (id) => get(job(id)),
  createJob: (body, key) => post("/v1/jobs", body, { "Idempotency-Key": key }),
  updateJob: (id, body, version) => call("PATCH", job(id), body, { "If-Match": `"${version}"` }),
  cancelJob: (id) => call("DELETE", job(id)),
  jobAction: (id, action, body) => post(`${job(id)}/${action}`, body),
  runs: (id, params) => get(`${job(id)}/runs`, params),
  run: (id, runId) => get(`${job(id)}/runs/${seg(runId)}`),
  retryRun: (id, runId) => post(`${job(id)}/runs/${seg(runId)}/retry`),
  workflows: (params) => get("/v1/workflows", params),
  workflow: (id) => get(workflow(id)),
  cancelWorkflow: (id) => call("DELETE", workflow(id)),
  workflowAction: (id, action, body) => post(`${workflow(id)}/${action}`, body),
  workflowRuns: (id, params) => get(`${workflow(id)}/runs`, params),
  workflowRun: (id, runId) => get(`${workflow(id)}/runs/${seg(runId)}`),
  cancelWorkflowRun: (id, runId) => post(`${workflow(id)}/runs/${seg(runId)}/cancel`),
  retryTask: (id, runId, taskId) => post(`${workflow(id)}/runs/${seg(runId)}/tasks/${seg(taskId)}/retry`),
  tenant: () => get("/v1/tenant"),
};

export const consoleApi = {
  config: () => get("/console/api/config"),
  deadLetters: (limit = 50) => get("/console/api/dlq", { limit }),
  redrive: () => post("/console/api/dlq/redrive"),
  queues: () => get("/console/api/queues"),
  metrics: () => get("/console/api/metrics"),
  schedule: (body) => post("/console/api/schedule", body),
};
