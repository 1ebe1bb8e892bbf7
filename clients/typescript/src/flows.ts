// The request fields of each flow (the `<Flow>Request` schemas of GET /openapi.json). Every flow takes the common
// fields; a field left `undefined` or `null` is not sent, so the server's default applies.

import type { JsonObject, Message, NewMemory, ToolCallResult, Trajectory } from "./types.js";

/** Fields every flow accepts (and any other field, sent as given). */
export interface FlowFields {
  /** default: the client's `workspaceId` */
  workspace_id?: string;
  query?: string | null;
  messages?: Message[] | null;
  metadata?: JsonObject;
  [field: string]: unknown;
}

/** Fields of the flows that may run as a background job. */
export interface BackgroundFields extends FlowFields {
  /** answer 202 at once with a job id instead of waiting (use `submit`, which sets it) */
  async?: boolean;
}

export type Language = "" | "en" | "zh";
export type WorkingSummaryMode = "compact" | "compress" | "auto";
export type VectorStoreAction =
  | "list"
  | "dump"
  | "load"
  | "copy"
  | "delete"
  | "delete_ids"
  | "insert"
  | "history"
  | "reembed";

export interface RetrieveTaskMemoryFields extends FlowFields {
  /** 1-50 */
  top_k?: number | null;
  /** exact scan instead of the approximate index */
  exact?: boolean | null;
}

export interface SummaryTaskMemoryFields extends BackgroundFields {
  trajectories: Trajectory[];
}

export interface RecordTaskMemoryFields extends FlowFields {
  /** the memory_list a retrieval returned */
  memory_dicts: JsonObject[];
  update_utility: boolean;
}

export interface DeleteTaskMemoryFields extends FlowFields {
  freq_threshold: number;
  utility_threshold: number;
}

export interface SummaryPersonalMemoryFields extends BackgroundFields {
  trajectories?: Trajectory[] | null;
  user_name?: string | null;
  /** seconds until the new memories expire */
  ttl?: number | null;
  language?: Language | null;
}

export interface ReflectPersonalMemoryFields extends BackgroundFields {
  user_name?: string | null;
  language?: Language | null;
}

export interface RetrievePersonalMemoryFields extends FlowFields {
  top_k?: number | null;
  exact?: boolean | null;
  user_name?: string | null;
  query_time?: string | null;
  /** the facts valid at this time (default now) */
  as_of?: string | null;
  include_invalid?: boolean | null;
  language?: Language | null;
}

export interface AddToolCallResultFields extends FlowFields {
  tool_call_results: ToolCallResult[];
}

export interface ToolNamesFields extends BackgroundFields {
  /** one name, comma-separated names, or a list */
  tool_names: string | string[];
}

export interface UseMockSearchFields extends FlowFields {
  seed?: number | null;
}

export interface AgenticRetrieveFields extends FlowFields {
  messages: Message[];
  working_summary_mode?: WorkingSummaryMode | null;
  compact_ratio_threshold?: number | null;
  max_total_tokens?: number | null;
  max_tool_message_tokens?: number | null;
  group_token_threshold?: number | null;
  keep_recent_count?: number | null;
  store_dir?: string | null;
  chat_id?: string | null;
  preview_char_length?: number | null;
}

export interface WorkingMemoryFields extends AgenticRetrieveFields {
  /** answer 202 at once with a job id instead of waiting */
  async?: boolean;
}

export interface GrepWorkingMemoryFields extends FlowFields {
  file_path: string;
  pattern: string;
  /** 1-10000 */
  limit?: number | null;
  literal?: boolean | null;
  case_sensitive?: boolean | null;
}

export interface ReadWorkingMemoryFields extends FlowFields {
  file_path: string;
  offset?: number | null;
  limit?: number | null;
}

export interface VectorStoreFields extends BackgroundFields {
  action: VectorStoreAction;
  /** a library file or folder (load, dump), within the server's allowed roots */
  path?: string | null;
  src_workspace_id?: string | null;
  memory_ids?: string[] | null;
  memory_dicts?: (NewMemory | JsonObject)[] | null;
  limit?: number | null;
  offset?: number | null;
  /** history: the memory whose history to answer */
  memory_id?: string | null;
}

/** The flows of the default configuration and their request fields. */
export interface FlowRequests {
  retrieve_task_memory: RetrieveTaskMemoryFields;
  retrieve_task_memory_simple: RetrieveTaskMemoryFields;
  summary_task_memory: SummaryTaskMemoryFields;
  summary_task_memory_simple: SummaryTaskMemoryFields;
  record_task_memory: RecordTaskMemoryFields;
  delete_task_memory: DeleteTaskMemoryFields;
  summary_personal_memory: SummaryPersonalMemoryFields;
  reflect_personal_memory: ReflectPersonalMemoryFields;
  retrieve_personal_memory: RetrievePersonalMemoryFields;
  add_tool_call_result: AddToolCallResultFields;
  summary_tool_memory: ToolNamesFields;
  retrieve_tool_memory: ToolNamesFields;
  use_mock_search: UseMockSearchFields;
  summary_working_memory: WorkingMemoryFields;
  summary_working_memory_for_as: WorkingMemoryFields;
  grep_working_memory: GrepWorkingMemoryFields;
  read_working_memory: ReadWorkingMemoryFields;
  agentic_retrieve: AgenticRetrieveFields;
  react: FlowFields;
  vector_store: VectorStoreFields;
}

export type FlowName = keyof FlowRequests;

/** The flows that take `"async": true` (their request has the `async` field). */
export type BackgroundFlow =
  | "summary_task_memory"
  | "summary_task_memory_simple"
  | "summary_personal_memory"
  | "reflect_personal_memory"
  | "summary_tool_memory"
  | "summary_working_memory"
  | "summary_working_memory_for_as"
  | "vector_store";
