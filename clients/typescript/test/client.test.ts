// The client against a live service (see service.ts): flows, the management API, jobs, events, typed errors.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import {
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  PathNotAllowedError,
  PayloadTooLargeError,
  ReMeClient,
  RequestValidationError,
  UnauthorizedError,
  type ChangeEvent,
  type Job,
  type StreamItem,
} from "reme-service-client";

import { type Service, startService } from "./service.js";

let service: Service;
let reme: ReMeClient;
const ws = (name: string): string => `ts_${name}_${randomUUID().slice(0, 8)}`;

before(async () => {
  service = await startService();
  reme = new ReMeClient(service.baseUrl, { apiKey: service.apiKey });
});
after(async () => {
  await service?.stop();
});

describe("flows", () => {
  test("health lists the flows of configs/", async () => {
    const flows = await reme.flows();
    for (const flow of ["retrieve_task_memory", "summary_personal_memory", "vector_store", "add_tool_call_result"]) {
      assert.ok(flows.includes(flow), flow);
    }
  });

  test("memories inserted by vector_store come back from retrieve_task_memory", async () => {
    const client = new ReMeClient(service.baseUrl, { apiKey: service.apiKey, workspaceId: ws("flows") });
    const inserted = await client.vector_store("insert", {
      memory_dicts: [
        { when_to_use: "the API answers 20 items per page", content: "follow next_cursor until it is null" },
        { when_to_use: "a flaky network", content: "retry with backoff" },
      ],
    });
    assert.equal(inserted.success, true);
    const hits = await client.retrieve_task_memory("the API answers 20 items per page", { top_k: 1 });
    assert.equal(hits.metadata.memory_list?.length, 1);
    assert.equal(hits.metadata.memory_list?.[0]?.content, "follow next_cursor until it is null");
    assert.match(String(hits.answer), /next_cursor/);
    assert.ok(hits.requestId);
  });

  test("tool calls recorded by add_tool_call_result are in retrieve_tool_memory", async () => {
    const workspace_id = ws("tools");
    await reme.add_tool_call_result(
      [{ tool_name: "web_search", input: { q: "x" }, output: "3 results", success: true, time_cost: 0.4 }],
      { workspace_id },
    );
    const memory = await reme.retrieve_tool_memory("web_search", { workspace_id });
    assert.equal(memory.metadata.memory_list?.[0]?.when_to_use, "web_search");
  });
});

describe("management API", () => {
  test("create, read, patch, list newest first with total, history, export, import, delete", async () => {
    const workspace = ws("manage");
    const first = await reme.createMemory(workspace, { memory_type: "task", when_to_use: "first", content: "one" });
    const second = await reme.createMemory(workspace, { memory_type: "task", when_to_use: "second", content: "two" });
    assert.equal((await reme.getMemory(workspace, first.memory_id)).content, "one");
    await assert.rejects(
      reme.createMemory(workspace, { memory_id: first.memory_id, when_to_use: "again", content: "x" }),
      (err: unknown) => err instanceof ConflictError && err.status === 409,
    );

    const patched = await reme.updateMemory(workspace, first.memory_id, { content: "uno" });
    assert.equal(patched.content, "uno");
    const page = await reme.listMemories(workspace, { sort: "-time_created", limit: 1 });
    assert.equal(page.total, 2);
    assert.equal(page.memories.length, 1);
    assert.ok(page.next_cursor);
    const all = [];
    for await (const memory of reme.iterateMemories(workspace, { sort: "memory_id", limit: 1 })) all.push(memory.memory_id);
    assert.deepEqual(all, [first.memory_id, second.memory_id].sort());

    const history = await reme.memoryHistory(workspace, first.memory_id);
    assert.deepEqual(history.map((entry) => entry.event), ["ADD", "UPDATE"]);
    assert.equal(history[1]?.after?.content, "uno");

    const exported = await reme.exportWorkspace(workspace);
    assert.equal(exported.trim().split("\n").length, 2);
    const listed = await reme.listWorkspaces({ limit: 500 });
    assert.equal(listed.workspaces.find((w) => w.workspace_id === workspace)?.size, 2);

    const copy = ws("import");
    await reme.createMemory(copy, { when_to_use: "placeholder", content: "replaced by the import" });
    assert.deepEqual(await reme.importWorkspace(copy, exported), { size: 2 });
    assert.equal((await reme.getMemory(copy, first.memory_id)).content, "uno");
    assert.deepEqual(await reme.importWorkspace(copy, [second]), { size: 1 });

    assert.deepEqual(await reme.deleteMemory(workspace, first.memory_id), { deleted: true, memory_id: first.memory_id });
    await assert.rejects(reme.getMemory(workspace, first.memory_id), (err: unknown) => err instanceof NotFoundError && err.status === 404);
  });
});

