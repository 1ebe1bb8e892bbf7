// node --test cookbook/node/   (against the server at $REME_BASE_URL; skipped when it is unset)
//
// Start a server first, e.g. `.venv/bin/reme embedding_model.default.backend=hash` and
// `REME_BASE_URL=http://127.0.0.1:8002 node --test cookbook/node/`.

import assert from "node:assert/strict";
import { createServer } from "node:net";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { runEpisode } from "./agent_loop.mjs";
import {
  InvalidRequestError,
  LLMError,
  NotFoundError,
  PathNotAllowedError,
  ProviderError,
  ReMeClient,
  ReMeError,
  RequestValidationError,
  ServiceConnectionError,
} from "./reme_client.mjs";

const BASE = process.env.REME_BASE_URL;
const skip = BASE ? false : "REME_BASE_URL is not set: start a server and point REME_BASE_URL at it";
const workspace = (/** @type {string} */ name) => `node_${name}_${randomUUID().slice(0, 8)}`;

const MEMORIES = [
  { when_to_use: "book a flight ticket", content: "compare prices before booking", score: 0.9 },
  { when_to_use: "send an email to a contact", content: "look the contact up first", score: 0.5 },
];

test("store and retrieve task memories", { skip }, async () => {
  const reme = new ReMeClient(BASE, { workspaceId: workspace("rt") });
  const stored = await reme.vector_store("insert", { memory_dicts: MEMORIES });
  assert.equal(stored.success, true);
  assert.equal(stored.metadata.action_result.memory_ids.length, 2);
  assert.ok(stored.requestId);

  const hits = await reme.retrieve_task_memory("I need to book a flight", { top_k: 1 });
  assert.deepEqual(hits.metadata.memory_list.map((/** @type {any} */ m) => m.when_to_use), ["book a flight ticket"]);
  assert.match(hits.answer, /compare prices before booking/);
  assert.equal(hits.metadata.memory_list[0].score, 0.9); // the stored score; similarity is `relevance`
  assert.ok(hits.metadata.memory_list[0].relevance > 0);

  const elsewhere = await reme.retrieve_task_memory("flight", { workspace_id: workspace("empty") });
  assert.deepEqual(elsewhere.metadata.memory_list, []);
});

test("connect() gives a method for every flow the server offers", { skip }, async () => {
  const reme = /** @type {any} */ (await ReMeClient.connect(BASE));
  const flows = await reme.flows();
  assert.ok(flows.includes("retrieve_task_memory"));
  for (const flow of flows) assert.equal(typeof reme[flow], "function", flow);
});

test("a bad value is an InvalidRequestError with the service's message", { skip }, async () => {
  const reme = new ReMeClient(BASE, { workspaceId: workspace("err") });
  await assert.rejects(reme.vector_store(/** @type {any} */ ("explode")), (/** @type {any} */ err) => {
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.status, 400);
    assert.equal(err.code, "invalid_request");
    assert.match(err.message, /explode/);
    assert.ok(err.requestId);
    return true;
  });
  await assert.rejects(reme.retrieve_task_memory("x", { workspace_id: "../etc" }), /workspace/);
});

test("a schema error is a RequestValidationError naming the field", { skip }, async () => {
  const reme = new ReMeClient(BASE);
  await assert.rejects(reme.retrieve_task_memory("flight", { top_k: /** @type {any} */ ("many") }), (/** @type {any} */ err) => {
    assert.ok(err instanceof RequestValidationError);
    assert.ok(err instanceof InvalidRequestError);
    assert.equal(err.status, 422);
    assert.match(err.message, /top_k/);
    assert.deepEqual(err.details.errors[0].loc, ["body", "top_k"]);
    return true;
  });
});

test("an unknown flow is a NotFoundError; a path outside the roots a PathNotAllowedError", { skip }, async () => {
  const reme = new ReMeClient(BASE, { workspaceId: workspace("nf") });
  await assert.rejects(reme.call("no_such_flow", { query: "x" }), (/** @type {any} */ err) => {
    assert.ok(err instanceof NotFoundError);
    assert.equal(err.status, 404);
    assert.match(err.message, /no_such_flow/);
    return true;
  });
  await assert.rejects(reme.vector_store("dump", { path: "/" }), (/** @type {any} */ err) => {
    assert.ok(err instanceof PathNotAllowedError);
    assert.equal(err.status, 403);
    return true;
  });
});

test("a body that is not the envelope keeps its status and text", async () => {
  const fakeFetch = /** @type {typeof fetch} */ (async () => new Response("Service Unavailable", { status: 503 }));
  const reme = new ReMeClient("http://svc", { fetch: fakeFetch });
  await assert.rejects(reme.call("retrieve_task_memory", { query: "x" }), (/** @type {any} */ err) => {
    assert.ok(err instanceof ReMeError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "http_error");
    assert.match(err.message, /Service Unavailable/);
    return true;
  });
});

test("a provider failure in the envelope is an LLMError with the service's message", async () => {
  const envelope = {
    answer: "",
    success: false,
    metadata: { error: { code: "llm_error", message: "flow 'x', op 'y': model crashed", request_id: "r1" } },
  };
  const fakeFetch = /** @type {typeof fetch} */ (async () => new Response(JSON.stringify(envelope), { status: 502 }));
  const reme = new ReMeClient("http://svc", { fetch: fakeFetch });
  await assert.rejects(reme.summary_task_memory([]), (/** @type {any} */ err) => {
    assert.ok(err instanceof LLMError);
    assert.ok(err instanceof ProviderError);
    assert.equal(err.status, 502);
    assert.equal(err.message, "flow 'x', op 'y': model crashed");
    assert.equal(err.requestId, "r1");
    return true;
  });
});

test("connection refused is retried, then a ServiceConnectionError", async () => {
  const port = await new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());
      server.close(() => resolve(port));
    });
  });
  const reme = new ReMeClient(`http://127.0.0.1:${port}`, { retries: 2, backoffMs: 20 });
  const started = Date.now();
  await assert.rejects(reme.retrieve_task_memory("x"), (/** @type {any} */ err) => {
    assert.ok(err instanceof ServiceConnectionError);
    assert.equal(err.details.attempts, 3);
    return true;
  });
  assert.ok(Date.now() - started >= 20 + 40);
});

test("the example agent loop learns from its first episode", { skip }, async () => {
  const reme = new ReMeClient(BASE, { workspaceId: workspace("agent") });
  const task = "Find the three cheapest flights from Paris to Oslo next Friday";
  const first = await runEpisode({ reme, task });
  assert.equal(first.retrieved.length, 0);
  assert.ok(first.learned.length >= 1, "the first run was summarised into task memory");

  const second = await runEpisode({ reme, task });
  assert.ok(second.retrieved.length >= 1, "the second run retrieved what the first learned");
  assert.match(second.answer, /Following experience/);

  const listed = await reme.vector_store("list");
  const used = listed.metadata.action_result.find((/** @type {any} */ m) => m.memory_id === second.retrieved[0].memory_id);
  assert.ok(used, "the used memory is still stored");
  assert.equal(used.metadata.freq, 1, "record_task_memory counted the use");
  assert.equal(used.metadata.utility, 1, "and that it helped");
});
