// Typed errors: one class per error code of the service (reme_service/errors.py), chosen from the error envelope
// `{"answer": "", "success": false, "metadata": {"error": {"code", "message", "details", "request_id"}}}`.

/** What every error carries besides its message. */
export interface ErrorInfo {
  code?: string;
  status?: number;
  details?: Record<string, unknown>;
  requestId?: string;
  /** seconds the server asked to wait (`Retry-After` of a 429 or 503), when it said so */
  retryAfter?: number;
  cause?: unknown;
}

/** Any failure the service reported (or a failure to reach it: `ServiceConnectionError`). */
export class ReMeError extends Error {
  /** the service's error code (`invalid_request`, `not_found`, ...), or `http_error` for a reply not in its envelope */
  readonly code: string;
  /** the HTTP status of the reply */
  readonly status: number;
  readonly details: Record<string, unknown>;
  /** the server's `x-request-id` of the failed request: quote it when reading the service's log */
  readonly requestId: string;
  readonly retryAfter: number | undefined;

  constructor(message: string, info: ErrorInfo = {}) {
    super(message, info.cause === undefined ? undefined : { cause: info.cause });
    this.name = new.target.name;
    this.code = info.code ?? "internal_error";
    this.status = info.status ?? 500;
    this.details = info.details ?? {};
    this.requestId = info.requestId ?? "";
    this.retryAfter = info.retryAfter;
  }
}

/** 400: an invalid value or a malformed body. */
export class InvalidRequestError extends ReMeError {}
/** 422: the body does not match the flow's request schema; the message has one line per bad field. */
export class RequestValidationError extends InvalidRequestError {}
/** 401: no API key where one is required, or an unknown or revoked key. */
export class UnauthorizedError extends ReMeError {}
/** 403: the key does not cover the workspace or the action. */
export class ForbiddenError extends ReMeError {}
/** 403: a file path outside the service's allowed roots. */
export class PathNotAllowedError extends ForbiddenError {}
/** 404: no such workspace, memory, job or flow. */
export class NotFoundError extends ReMeError {}
/** 405: the path does not take this method. */
export class MethodNotAllowedError extends ReMeError {}
/** 408: the request body stalled. */
export class RequestTimeoutError extends ReMeError {}
/** 409: a conflict (an existing memory_id, an Idempotency-Key reused with another body, another embedding space). */
export class ConflictError extends ReMeError {}
/** 413: the body is larger than the server's limit. */
export class PayloadTooLargeError extends ReMeError {}
/** 429: the API key's rate limit; `retryAfter` says how long to wait. */
export class RateLimitedError extends ReMeError {}
/** 431: the request headers are too large. */
export class HeaderTooLargeError extends ReMeError {}
/** 502: the LLM or embedding provider failed. */
export class ProviderError extends ReMeError {}
export class LLMError extends ProviderError {}
export class EmbeddingError extends ProviderError {}
/** 503: the vector store is unavailable. */
export class StoreError extends ReMeError {}
/** 400: the vectors of a workspace have other dimensions than the embedder's (a `StoreError`, as in Python). */
export class DimensionMismatchError extends StoreError {}
/** 503: the server refused the request before running it (too busy); `retryAfter` says when to come back. */
export class OverloadedError extends ReMeError {}
/** The service could not be reached (nothing was sent), after the configured retries. */
export class ServiceConnectionError extends ReMeError {}
/** The client gave up waiting (its `timeoutMs`, or a job that did not finish in time). */
export class ClientTimeoutError extends ReMeError {}

/** The service's error codes and their classes. */
export const ERROR_TYPES: Readonly<Record<string, typeof ReMeError>> = {
  internal_error: ReMeError,
  config_error: ReMeError,
  invalid_request: InvalidRequestError,
  validation_error: RequestValidationError,
  dimension_mismatch: DimensionMismatchError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  cross_origin: ForbiddenError,
  path_not_allowed: PathNotAllowedError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  request_timeout: RequestTimeoutError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  rate_limited: RateLimitedError,
  header_too_large: HeaderTooLargeError,
  provider_error: ProviderError,
  llm_error: LLMError,
  embedding_error: EmbeddingError,
  store_unavailable: StoreError,
  overloaded: OverloadedError,
  connection_error: ServiceConnectionError,
};

/** The class of a status whose body names no known code (an older server, a new code). */
const BY_STATUS: Readonly<Record<number, typeof ReMeError>> = {
  400: InvalidRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  405: MethodNotAllowedError,
  408: RequestTimeoutError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: RequestValidationError,
  429: RateLimitedError,
  431: HeaderTooLargeError,
  502: ProviderError,
  503: StoreError,
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function validationMessage(detail: unknown[]): string {
  const lines = detail.map((item) => {
    if (!isRecord(item)) return JSON.stringify(item);
    const loc = Array.isArray(item.loc) ? item.loc.filter((part) => part !== "body").join(".") : "";
    return `${loc || "(body)"}: ${typeof item.msg === "string" ? item.msg : JSON.stringify(item)}`;
  });
  return `request validation failed: ${lines.join("; ")}`;
}

/**
 * The typed error of a failed reply: any non-2xx, or a 2xx whose envelope says `success: false`.
 * `text` is the reply's body; a body in the service's envelope decides the class by its `code` (by the status when
 * the code is unknown), FastAPI's 422 `detail` list becomes a `RequestValidationError`, anything else (a proxy's
 * page) a `ReMeError` with code `http_error` and the start of the text.
 */
export function errorFromResponse(status: number, text: string, requestId = "", retryAfter?: number): ReMeError {
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: reported as text below
  }
  if (isRecord(body) && Array.isArray(body.detail)) {
    return new RequestValidationError(validationMessage(body.detail), {
      code: "validation_error",
      status,
      details: { errors: body.detail },
      requestId,
    });
  }
  const error = isRecord(body) && isRecord(body.metadata) ? body.metadata.error : undefined;
  if (isRecord(error)) {
    const code = typeof error.code === "string" ? error.code : "internal_error";
    const Type = ERROR_TYPES[code] ?? BY_STATUS[status] ?? ReMeError;
    return new Type(typeof error.message === "string" ? error.message : "", {
      code,
      status,
      details: isRecord(error.details) ? error.details : {},
      requestId: typeof error.request_id === "string" && error.request_id ? error.request_id : requestId,
      ...(retryAfter === undefined ? {} : { retryAfter }),
    });
  }
  const shown = text.trim().slice(0, 500);
  return new (BY_STATUS[status] ?? ReMeError)(`HTTP ${status}: ${shown}`, { code: "http_error", status, requestId });
}
