// `ReMeClient`: the service's flows (one typed method each), its management API, jobs and events.

import { EventStream } from "./events.js";
import { ClientTimeoutError, ReMeError, errorFromResponse } from "./errors.js";
import type * as F from "./flows.js";
import { type ClientOptions, type Reply, Transport, replyError } from "./http.js";
import type {
  FlowResult,
  Health,
  HistoryEntry,
  ImportResult,
  Job,
  JobAccepted,
  JsonObject,
  ListMemoriesOptions,
  Memory,
  MemoryDeleted,
  MemoryPage,
  Message,
  NewMemory,
  ToolCallResult,
  Trajectory,
  WorkspacePage,
} from "./types.js";

/** `vector_store` actions that may run for minutes: they get `loadTimeoutMs` instead of `timeoutMs`. */
const LONG_ACTIONS = new Set(["load", "dump", "copy"]);

/** Options of `waitForJob` / `runJob`. */
export interface WaitOptions {
  /** give up (ClientTimeoutError) after this long; default: the client's `loadTimeoutMs` */
  timeoutMs?: number;
  /** called with each state seen while the job is not finished (its `progress`, when the server reports it) */
  onProgress?: (job: Job) => void;
  signal?: AbortSignal;
}

export interface SubmitOptions {
  /** makes a retried submission return the job of the first one (1-255 printable characters) */
  idempotencyKey?: string;
}

const enc = encodeURIComponent;

function compact(fields: Record<string, unknown>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) if (value !== undefined && value !== null) body[key] = value;
  return body;
}

function flowResult(reply: Reply): FlowResult {
  if (reply.status !== 200) throw replyError(reply);
  let parsed: { success?: unknown; answer?: unknown; metadata?: JsonObject };
  try {
    parsed = JSON.parse(reply.text) as typeof parsed;
  } catch {
    throw replyError(reply);
  }
  if (parsed?.success !== true) throw replyError(reply);
  return { answer: parsed.answer ?? "", success: true, metadata: parsed.metadata ?? {}, requestId: reply.requestId };
}

/**
 * A client of the memory service.
 *
 * ```ts
 * const reme = new ReMeClient("http://127.0.0.1:8002", { workspaceId: "my_agent", apiKey: process.env.REME_API_KEY });
 * const hits = await reme.retrieve_task_memory("paginate through an API", { top_k: 3 });
 * console.log(hits.answer, hits.metadata.memory_list);
 * ```
 *
 * Flow methods are named after the flows (snake_case, as the HTTP paths, the Python client and the MCP tools) and
 * take the flow's key fields positionally and any other request field in a last object. `call(flow, fields)` runs
 * any flow, also one this client does not know. Failures throw the `ReMeError` subclass of the envelope's code.
 */
export class ReMeClient {
  /** the client's default workspace, used when a flow call names none */
  readonly workspaceId: string;
  readonly #http: Transport;

  /** `baseUrl` default: `$REME_BASE_URL`, else http://127.0.0.1:8002. */
  constructor(baseUrl?: string, options: ClientOptions = {}) {
    this.#http = new Transport(baseUrl, options);
    this.workspaceId = options.workspaceId ?? "";
  }

  get baseUrl(): string {
    return this.#http.baseUrl;
  }

  // -- any flow -------------------------------------------------------------------------------------------

  /** Run a flow. Fields `undefined` or `null` are not sent, so the server's defaults apply. */
  call<N extends F.FlowName>(flow: N, fields: F.FlowRequests[N]): Promise<FlowResult>;
  call(flow: string, fields?: F.FlowFields): Promise<FlowResult>;
  async call(flow: string, fields: F.FlowFields = {}): Promise<FlowResult> {
    const body = this.#body(fields);
    const reply = await this.#http.send("POST", `/${enc(flow)}`, { body, timeoutMs: this.#timeout(flow, body) });
    return flowResult(reply);
  }

