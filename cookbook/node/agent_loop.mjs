// An agent loop with task memory: retrieve experiences before acting, learn from the run after it.
//
//   REME_BASE_URL=http://127.0.0.1:8002 node cookbook/node/agent_loop.mjs
//   # with a real model (any OpenAI-compatible endpoint):
//   LLM_BASE_URL=https://.../v1 LLM_API_KEY=... LLM_MODEL=... node cookbook/node/agent_loop.mjs
//
// One episode:
//   1. retrieve_task_memory(task)         -> experiences from earlier runs go into the system prompt
//   2. the agent acts (an LLM, or the scripted stand-in below when no LLM is configured)
//   3. summary_task_memory([trajectory])  -> the run, with its score, becomes new experience
//   4. record_task_memory(retrieved, ok)  -> the experiences that were used get freq (and utility) counted
// Run it twice: the second episode starts with what the first one learned.

import { pathToFileURL } from "node:url";
// The typed client of clients/typescript (build it first: `cd clients/typescript && npm ci && npm run build`).
// In an application: `npm install reme-service-client` (or the packed .tgz) and `from "reme-service-client"`.
import { ReMeClient } from "../../clients/typescript/dist/index.js";

/** @typedef {import("../../clients/typescript/dist/index.js").Message} Message */
/** @typedef {(messages: Message[]) => Promise<Message>} Act */

/**
 * An `Act` backed by an OpenAI-compatible chat completions endpoint.
 * @param {{baseUrl: string, apiKey?: string, model: string}} llm
 * @returns {Act}
 */
export function openAIAct({ baseUrl, apiKey = "", model }) {
  return async (messages) => {
    const response = await fetch(`${baseUrl.replace(/\/+$/, "")}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ model, messages: messages.map(({ role, content }) => ({ role, content })) }),
    });
    if (!response.ok) throw new Error(`LLM HTTP ${response.status}: ${await response.text()}`);
    const data = await response.json();
    return { role: "assistant", content: data.choices[0].message.content ?? "" };
  };
}

/**
 * A deterministic stand-in for an LLM: it follows the first experience it was given, if any.
 * @type {Act}
 */
export const scriptedAct = async (messages) => {
  const system = String(messages[0]?.content ?? "");
  const hint = system.match(/Content: (.+)/)?.[1];
  const task = String(messages.at(-1)?.content ?? "");
  const content = hint
    ? `Following experience ("${hint.trim()}"), I completed: ${task}`
    : `I tried a first approach and completed: ${task}`;
  return { role: "assistant", content };
};

/**
 * Run one episode of `task`.
 * @param {{reme: ReMeClient, task: string, act?: Act, evaluate?: (answer: string) => number, topK?: number}} options
 *   `evaluate` scores the final answer in [0, 1] (1 = success); by default every finished run scores 1.
 * @returns {Promise<{answer: string, score: number, retrieved: Array<Record<string, any>>,
 *   learned: Array<Record<string, any>>, trajectory: {messages: Message[], score: number, metadata: {query: string}}}>}
 */
export async function runEpisode({ reme, task, act = scriptedAct, evaluate = () => 1, topK = 3 }) {
  const hits = await reme.retrieve_task_memory(task, { top_k: topK });
  const retrieved = hits.metadata.memory_list ?? [];
  const system = retrieved.length
    ? `You are a careful agent. Experiences from earlier runs that may help:\n${hits.answer}`
    : "You are a careful agent.";
  /** @type {Message[]} */
  const messages = [{ role: "system", content: system }, { role: "user", content: task }];
  const reply = await act(messages);
  messages.push(reply);
  const answer = String(reply.content ?? "");
  const score = evaluate(answer);

  // The system prompt holds retrieved text, not the agent's own work: learn from the task and the agent's turns.
  const trajectory = { messages: messages.slice(1), score, metadata: { query: task } };
  const summary = await reme.summary_task_memory([trajectory]);
  if (retrieved.length) await reme.record_task_memory(retrieved, score >= 1);
  return { answer, score, retrieved, learned: summary.metadata.memory_list ?? [], trajectory };
}

async function main() {
  const reme = new ReMeClient(process.env.REME_BASE_URL, { workspaceId: process.env.REME_WORKSPACE ?? "node_agent_demo" });
  const act = process.env.LLM_BASE_URL
    ? openAIAct({ baseUrl: process.env.LLM_BASE_URL, apiKey: process.env.LLM_API_KEY, model: process.env.LLM_MODEL ?? "" })
    : scriptedAct;
  const task = "Find the three cheapest flights from Paris to Oslo next Friday";
  for (const round of [1, 2]) {
    const episode = await runEpisode({ reme, task, act });
    console.log(`episode ${round}: used ${episode.retrieved.length} experience(s), learned ${episode.learned.length}`);
    console.log(`  answer: ${episode.answer}`);
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    console.error(err);
    process.exitCode = 1;
  });
}
