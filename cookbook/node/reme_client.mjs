// A dependency-free client for the ReMe-compatible memory service (Node >= 18: global fetch, AbortSignal.timeout).
//
//   import { ReMeClient } from "./reme_client.mjs";
//   const reme = new ReMeClient("http://127.0.0.1:8002", { workspaceId: "my_agent" });
//   const hits = await reme.retrieve_task_memory("paginate through an API", { top_k: 3 });
//   console.log(hits.answer, hits.metadata.memory_list);
//
// Methods are named after the service's flows (snake_case, as in the HTTP paths, the Python client and MCP tool
// names) and take the flow's key fields positionally plus an object of any other request fields, spelt as the
// service spells them. `call(flow, fields)` runs any flow; `await ReMeClient.connect(url)` also adds a method for
// every flow the server offers that this file does not know yet.
//
// Failures throw `ReMeError` subclasses chosen by the envelope's `code` (InvalidRequestError for 400,
// RequestValidationError for 422, PathNotAllowedError, NotFoundError, LLMError, ...), carrying the service's
// `message`, `status`, `code`, `details` and `requestId`. Connection failures (nothing was sent) are retried with
// exponential backoff, then throw ServiceConnectionError; a request that reached the server is never resent.

/**
 * @typedef {Object} FlowResult
 * @property {any} answer          the flow's answer: text, or a JSON value for some flows
 * @property {boolean} success     always true here (failures throw)
 * @property {Record<string, any>} metadata   memory_list, update_result, action_result, no_llm_ops, ...
 * @property {string} requestId    the server's x-request-id
 */

/**
 * @typedef {Object} Message
 * @property {"system"|"user"|"assistant"|"tool"} role
 * @property {string|Array<Record<string, any>>|null} [content]
 * @property {Array<Record<string, any>>} [tool_calls]
 * @property {string} [tool_call_id]
 * @property {string} [name]
 * @property {string} [time_created]   "YYYY-MM-DD HH:MM:SS"
 * @property {Record<string, any>} [metadata]
 */

/**
 * @typedef {Object} Trajectory
 * @property {Message[]} messages
 * @property {number} [score]          1.0 = success for summary_task_memory (>= 0.9 for the _simple flow)
 * @property {string} [task_id]
 * @property {Record<string, any>} [metadata]   e.g. {query: "the task"}
 */

/**
 * @typedef {Object} ToolCallResult
 * @property {string} tool_name
 * @property {Record<string, any>|string} [input]
 * @property {string} output
 * @property {boolean} [success]
 * @property {number} [time_cost]      seconds
 * @property {number} [token_cost]     -1 = let the service estimate
 * @property {string} [create_time]
 * @property {Record<string, any>} [metadata]
 */

/**
 * @typedef {Object} MemoryDict
 * @property {string} [memory_id]
 * @property {"task"|"personal"|"tool"} [memory_type]
 * @property {string} when_to_use      the text that is embedded and searched
 * @property {string} content          what an agent gets back
 * @property {number} [score]
 * @property {Record<string, any>} [metadata]
 */

/**
 * Request fields every flow accepts, plus anything else the flow declares.
 * @typedef {{workspace_id?: string, query?: string, messages?: Message[], metadata?: Record<string, any>,
 *            [field: string]: any}} Fields
 */

/**
 * @typedef {Object} ClientOptions
 * @property {string} [workspaceId]    used when a call gives no workspace_id
 * @property {number} [timeoutMs]      per request (default 120000)
 * @property {number} [loadTimeoutMs]  for the vector_store actions load, dump and copy, which may run for minutes
 *                                     (a 10,000-memory library embedded by the local model) (default 1800000)
 * @property {number} [retries]        extra attempts after a connection failure (default 3)
 * @property {number} [backoffMs]      first wait between attempts, doubled each time (default 200)
 * @property {Record<string, string>} [headers]
 * @property {string} [apiKey]  sent as `Authorization: Bearer <key>`; default: $REME_API_KEY
 * @property {typeof fetch} [fetch]    a fetch implementation (default: the global one)
 */