  /** Queue a background flow (`"async": true`): the server answers 202 with a job id at once. */
  async submit<N extends F.BackgroundFlow>(flow: N, fields: F.FlowRequests[N], options: SubmitOptions = {}): Promise<JobAccepted> {
    const body = { ...this.#body(fields), async: true };
    const headers = options.idempotencyKey === undefined ? undefined : { "idempotency-key": options.idempotencyKey };
    const reply = await this.#http.send("POST", `/${enc(flow)}`, { body, ...(headers ? { headers } : {}) });
    if (reply.status !== 202 && reply.status !== 200) throw replyError(reply);
    const parsed = JSON.parse(reply.text) as { success?: boolean; metadata?: { job_id?: string; status?: Job["status"]; idempotent_replay?: boolean } };
    const job = parsed.metadata;
    if (parsed.success !== true || !job?.job_id) throw replyError(reply);
    return { job_id: job.job_id, status: job.status ?? "queued", idempotent_replay: job.idempotent_replay ?? false, requestId: reply.requestId };
  }

  /** `GET /jobs/{id}`; with `waitS` (≤ 60) the server holds the answer until the job finishes or the time is up. */
  getJob(jobId: string, options: { waitS?: number; signal?: AbortSignal } = {}): Promise<Job> {
    const wait = options.waitS ? `?wait=${options.waitS}` : "";
    const timeoutMs = this.#http.timeoutMs + (options.waitS ?? 0) * 1000;
    return this.#http.json<Job>("GET", `/jobs/${enc(jobId)}${wait}`, {
      timeoutMs,
      ...(options.signal ? { signal: options.signal } : {}),
    });
  }

  /** The job once finished (`done`, `failed` or `cancelled`), long-polling the server; `onProgress` sees every
   * unfinished state. */
  async waitForJob(jobId: string, options: WaitOptions = {}): Promise<Job> {
    const deadline = Date.now() + (options.timeoutMs ?? this.#http.loadTimeoutMs);
    for (;;) {
      const left = (deadline - Date.now()) / 1000;
      const job = await this.getJob(jobId, {
        waitS: Math.max(0, Math.min(left, 2)),
        ...(options.signal ? { signal: options.signal } : {}),
      });
      if (isFinished(job)) return job;
      options.onProgress?.(job);
      if (Date.now() >= deadline) {
        throw new ClientTimeoutError(`job ${jobId} did not finish in time (status ${job.status})`, {
          code: "client_timeout",
          status: 0,
          details: { job_id: jobId, status: job.status },
        });
      }
    }
  }

  /** A finished job's answer as the synchronous call would have given it; its typed error when it failed or was
   * cancelled (its key revoked: 403; its workspace deleted: 409). */
  jobResult(job: Job): FlowResult {
    const result = job.result;
    if (!isFinished(job)) {
      throw new ReMeError(`job ${job.job_id} is not finished (status ${job.status})`, { code: "job_not_finished", status: 0 });
    }
    if (job.status === "done" && result?.success === true) {
      return { answer: result.answer ?? "", success: true, metadata: result.metadata ?? {}, requestId: "" };
    }
    return raise(errorFromResponse(job.http_status ?? (job.status === "cancelled" ? 409 : 500), JSON.stringify(result ?? {})));
  }

  /** Submit a background flow, wait for it, answer its result (or throw its error). */
  async runJob<N extends F.BackgroundFlow>(flow: N, fields: F.FlowRequests[N], options: WaitOptions & SubmitOptions = {}): Promise<FlowResult> {
    const accepted = await this.submit(flow, fields, options);
    return this.jobResult(await this.waitForJob(accepted.job_id, options));
  }

  // -- service ----------------------------------------------------------------------------------------------

  /** `GET /health`: the status of the store and providers, and the flows. */
  health(): Promise<Health> {
    return this.#http.json<Health>("GET", "/health");
  }

  /** The names of the flows the server offers. */
  async flows(): Promise<string[]> {
    return (await this.health()).flows ?? [];
  }

  // -- management API -----------------------------------------------------------------------------------------

  /** A page of the workspaces the API key covers, by id, with their counts. */
  listWorkspaces(options: { limit?: number; cursor?: string } = {}): Promise<WorkspacePage> {
    return this.#http.json<WorkspacePage>("GET", `/workspaces${query(options)}`);
  }

  /** A page of a workspace's memories, in `sort` order, with the `total` that match the filters. */
  listMemories(workspaceId: string, options: ListMemoriesOptions = {}): Promise<MemoryPage> {
    return this.#http.json<MemoryPage>("GET", `/workspaces/${enc(workspaceId)}/memories${query({ ...options })}`);
  }

  /** Every memory matching `options`, page by page. */
  async *iterateMemories(workspaceId: string, options: Omit<ListMemoriesOptions, "cursor"> = {}): AsyncGenerator<Memory> {
    let cursor: string | null | undefined;
    do {
      const page: MemoryPage = await this.listMemories(workspaceId, { ...options, ...(cursor ? { cursor } : {}) });
      yield* page.memories;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** Create a memory (201); the workspace is created with it when new. An existing `memory_id` is a `ConflictError`. */
  createMemory(workspaceId: string, memory: NewMemory): Promise<Memory> {
    return this.#http.json<Memory>("POST", `/workspaces/${enc(workspaceId)}/memories`, { body: memory }, [201]);
  }

  getMemory(workspaceId: string, memoryId: string): Promise<Memory> {
    return this.#http.json<Memory>("GET", memoryPath(workspaceId, memoryId));
  }

  /** PATCH a memory's fields (re-embedded when `when_to_use` changes); `memory_id` and `memory_type` cannot change. */
  updateMemory(workspaceId: string, memoryId: string, fields: Partial<Memory>): Promise<Memory> {
    return this.#http.json<Memory>("PATCH", memoryPath(workspaceId, memoryId), { body: fields });
  }

  deleteMemory(workspaceId: string, memoryId: string): Promise<MemoryDeleted> {
    return this.#http.json<MemoryDeleted>("DELETE", memoryPath(workspaceId, memoryId));
  }

  /** The memory's history, oldest first (ADD, UPDATE, INVALIDATE, DELETE). */
  memoryHistory(workspaceId: string, memoryId: string): Promise<HistoryEntry[]> {
    return this.#http.json<HistoryEntry[]>("GET", `${memoryPath(workspaceId, memoryId)}/history`);
  }

  /** The workspace as ReMe library JSONL (one memory a line), a snapshot of one instant. */
  async exportWorkspace(workspaceId: string): Promise<string> {
    const reply = await this.#http.send("GET", `/workspaces/${enc(workspaceId)}/export`, { timeoutMs: this.#http.loadTimeoutMs });
    if (reply.status !== 200) throw replyError(reply);
    return reply.text;
  }

  /** Replace an existing workspace's memories with a library (JSONL text, or memories), atomically. */
  importWorkspace(workspaceId: string, library: string | readonly (Memory | NewMemory)[]): Promise<ImportResult> {
    const data = typeof library === "string" ? library : library.map((memory) => JSON.stringify(memory)).join("\n");
    return this.#http.json<ImportResult>("POST", `/workspaces/${enc(workspaceId)}/import`, {
      raw: { data, contentType: "application/x-ndjson" },
      timeoutMs: this.#http.loadTimeoutMs,
    });
  }

  // -- events -------------------------------------------------------------------------------------------------

  /**
   * `GET /events`: the change events of the workspaces the key covers (or of `workspace`), as an async iterator.
   * Resolves once the server has subscribed the stream, so no later event is missed.
   */
  async events(options: { workspace?: string; signal?: AbortSignal } = {}): Promise<EventStream> {
    const abort = new AbortController();
    options.signal?.addEventListener("abort", () => abort.abort(), { once: true });
    const path = `/events${query({ workspace: options.workspace })}`;
    // the stream lives as long as its reader: no timeout, only the abort of `close()`
    const response = await this.#http.open("GET", path, { signal: abort.signal, timeoutMs: 2 ** 31 - 1 });
    if (response.status !== 200 || response.body === null) {
      const text = await response.text();
      throw replyError({ status: response.status, headers: response.headers, text, requestId: response.headers.get("x-request-id") ?? "" });
    }
    return EventStream.open(response.body, abort);
  }

  // -- task memory ----------------------------------------------------------------------------------------------

  /** Task memories for `query`: `answer` is the formatted text, `metadata.memory_list` the list. */
  retrieve_task_memory(query: string, fields: Omit<F.RetrieveTaskMemoryFields, "query"> = {}): Promise<FlowResult> {
    return this.call("retrieve_task_memory", { ...fields, query });
  }

  /** Task memories for `query`, merged into one text block. */
  retrieve_task_memory_simple(query: string, fields: Omit<F.RetrieveTaskMemoryFields, "query"> = {}): Promise<FlowResult> {
    return this.call("retrieve_task_memory_simple", { ...fields, query });
  }

  /** Distil scored trajectories into stored task memories (needs an LLM on the server). */
  summary_task_memory(trajectories: Trajectory[], fields: Partial<F.SummaryTaskMemoryFields> = {}): Promise<FlowResult> {
    return this.call("summary_task_memory", { ...fields, trajectories });
  }

  /** One LLM call per trajectory (at most two memories each); stored. */
  summary_task_memory_simple(trajectories: Trajectory[], fields: Partial<F.SummaryTaskMemoryFields> = {}): Promise<FlowResult> {
    return this.call("summary_task_memory_simple", { ...fields, trajectories });
  }

  /** Count a use of retrieved memories (freq + 1; utility + 1 when they helped). */
  record_task_memory(memory_dicts: JsonObject[], update_utility: boolean, fields: F.FlowFields = {}): Promise<FlowResult> {
    return this.call("record_task_memory", { ...fields, memory_dicts, update_utility });
  }

  /** Delete memories used at least `freq_threshold` times whose utility / freq is below `utility_threshold`. */
  delete_task_memory(freq_threshold: number, utility_threshold: number, fields: F.FlowFields = {}): Promise<FlowResult> {
    return this.call("delete_task_memory", { ...fields, freq_threshold, utility_threshold });
  }

  // -- personal memory --------------------------------------------------------------------------------------------

  /** Turn what a user said (`trajectories`, or `messages`) into stored personal memories. */
  summary_personal_memory(fields: F.SummaryPersonalMemoryFields): Promise<FlowResult> {
    return this.call("summary_personal_memory", fields);
  }

  /** Consolidate a user's unreflected observations into insights. */
  reflect_personal_memory(fields: F.ReflectPersonalMemoryFields = {}): Promise<FlowResult> {
    return this.call("reflect_personal_memory", fields);
  }

  /** Personal memories relevant to `query`, among the facts valid at `as_of` (default now). */
  retrieve_personal_memory(query: string, fields: Omit<F.RetrievePersonalMemoryFields, "query"> = {}): Promise<FlowResult> {
    return this.call("retrieve_personal_memory", { ...fields, query });
  }

  // -- tool memory ------------------------------------------------------------------------------------------------

  /** Record tool calls in their tools' memories. */
  add_tool_call_result(tool_call_results: ToolCallResult[], fields: F.FlowFields = {}): Promise<FlowResult> {
    return this.call("add_tool_call_result", { ...fields, tool_call_results });
  }

  /** Write usage guidelines for the named tools from their recorded calls. */
  summary_tool_memory(tool_names: string | string[], fields: Partial<F.ToolNamesFields> = {}): Promise<FlowResult> {
    return this.call("summary_tool_memory", { ...fields, tool_names });
  }

  /** The memories (guidelines and statistics) of the named tools. */
  retrieve_tool_memory(tool_names: string | string[], fields: Partial<F.ToolNamesFields> = {}): Promise<FlowResult> {
    return this.call("retrieve_tool_memory", { ...fields, tool_names });
  }

  /** Benchmark helper: run one of the mock search tools and answer its tool-call record. */
  use_mock_search(query: string, fields: F.UseMockSearchFields = {}): Promise<FlowResult> {
    return this.call("use_mock_search", { ...fields, query });
  }

  // -- working memory ---------------------------------------------------------------------------------------------

  /** Offload a long message list to files; the answer holds the shortened list. */
  summary_working_memory(messages: Message[], fields: Partial<F.WorkingMemoryFields> = {}): Promise<FlowResult> {
    return this.call("summary_working_memory", { ...fields, messages });
  }

  /** As `summary_working_memory`, but answers the files to write instead of writing them. */
  summary_working_memory_for_as(messages: Message[], fields: Partial<F.WorkingMemoryFields> = {}): Promise<FlowResult> {
    return this.call("summary_working_memory_for_as", { ...fields, messages });
  }

  /** Matching lines of an offloaded file. */
  grep_working_memory(file_path: string, pattern: string, fields: Partial<F.GrepWorkingMemoryFields> = {}): Promise<FlowResult> {
    return this.call("grep_working_memory", { ...fields, file_path, pattern });
  }

  /** Lines `offset` .. `offset + limit` of an offloaded file. */
  read_working_memory(file_path: string, fields: Partial<F.ReadWorkingMemoryFields> = {}): Promise<FlowResult> {
    return this.call("read_working_memory", { ...fields, file_path });
  }

  // -- agents (need an LLM on the server) --------------------------------------------------------------------------

  /** A ReAct agent over offloaded working memory. */
  agentic_retrieve(messages: Message[], fields: Partial<F.AgenticRetrieveFields> = {}): Promise<FlowResult> {
    return this.call("agentic_retrieve", { ...fields, messages });
  }

  /** A ReAct agent with a search tool: `query` and/or `messages`. */
  react(fields: F.FlowFields): Promise<FlowResult> {
    return this.call("react", fields);
  }

  // -- workspaces and libraries -------------------------------------------------------------------------------------

  /** Operate on a workspace: list, dump / load a library file, copy, delete, delete_ids, insert, history, reembed.
   * `load`, `dump` and `copy` get the client's `loadTimeoutMs`; for progress, `runJob("vector_store", ...)`. */
  vector_store(action: F.VectorStoreAction, fields: Omit<F.VectorStoreFields, "action"> = {}): Promise<FlowResult> {
    return this.call("vector_store", { ...fields, action });
  }

  #body(fields: F.FlowFields): Record<string, unknown> {
    const body = compact(fields);
    if (this.workspaceId && !body.workspace_id) body.workspace_id = this.workspaceId;
    return body;
  }

  #timeout(flow: string, body: Record<string, unknown>): number {
    const long = flow === "vector_store" && typeof body.action === "string" && LONG_ACTIONS.has(body.action);
    return long ? this.#http.loadTimeoutMs : this.#http.timeoutMs;
  }
}

function memoryPath(workspaceId: string, memoryId: string): string {
  return `/workspaces/${enc(workspaceId)}/memories/${enc(memoryId)}`;
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== "") search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : "";
}

function raise(error: Error): never {
  throw error;
}

/** Whether the job has ended: it will not change any more (`done`, `failed` or `cancelled`). */
export function isFinished(job: Job): boolean {
  return job.status === "done" || job.status === "failed" || job.status === "cancelled";
}
