// The mapping of error envelopes to typed errors, and connection failures: no service needed.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";

import {
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  LLMError,
  NotFoundError,
  PathNotAllowedError,
  PayloadTooLargeError,
  ProviderError,
  RateLimitedError,
  ReMeClient,
  ReMeError,
  RequestValidationError,
  ServiceConnectionError,
  StoreError,
  UnauthorizedError,
  errorFromResponse,
} from "reme-service-client";

const envelope = (code: string, message = "m") =>
  JSON.stringify({ answer: "", success: false, metadata: { error: { code, message, details: { a: 1 }, request_id: "r1" } } });

test("an envelope's code chooses the class; status, details and request id are kept", () => {
  const cases: [number, string, typeof ReMeError][] = [
    [400, "invalid_request", InvalidRequestError],
    [401, "unauthorized", UnauthorizedError],
    [403, "forbidden", ForbiddenError],
    [403, "path_not_allowed", PathNotAllowedError],
    [404, "not_found", NotFoundError],
    [409, "conflict", ConflictError],
    [413, "payload_too_large", PayloadTooLargeError],
    [429, "rate_limited", RateLimitedError],
    [503, "store_unavailable", StoreError],
  ];
  for (const [status, code, Type] of cases) {
    const error = errorFromResponse(status, envelope(code), "header-id", 7);
    assert.equal(error.constructor, Type, code);
    assert.equal(error.status, status);
    assert.equal(error.code, code);
    assert.deepEqual(error.details, { a: 1 });
    assert.equal(error.requestId, "r1");
    assert.equal(error.retryAfter, 7);
  }
  assert.ok(errorFromResponse(403, envelope("path_not_allowed")) instanceof ForbiddenError);
});

test("an unknown code falls back to the status's class; a body not in the envelope keeps status and text", () => {
  assert.equal(errorFromResponse(409, envelope("brand_new_code")).constructor, ConflictError);
  const proxy = errorFromResponse(502, "<html>Bad Gateway</html>", "x");
  assert.equal(proxy.code, "http_error");
  assert.match(proxy.message, /HTTP 502: <html>Bad Gateway/);
  const validation = errorFromResponse(422, JSON.stringify({ detail: [{ loc: ["body", "query"], msg: "Field required" }] }));
  assert.ok(validation instanceof RequestValidationError && validation instanceof InvalidRequestError);
  assert.equal(validation.message, "request validation failed: query: Field required");
});

test("a refused connection is retried, then a ServiceConnectionError", async () => {
  const port = await new Promise<number>((done) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => done(typeof address === "object" && address ? address.port : 0));
    });
  });
  const reme = new ReMeClient(`http://127.0.0.1:${port}`, { retries: 2, backoffMs: 1, apiKey: "" });
  await assert.rejects(reme.health(), (err: unknown) => {
    assert.ok(err instanceof ServiceConnectionError);
    assert.equal(err.details.attempts, 3);
    return true;
  });
});

test("a provider failure in the envelope is an LLMError; a reply not in the envelope keeps its status", async () => {
  const envelope = { answer: "", success: false, metadata: { error: { code: "llm_error", message: "model crashed", request_id: "r1" } } };
  const llmDown = new ReMeClient("http://svc", { apiKey: "", fetch: async () => new Response(JSON.stringify(envelope), { status: 502 }) });
  await assert.rejects(llmDown.summary_task_memory([]), (err: unknown) => {
    assert.ok(err instanceof LLMError && err instanceof ProviderError);
    assert.equal(err.status, 502);
    assert.equal(err.message, "model crashed");
    assert.equal(err.requestId, "r1");
    return true;
  });
  const proxy = new ReMeClient("http://svc", { apiKey: "", fetch: async () => new Response("Service Unavailable", { status: 503 }) });
  await assert.rejects(proxy.retrieve_task_memory("x"), (err: unknown) => {
    assert.ok(err instanceof ReMeError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "http_error");
    return true;
  });
});

test("a 200 whose envelope says success: false is an error, never a result", async () => {
  const failed = { answer: "", success: false, metadata: { error: { code: "store_unavailable", message: "down" } } };
  const reme = new ReMeClient("http://svc", { apiKey: "", fetch: async () => new Response(JSON.stringify(failed), { status: 200 }) });
  await assert.rejects(reme.vector_store("list"), StoreError);
});

test("apiKey is sent as a Bearer token", async () => {
  const seen: (string | null)[] = [];
  const fetch = async (_url: string | URL | Request, init?: RequestInit) => {
    seen.push(new Headers(init?.headers).get("authorization"));
    return new Response(JSON.stringify({ status: "ok", flows: [] }), { status: 200 });
  };
  await new ReMeClient("http://svc", { apiKey: "k1", fetch }).health();
  await new ReMeClient("http://svc", { apiKey: "", fetch }).health();
  assert.deepEqual(seen, ["Bearer k1", null]);
});