export class ReMeError extends Error {
  /**
   * @param {string} message
   * @param {{code?: string, status?: number, details?: Record<string, any>, requestId?: string, cause?: unknown}} [info]
   */
  constructor(message, info = {}) {
    super(message, info.cause === undefined ? undefined : { cause: info.cause });
    this.name = new.target.name;
    /** @type {string} */ this.code = info.code ?? "internal_error";
    /** @type {number} */ this.status = info.status ?? 500;
    /** @type {Record<string, any>} */ this.details = info.details ?? {};
    /** @type {string} */ this.requestId = info.requestId ?? "";
  }
}
export class InvalidRequestError extends ReMeError {}
export class RequestValidationError extends InvalidRequestError {}
export class PathNotAllowedError extends ReMeError {}
export class NotFoundError extends ReMeError {}
export class ProviderError extends ReMeError {}
export class LLMError extends ProviderError {}
export class EmbeddingError extends ProviderError {}
export class StoreError extends ReMeError {}
export class DimensionMismatchError extends StoreError {}
export class ServiceConnectionError extends ReMeError {}

/** @type {Record<string, typeof ReMeError>} the service's error codes (reme_service/errors.py) */
export const ERROR_TYPES = {
  internal_error: ReMeError,
  invalid_request: InvalidRequestError,
  validation_error: RequestValidationError,
  path_not_allowed: PathNotAllowedError,
  not_found: NotFoundError,
  provider_error: ProviderError,
  llm_error: LLMError,
  embedding_error: EmbeddingError,
  store_unavailable: StoreError,
  dimension_mismatch: DimensionMismatchError,
};

// Errors fetch raises before the request is sent: safe to retry, even for flows that write.
const CONNECT_ERRORS = new Set([
  "ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "UND_ERR_CONNECT_TIMEOUT",
]);

/** @param {unknown} err */
function isConnectError(err) {
  let cause = /** @type {any} */ (err)?.cause;
  while (cause) {
    if (CONNECT_ERRORS.has(cause.code)) return true;
    if (Array.isArray(cause.errors) && cause.errors.some((/** @type {any} */ e) => CONNECT_ERRORS.has(e?.code))) {
      return true; // AggregateError from happy-eyeballs (IPv4 and IPv6 both refused)
    }
    cause = cause.cause;
  }
  return false;
}

/**
 * The typed error for a failed response.
 * @param {number} status
 * @param {string} text   the response body
 * @param {string} requestId
 * @returns {ReMeError}
 */
export function errorFromResponse(status, text, requestId) {
  /** @type {any} */
  let body = null;
  try { body = JSON.parse(text); } catch { /* not JSON: reported as text below */ }
  if (body && Array.isArray(body.detail)) {
    const lines = body.detail.map((/** @type {any} */ d) => {
      const loc = (d.loc ?? []).filter((/** @type {any} */ p) => p !== "body").join(".");
      return `${loc || "(body)"}: ${d.msg ?? JSON.stringify(d)}`;
    });
    return new RequestValidationError(`request validation failed: ${lines.join("; ")}`, {
      code: "validation_error", status, details: { errors: body.detail }, requestId,
    });
  }
  const error = body?.metadata?.error;
  if (error && typeof error === "object") {
    const code = String(error.code ?? "internal_error");
    const Type = ERROR_TYPES[code] ?? ReMeError;
    return new Type(String(error.message ?? ""), {
      code, status, details: error.details ?? {}, requestId: error.request_id ?? requestId,
    });
  }
  return new ReMeError(`HTTP ${status}: ${text.trim().slice(0, 500)}`, { code: "http_error", status, requestId });
}

/** vector_store actions that may run for minutes: they get `loadTimeoutMs` instead of `timeoutMs`. */
const LONG_ACTIONS = new Set(["load", "dump", "copy"]);

