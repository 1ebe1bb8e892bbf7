// The service's wire shapes, as its OpenAPI document (GET /openapi.json) declares them. Field names are the
// service's own (snake_case): they are what goes over the wire, and what the Python client and MCP tools use.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = Record<string, unknown>;

export type Role = "system" | "user" | "assistant" | "tool";

export interface ToolCall {
  id?: string;
  type?: string;
  function?: { name: string; arguments: string };
  [field: string]: unknown;
}

/** An OpenAI-style chat message. */
export interface Message {
  role?: Role;
  /** the text, or OpenAI content blocks (`{type: "text", text}`) */
  content?: string | JsonObject[] | null;
  reasoning_content?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
  /** `YYYY-MM-DD HH:MM:SS` */
  time_created?: string;
  metadata?: JsonObject;
  [field: string]: unknown;
}

/** One run of an agent, scored: what the summary flows learn from. */
export interface Trajectory {
  messages: Message[];
  /** 1.0 success, 0.0 failure, or in between (summary_task_memory learns from >= 1.0, the _simple flow >= 0.9) */
  score?: number;
  /** groups attempts at the same task */
  task_id?: string;
  /** `query` (the original task) and optional `segments` */
  metadata?: JsonObject & { query?: string };
}

/** One recorded tool invocation. */
export interface ToolCallResult {
  tool_name: string;
  input?: JsonObject | string;
  output?: string;
  success?: boolean;
  /** seconds */
  time_cost?: number;
  /** tokens; -1 lets the service estimate */
  token_cost?: number;
  create_time?: string;
  metadata?: JsonObject;
}

export type MemoryType = "task" | "personal" | "tool";

/** A ReMe memory dict. `when_to_use` is the text that is embedded and searched, `content` what an agent gets back;
 * personal memories add `target` and the validity fields, tool memories their tool's statistics. */
export interface Memory {
  workspace_id?: string;
  memory_id: string;
  memory_type: MemoryType | string;
  when_to_use: string;
  content: string;
  score?: number;
  /** `YYYY-MM-DD HH:MM:SS` (the server's local time) */
  time_created?: string;
  time_modified?: string;
  author?: string;
  metadata?: JsonObject;
  /** the search similarity, on retrieved memories only */
  relevance?: number;
  target?: string;
  valid_from?: string;
  valid_to?: string;
  recorded_at?: string;
  expires_at?: string;
  [field: string]: unknown;
}

/** A memory to create or insert: `memory_id` and the times are given by the server when absent. */
export type NewMemory = Partial<Memory> & { when_to_use: string; content: string };

/** The envelope of a successful flow. */
export interface FlowResult<M extends JsonObject = JsonObject> {
  /** the flow's main result: text, or JSON for some flows */
  answer: unknown;
  /** always true here (failures throw) */
  success: true;
  /** structured results: `memory_list`, `action_result`, `update_result`, ... */
  metadata: M & { memory_list?: Memory[] };
  /** the server's `x-request-id` */
  requestId: string;
}

// -- management API -------------------------------------------------------------------------------------

export interface EmbeddingSpace {
  provider?: string;
  model?: string;
  dimensions?: number;
  [field: string]: unknown;
}

export interface WorkspaceSummary {
  workspace_id: string;
  /** how many memories it holds */
  size: number;
  /** memories by memory_type */
  counts: Record<string, number>;
  /** the latest time_modified of its memories (null when empty) */
  last_modified: string | null;
  embedding_space?: EmbeddingSpace | null;
  /** its vectors come from another embedder than the service's: run `vector_store("reembed")` */
  needs_reembed?: boolean;
}

export interface WorkspacePage {
  workspaces: WorkspaceSummary[];
  /** pass as `cursor` for the next page; null at the end */
  next_cursor: string | null;
}

export type MemorySort = "memory_id" | "-memory_id" | "time_created" | "-time_created" | "time_modified" | "-time_modified";

export interface ListMemoriesOptions {
  /** 1-500 (default 50) */
  limit?: number;
  /** the `next_cursor` of the previous page (with the same filters and sort) */
  cursor?: string;
  /** default `memory_id`; a leading `-` for descending */
  sort?: MemorySort;
  memory_type?: MemoryType;
  /** text in when_to_use or content */
  q?: string;
  /** time_modified bounds (inclusive): `YYYY-MM-DD[ HH:MM:SS]` */
  since?: string;
  until?: string;
}

export interface MemoryPage {
  memories: Memory[];
  next_cursor: string | null;
  /** how many memories match the filters, over all pages */
  total: number;
}

export interface MemoryDeleted {
  deleted: true;
  memory_id: string;
}

export type HistoryEvent = "ADD" | "UPDATE" | "DELETE" | "INVALIDATE";

export interface HistoryEntry {
  event: HistoryEvent;
  memory_id: string;
  /** ISO 8601, UTC */
  time?: string;
  request_id?: string;
  /** the API key's id; null for a trusted caller */
  key_id?: string | null;
  /** the flow, or `manage` for the management API */
  flow?: string;
  /** changed fields before (UPDATE, INVALIDATE) */
  before?: JsonObject | null;
  /** changed fields after; every field for an ADD */
  after?: JsonObject | null;
}

export interface ImportResult {
  /** how many memories the workspace now holds */
  size: number;
}

// -- jobs -----------------------------------------------------------------------------------------------

export type JobStatus = "queued" | "running" | "done" | "failed" | "cancelled";

/** How far a running job is, when its flow reports it (e.g. `vector_store` load: rows done of total). */
/** How far a running job is: rows embedded of those read, while a `vector_store` `load` runs as a job. */
export interface JobProgress {
  done: number;
  total: number | null;
  unit: "rows";
}

/** What `GET /jobs/{job_id}` answers. */
export interface Job {
  job_id: string;
  status: JobStatus;
  flow: string;
  workspace_id: string;
  attempts: number;
  /** the status the synchronous call would have answered, once finished */
  http_status: number | null;
  /** the envelope the synchronous call would have answered, once finished */
  result: { answer?: unknown; success?: boolean; metadata?: JsonObject } | null;
  timings: {
    queued_at: string;
    started_at?: string;
    finished_at?: string;
    queue_seconds?: number;
    run_seconds?: number;
  };
  /** why the job was cancelled (its key revoked, its workspace deleted), or its request and result erased */
  reason?: string | null;
  /** progress of a running job, for a flow that reports it (null otherwise; absent from older servers) */
  progress?: JobProgress | null;
}

/** The 202 answer to a request with `"async": true`. */
export interface JobAccepted {
  job_id: string;
  status: JobStatus;
  /** true when an Idempotency-Key named a job submitted before (then the answer was 200) */
  idempotent_replay: boolean;
  requestId: string;
}

// -- events ---------------------------------------------------------------------------------------------

export type ChangeEventType = "ADD" | "UPDATE" | "DELETE" | "INVALIDATE" | "JOB";

/** One change, as `GET /events` streams it. */
export interface ChangeEvent {
  event_id: string;
  type: ChangeEventType;
  workspace_id: string;
  /** the memories it concerns, in order */
  memory_ids: string[];
  /** ISO 8601 */
  time: string;
  request_id: string;
  flow: string;
  /** JOB events: job_id, status, http_status */
  job: { job_id: string; status: JobStatus; http_status?: number | null; [field: string]: unknown } | null;
}

/** The stream lost `lost` events because the reader was too slow. */
export interface LaggedEvent {
  type: "lagged";
  lost: number;
}

export type StreamItem = ChangeEvent | LaggedEvent;

export interface Health {
  status: string;
  flows: string[];
  [field: string]: unknown;
}