describe("jobs", () => {
  test("an async vector_store load runs as a job: 202, progress while it runs, the load's answer when done", async () => {
    const workspace_id = ws("load");
    const seen: Job[] = [];
    const accepted = await reme.submit("vector_store", { action: "load", path: "docs/library/agent_basics.jsonl", workspace_id });
    assert.match(accepted.job_id, /\S/);
    assert.equal(accepted.idempotent_replay, false);
    const job = await reme.waitForJob(accepted.job_id, { onProgress: (state) => seen.push(state), timeoutMs: 120_000 });
    assert.equal(job.status, "done");
    assert.equal(job.flow, "vector_store");
    for (const state of seen) {
      assert.ok(state.status === "queued" || state.status === "running");
      if (state.progress?.done !== undefined && state.progress.total) assert.ok(state.progress.done <= state.progress.total);
    }
    const result = reme.jobResult(job);
    assert.equal(result.success, true);
    const page = await reme.listMemories(workspace_id);
    assert.equal(page.total, 24); // the rows of docs/library/agent_basics.jsonl
  });

  test("an Idempotency-Key makes a resubmission answer the first job; a failed job throws its typed error", async () => {
    const workspace_id = ws("jobs");
    const key = randomUUID();
    const fields = { action: "load" as const, path: "docs/library/no_such_file.jsonl", workspace_id };
    const first = await reme.submit("vector_store", fields, { idempotencyKey: key });
    const again = await reme.submit("vector_store", fields, { idempotencyKey: key });
    assert.equal(again.job_id, first.job_id);
    assert.equal(again.idempotent_replay, true);
    const job = await reme.waitForJob(first.job_id, { timeoutMs: 60_000 });
    assert.equal(job.status, "failed");
    assert.throws(() => reme.jobResult(job), (err: unknown) => err instanceof NotFoundError && err.status === 404);
    await assert.rejects(
      reme.runJob("vector_store", fields),
      (err: unknown) => err instanceof NotFoundError,
    );
    await assert.rejects(reme.getJob("job_unknown"), NotFoundError);
  });
});

describe("events", () => {
  test("a change is seen on the event stream as a typed event", async () => {
    const workspace = ws("events");
    const stream = await reme.events({ workspace });
    try {
      const created = await reme.createMemory(workspace, { when_to_use: "an event", content: "ADD" });
      await reme.deleteMemory(workspace, created.memory_id);
      const items: StreamItem[] = [];
      for await (const item of stream) {
        items.push(item);
        if (items.length === 2) break;
      }
      const events = items as ChangeEvent[];
      assert.deepEqual(events.map((event) => event.type), ["ADD", "DELETE"]);
      assert.deepEqual(events[0]?.memory_ids, [created.memory_id]);
      assert.equal(events[0]?.workspace_id, workspace);
    } finally {
      stream.close();
    }
  });
});

describe("errors from the live service", () => {
  test("400, 404 and 422 are their typed errors", async () => {
    await assert.rejects(
      reme.call("vector_store", { action: "explode" as "list", workspace_id: ws("e") }),
      (err: unknown) => err instanceof InvalidRequestError && err.status === 400 && err.code === "invalid_request",
    );
    await assert.rejects(reme.call("no_such_flow", {}), (err: unknown) => err instanceof NotFoundError && err.status === 404);
    await assert.rejects(
      reme.call("retrieve_task_memory", { workspace_id: ws("e") } as never),
      (err: unknown) => err instanceof RequestValidationError && err.status === 422 && /query/.test(err.message),
    );
    await assert.rejects(
      reme.vector_store("load", { path: "/etc/passwd", workspace_id: ws("e") }),
      (err: unknown) => err instanceof PathNotAllowedError && err.status === 403,
    );
  });

  test("401 without the key, 403 for a workspace outside it (Bearer apiKey)", { skip: !process.env.REME_BASE_URL ? false : "needs the service the tests start" }, async () => {
    const keyless = new ReMeClient(service.baseUrl, { apiKey: "" });
    await assert.rejects(keyless.listWorkspaces(), (err: unknown) => err instanceof UnauthorizedError && err.status === 401);
    const wrong = new ReMeClient(service.baseUrl, { apiKey: "not-a-key" });
    await assert.rejects(wrong.retrieve_task_memory("x", { workspace_id: "a" }), UnauthorizedError);
    const mine = ws("mine");
    const scoped = new ReMeClient(service.baseUrl, { apiKey: service.createKey([mine], "write") });
    await scoped.createMemory(mine, { when_to_use: "mine", content: "ok" });
    await assert.rejects(
      scoped.listMemories(ws("theirs")),
      (err: unknown) => err instanceof ForbiddenError && err.status === 403,
    );
  });

  test("413 for a body over the server's limit", { skip: !process.env.REME_BASE_URL ? false : "needs the service the tests start" }, async () => {
    const big = "x".repeat(service.maxBodyBytes + 1);
    await assert.rejects(
      reme.retrieve_task_memory(big, { workspace_id: ws("big") }),
      (err: unknown) => err instanceof PayloadTooLargeError && err.status === 413,
    );
  });
});