const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class ReMeClient {
  /**
   * @param {string} [baseUrl]  default: $REME_BASE_URL or http://127.0.0.1:8002
   * @param {ClientOptions} [options]
   */
  constructor(baseUrl, options = {}) {
    this.baseUrl = (baseUrl ?? process.env.REME_BASE_URL ?? "http://127.0.0.1:8002").replace(/\/+$/, "");
    this.workspaceId = options.workspaceId ?? "";
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.loadTimeoutMs = options.loadTimeoutMs ?? 1_800_000;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 200;
    const apiKey = options.apiKey ?? process.env.REME_API_KEY ?? "";
    this.headers = { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...(options.headers ?? {}) };
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * A client with a method for every flow the server offers (typed ones below, generic ones for the rest).
   * @param {string} [baseUrl]
   * @param {ClientOptions} [options]
   * @returns {Promise<ReMeClient & Record<string, (fields?: Fields) => Promise<FlowResult>>>}
   */
  static async connect(baseUrl, options = {}) {
    const client = /** @type {any} */ (new ReMeClient(baseUrl, options));
    for (const flow of await client.flows()) {
      if (typeof client[flow] !== "function") client[flow] = (/** @type {Fields} */ fields = {}) => client.call(flow, fields);
    }
    return client;
  }

  /**
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   * @returns {Promise<Response>}
   */
  async #send(method, path, body) {
    const init = {
      method,
      headers: { "content-type": "application/json", ...this.headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    };
    const long = path === "/vector_store" && LONG_ACTIONS.has(/** @type {any} */ (body)?.action);
    const timeoutMs = long ? this.loadTimeoutMs : this.timeoutMs;
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.fetch(`${this.baseUrl}${path}`, { ...init, signal: AbortSignal.timeout(timeoutMs) });
      } catch (err) {
        if (!isConnectError(err)) throw err;
        if (attempt >= this.retries) {
          throw new ServiceConnectionError(
            `cannot reach the memory service at ${this.baseUrl} after ${attempt + 1} attempt(s): ${/** @type {any} */ (err).cause?.code ?? err}`,
            { code: "connection_error", status: 503, details: { attempts: attempt + 1, baseUrl: this.baseUrl }, cause: err },
          );
        }
        await sleep(this.backoffMs * 2 ** attempt);
      }
    }
  }

  /**
   * Run any flow. Fields that are `undefined` or `null` are not sent, so the server's defaults apply.
   * @param {string} flow
   * @param {Fields} [fields]
   * @returns {Promise<FlowResult>}
   */
  async call(flow, fields = {}) {
    /** @type {Record<string, any>} */
    const body = {};
    for (const [key, value] of Object.entries(fields)) if (value !== undefined && value !== null) body[key] = value;
    if (this.workspaceId && !body.workspace_id) body.workspace_id = this.workspaceId;
    const response = await this.#send("POST", `/${encodeURIComponent(flow)}`, body);
    const text = await response.text();
    const requestId = response.headers.get("x-request-id") ?? "";
    if (response.status !== 200) throw errorFromResponse(response.status, text, requestId);
    /** @type {any} */
    let parsed;
    try { parsed = JSON.parse(text); } catch { throw errorFromResponse(response.status, text, requestId); }
    if (parsed?.success !== true) throw errorFromResponse(response.status, text, requestId);
    return { answer: parsed.answer ?? "", success: true, metadata: parsed.metadata ?? {}, requestId };
  }

  /** @returns {Promise<Record<string, any>>} `GET /health`: store and provider status, and the flow names */
  async health() {
    const response = await this.#send("GET", "/health");
    const text = await response.text();
    if (response.status !== 200) throw errorFromResponse(response.status, text, "");
    return JSON.parse(text);
  }

  /** @returns {Promise<string[]>} the names of the flows the server offers */
  async flows() {
    return (await this.health()).flows ?? [];
  }

  // -- task memory ------------------------------------------------------------------------------------

  /** @param {string} query @param {Fields & {top_k?: number}} [fields] */
  retrieve_task_memory(query, fields = {}) { return this.call("retrieve_task_memory", { ...fields, query }); }

  /** @param {string} query @param {Fields & {top_k?: number}} [fields] */
  retrieve_task_memory_simple(query, fields = {}) { return this.call("retrieve_task_memory_simple", { ...fields, query }); }

  /** @param {Trajectory[]} trajectories @param {Fields} [fields] */
  summary_task_memory(trajectories, fields = {}) { return this.call("summary_task_memory", { ...fields, trajectories }); }

  /** @param {Trajectory[]} trajectories @param {Fields} [fields] */
  summary_task_memory_simple(trajectories, fields = {}) {
    return this.call("summary_task_memory_simple", { ...fields, trajectories });
  }

  /** @param {MemoryDict[]} memory_dicts  the memory_list a retrieval returned @param {boolean} update_utility @param {Fields} [fields] */
  record_task_memory(memory_dicts, update_utility, fields = {}) {
    return this.call("record_task_memory", { ...fields, memory_dicts, update_utility });
  }

  /** @param {number} freq_threshold @param {number} utility_threshold @param {Fields} [fields] */
  delete_task_memory(freq_threshold, utility_threshold, fields = {}) {
    return this.call("delete_task_memory", { ...fields, freq_threshold, utility_threshold });
  }

  // -- personal memory --------------------------------------------------------------------------------

  /** @param {Fields & {trajectories?: Trajectory[], user_name?: string}} fields  trajectories or messages */
  summary_personal_memory(fields) { return this.call("summary_personal_memory", fields); }

  /** @param {Fields & {user_name?: string}} [fields] */
  reflect_personal_memory(fields = {}) { return this.call("reflect_personal_memory", fields); }

  /** @param {string} query @param {Fields & {top_k?: number, user_name?: string, query_time?: string}} [fields] */
  retrieve_personal_memory(query, fields = {}) { return this.call("retrieve_personal_memory", { ...fields, query }); }

  // -- tool memory ------------------------------------------------------------------------------------

  /** @param {ToolCallResult[]} tool_call_results @param {Fields} [fields] */
  add_tool_call_result(tool_call_results, fields = {}) {
    return this.call("add_tool_call_result", { ...fields, tool_call_results });
  }

  /** @param {string|string[]} tool_names @param {Fields} [fields] */
  summary_tool_memory(tool_names, fields = {}) { return this.call("summary_tool_memory", { ...fields, tool_names }); }

  /** @param {string|string[]} tool_names @param {Fields} [fields] */
  retrieve_tool_memory(tool_names, fields = {}) { return this.call("retrieve_tool_memory", { ...fields, tool_names }); }

  /** @param {string} query @param {Fields & {seed?: number}} [fields] */
  use_mock_search(query, fields = {}) { return this.call("use_mock_search", { ...fields, query }); }

  // -- working memory ---------------------------------------------------------------------------------

  /**
   * @param {Message[]} messages
   * @param {Fields & {working_summary_mode?: "compact"|"compress"|"auto", max_total_tokens?: number,
   *   max_tool_message_tokens?: number, keep_recent_count?: number, store_dir?: string, chat_id?: string}} [fields]
   */
  summary_working_memory(messages, fields = {}) { return this.call("summary_working_memory", { ...fields, messages }); }

  /** @param {Message[]} messages @param {Fields} [fields] */
  summary_working_memory_for_as(messages, fields = {}) {
    return this.call("summary_working_memory_for_as", { ...fields, messages });
  }

  /** @param {string} file_path @param {string} pattern @param {Fields & {limit?: number}} [fields] */
  grep_working_memory(file_path, pattern, fields = {}) {
    return this.call("grep_working_memory", { ...fields, file_path, pattern });
  }

  /** @param {string} file_path @param {Fields & {offset?: number, limit?: number}} [fields] */
  read_working_memory(file_path, fields = {}) { return this.call("read_working_memory", { ...fields, file_path }); }

  // -- agents (need an LLM on the server) -------------------------------------------------------------

  /** @param {Message[]} messages @param {Fields} [fields] */
  agentic_retrieve(messages, fields = {}) { return this.call("agentic_retrieve", { ...fields, messages }); }

  /** @param {Fields} fields  query and/or messages */
  react(fields) { return this.call("react", fields); }

  // -- workspaces and libraries -----------------------------------------------------------------------

  /**
   * @param {"list"|"dump"|"load"|"copy"|"delete"|"delete_ids"|"insert"} action
   * @param {Fields & {path?: string, src_workspace_id?: string, memory_ids?: string[], memory_dicts?: MemoryDict[]}} [fields]
   */
  vector_store(action, fields = {}) { return this.call("vector_store", { ...fields, action }); }
}
