// node --test cookbook/node/   (against the server at $REME_BASE_URL; skipped when it is unset)
//
// Build the client (`cd clients/typescript && npm ci && npm run build`), start a server, e.g.
// `.venv/bin/reme embedding_model.default.backend=hash`, then
// `REME_BASE_URL=http://127.0.0.1:8002 node --test cookbook/node/`. The client itself is tested in
// clients/typescript (`npm test`).

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import { ReMeClient } from "../../clients/typescript/dist/index.js";
import { runEpisode } from "./agent_loop.mjs";

const BASE = process.env.REME_BASE_URL;
const skip = BASE ? false : "REME_BASE_URL is not set: start a server and point REME_BASE_URL at it";

test("the example agent loop learns from its first episode", { skip }, async () => {
  const reme = new ReMeClient(BASE, { workspaceId: `node_agent_${randomUUID().slice(0, 8)}` });
  const task = "Find the three cheapest flights from Paris to Oslo next Friday";
  const first = await runEpisode({ reme, task });
  assert.equal(first.retrieved.length, 0);
  assert.ok(first.learned.length >= 1, "the first run was summarised into task memory");

  const second = await runEpisode({ reme, task });
  assert.ok(second.retrieved.length >= 1, "the second run retrieved what the first learned");
  assert.match(second.answer, /Following experience/);

  const used = await reme.getMemory(reme.workspaceId, second.retrieved[0].memory_id);
  assert.equal(used.metadata?.freq, 1, "record_task_memory counted the use");
  assert.equal(used.metadata?.utility, 1, "and that it helped");
});
