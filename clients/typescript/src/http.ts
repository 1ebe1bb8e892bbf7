// The HTTP transport: fetch with the client's headers, per-request timeouts, retries of connection failures (nothing
// was sent, so any request may be resent) and of `overloaded` / `rate_limited` refusals (the server did not run the
// request) after the `Retry-After` the server gave.

import { ClientTimeoutError, ServiceConnectionError, errorFromResponse } from "./errors.js";

/** Options of a `ReMeClient`. */
export interface ClientOptions {
  /** used when a call names no `workspace_id` */
  workspaceId?: string;
  /** sent as `Authorization: Bearer <key>`; default: the `REME_API_KEY` environment variable */
  apiKey?: string;
  /** per request, in milliseconds (default 120000) */
  timeoutMs?: number;
  /** for the `vector_store` actions load, dump and copy, which may take minutes (default 1800000) */
  loadTimeoutMs?: number;
  /** extra attempts after a connection failure or an overloaded / rate-limited refusal (default 3) */
  retries?: number;
  /** first wait between connection attempts, doubled each time (default 200) */
  backoffMs?: number;
  /** the longest `Retry-After` (seconds) waited out before giving up (default 30) */
  maxRetryAfterS?: number;
  /** headers of every request */
  headers?: Record<string, string>;
  /** a fetch implementation (default: the global one) */
  fetch?: typeof fetch;
}

export interface SendOptions {
  body?: unknown;
  /** a raw body (import): sent as is with this content type */
  raw?: { data: string | Uint8Array; contentType: string };
  timeoutMs?: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

/** Errors fetch raises before the request is sent: safe to retry, even for flows that write. */
const CONNECT_ERRORS = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function isConnectError(err: unknown): boolean {
  let cause = (err as { cause?: unknown } | null)?.cause as { code?: string; errors?: unknown[]; cause?: unknown } | undefined;
  while (cause) {
    if (cause.code !== undefined && CONNECT_ERRORS.has(cause.code)) return true;
    // AggregateError from happy eyeballs (IPv4 and IPv6 both refused)
    if (Array.isArray(cause.errors) && cause.errors.some((e) => CONNECT_ERRORS.has((e as { code?: string })?.code ?? ""))) {
      return true;
    }
    cause = cause.cause as typeof cause;
  }
  return false;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function envValue(name: string): string | undefined {
  return typeof process !== "undefined" ? process.env[name] : undefined;
}

/** A reply read whole: status, headers and text. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  requestId: string;
}

export class Transport {
  readonly baseUrl: string;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  readonly loadTimeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly maxRetryAfterS: number;
  readonly #fetch: typeof fetch;

  constructor(baseUrl: string | undefined, options: ClientOptions) {
    this.baseUrl = (baseUrl ?? envValue("REME_BASE_URL") ?? "http://127.0.0.1:8002").replace(/\/+$/, "");
    const apiKey = options.apiKey ?? envValue("REME_API_KEY") ?? "";
    this.headers = { ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}), ...(options.headers ?? {}) };
    this.timeoutMs = options.timeoutMs ?? 120_000;
    this.loadTimeoutMs = options.loadTimeoutMs ?? 1_800_000;
    this.retries = options.retries ?? 3;
    this.backoffMs = options.backoffMs ?? 200;
    this.maxRetryAfterS = options.maxRetryAfterS ?? 30;
    if (this.retries < 0) throw new RangeError("retries must be >= 0");
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** The response of one request (its body unread), after the retries this transport makes. */
  async open(method: string, path: string, options: SendOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.headers, ...(options.headers ?? {}) };
    let body: string | Uint8Array | undefined;
    if (options.raw !== undefined) {
      body = options.raw.data;
      headers["content-type"] = options.raw.contentType;
    } else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["content-type"] = "application/json";
    }
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt += 1) {
      const timeout = AbortSignal.timeout(timeoutMs);
      const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
      let response: Response;
      try {
        response = await this.#fetch(`${this.baseUrl}${path}`, { method, headers, body: body ?? null, signal });
      } catch (err) {
        if (timeout.aborted && !options.signal?.aborted) {
          throw new ClientTimeoutError(`no answer from ${this.baseUrl}${path} within ${timeoutMs} ms`, {
            code: "client_timeout",
            status: 0,
            cause: err,
          });
        }
        if (!isConnectError(err)) throw err;
        if (attempt >= this.retries) {
          throw new ServiceConnectionError(
            `cannot reach the memory service at ${this.baseUrl} after ${attempt + 1} attempt(s)`,
            { code: "connection_error", status: 503, details: { attempts: attempt + 1, base_url: this.baseUrl }, cause: err },
          );
        }
        await sleep(this.backoffMs * 2 ** attempt);
        continue;
      }
      const wait = await this.#refusalWait(response, attempt);
      if (wait === undefined) return response;
      await sleep(wait * 1000);
    }
  }

  /** One request, its reply read whole. */
  async send(method: string, path: string, options: SendOptions = {}): Promise<Reply> {
    const response = await this.open(method, path, options);
    const text = await response.text();
    return { status: response.status, headers: response.headers, text, requestId: response.headers.get("x-request-id") ?? "" };
  }

  /** The JSON of a reply with one of the `ok` statuses; else the service's typed error. */
  async json<T>(method: string, path: string, options: SendOptions = {}, ok: readonly number[] = [200]): Promise<T> {
    const reply = await this.send(method, path, options);
    if (!ok.includes(reply.status)) throw replyError(reply);
    try {
      return JSON.parse(reply.text) as T;
    } catch {
      throw replyError(reply);
    }
  }

  /** Seconds to wait before sending again when the server refused without running the request (503 `overloaded`,
   * 429 `rate_limited`) and retries are left and its `Retry-After` is short enough; else undefined (the reply
   * stands). The refusal's body is read only then. */
  async #refusalWait(response: Response, attempt: number): Promise<number | undefined> {
    if ((response.status !== 429 && response.status !== 503) || attempt >= this.retries) return undefined;
    let code: unknown;
    try {
      code = ((await response.clone().json()) as { metadata?: { error?: { code?: unknown } } }).metadata?.error?.code;
    } catch {
      return undefined;
    }
    if (code !== "overloaded" && code !== "rate_limited") return undefined;
    const header = Number(response.headers.get("retry-after") ?? "");
    const wait = Number.isFinite(header) && response.headers.has("retry-after") ? header : (this.backoffMs * 2 ** attempt) / 1000;
    if (wait < 0 || wait > this.maxRetryAfterS) return undefined;
    await response.body?.cancel();
    return wait;
  }
}

/** The typed error of a reply. */
export function replyError(reply: Reply): Error {
  const header = reply.headers.get("retry-after");
  const retryAfter = header === null || !Number.isFinite(Number(header)) ? undefined : Number(header);
  return errorFromResponse(reply.status, reply.text, reply.requestId, retryAfter);
}
