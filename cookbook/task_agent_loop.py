"""An agent loop that learns from its own runs through the task-memory endpoints.

For every task: `retrieve_task_memory` (experiences for this task) → run the task with the LLM, the
experiences in the prompt → score the answer → `summary_task_memory` with the scored trajectory →
`record_task_memory` with what was retrieved (`update_utility` when the run succeeded) → every few tasks
`delete_task_memory` prunes memories that are retrieved often but rarely help (ReMe's AppWorld defaults:
freq >= 5 and utility / freq < 0.5).

The tasks are small, self-checking exercises; a second round over them can use what the first taught.

    reme backend=http http.port=8002 &                      # the memory service
    python cookbook/task_agent_loop.py --base-url http://127.0.0.1:8002 \
        --llm-base-url https://api.openai.com/v1 --llm-api-key $OPENAI_API_KEY --model gpt-4o-mini

The agent's LLM is any OpenAI-compatible endpoint (`--llm-base-url`, `--llm-api-key`, `--model`; defaults from
FLOW_LLM_BASE_URL / FLOW_LLM_API_KEY). The service summarises with its own LLM, or without one (raw
experiences) when it has none configured.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any

import httpx
import openai

SYSTEM = "You are a careful assistant. Follow the answer format the task asks for exactly."


@dataclass(frozen=True)
class Task:
    task_id: str
    text: str
    expected: str


TASKS = (
    Task("km_to_m", "Convert 3 km to metres. Reply with the number only.", "3000"),
    Task("percent", "What is 15% of 200? Reply with the number only.", "30"),
    Task("reverse", "Reverse the word 'memory'. Reply with the word only.", "yromem"),
    Task("sort", "Sort 5, 2, 9 in ascending order. Reply with the numbers separated by commas.", "2,5,9"),
    Task("vowels", "How many vowels are in the word 'experience'? Reply with the number only.", "5"),
    Task("hours", "Convert 2.5 hours to minutes. Reply with the number only.", "150"),
)


def normalise(text: str) -> str:
    return "".join(text.strip().strip(".").lower().split())


class MemoryService:
    """The task-memory endpoints of a running service."""

    def __init__(self, base_url: str, workspace: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=120)
        self.workspace = workspace

    def call(self, flow: str, **fields: Any) -> dict[str, Any]:
        response = self.http.post(f"/{flow}", json={"workspace_id": self.workspace, **fields})
        body = response.json()
        if response.status_code != 200 or not body.get("success"):
            error = body.get("metadata", {}).get("error", body)
            raise RuntimeError(f"{flow} failed with HTTP {response.status_code}: {error}")
        return body

    def close(self) -> None:
        self.http.close()


def run_task(llm: openai.OpenAI, model: str, task: Task, experience: str) -> tuple[list[dict[str, Any]], float]:
    """Ask the LLM, check its answer; returns the trajectory's messages and its score (1.0 or 0.0)."""
    prompt = task.text
    if experience:
        prompt = f"Some related experience that may help you complete the task:\n{experience}\n\nTask: {task.text}"
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
    reply = llm.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
    answer = reply.choices[0].message.content or ""
    score = 1.0 if normalise(answer) == normalise(task.expected) else 0.0
    verdict = "correct" if score == 1.0 else f"incorrect; the expected answer was {task.expected}"
    messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": f"Checker: {verdict}."}]
    return messages, score


def loop(args: argparse.Namespace) -> dict[str, Any]:
    service = MemoryService(args.base_url, args.workspace)
    llm = openai.OpenAI(base_url=args.llm_base_url, api_key=args.llm_api_key or "none", max_retries=2)
    stats: dict[str, Any] = {"rounds": [], "stored": 0, "pruned": 0}
    done = 0
    try:
        for round_number in range(1, args.rounds + 1):
            successes = 0
            for task in TASKS:
                retrieved = service.call("retrieve_task_memory", query=task.text, top_k=args.top_k)
                memories = retrieved["metadata"].get("memory_list", [])
                messages, score = run_task(llm, args.model, task, retrieved["answer"])
                successes += int(score == 1.0)
                trajectory = {
                    "task_id": task.task_id,
                    "messages": messages,
                    "score": score,
                    "metadata": {"query": task.text},
                }
                summary = service.call("summary_task_memory", trajectories=[trajectory])
                stored = len(summary["metadata"].get("memory_list", []))
                stats["stored"] += stored
                if memories:
                    service.call("record_task_memory", memory_dicts=memories, update_utility=score == 1.0)
                done += 1
                if done % args.prune_every == 0:
                    pruned = service.call("delete_task_memory", freq_threshold=5, utility_threshold=0.5)
                    stats["pruned"] += len(pruned["metadata"]["deleted_memory_ids"])
                print(
                    f"round {round_number} {task.task_id:<8} score {score:.0f}  retrieved {len(memories)}"
                    f"  stored {stored}"
                )
            stats["rounds"].append(successes / len(TASKS))
            print(f"round {round_number}: {successes}/{len(TASKS)} tasks solved")
    finally:
        service.close()
        llm.close()
    print(f"memories stored: {stats['stored']}, pruned: {stats['pruned']}")
    return stats


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8002", help="the memory service")
    parser.add_argument("--workspace", default="agent_loop_demo")
    parser.add_argument("--llm-base-url", default=os.environ.get("FLOW_LLM_BASE_URL"), help="OpenAI-compatible")
    parser.add_argument("--llm-api-key", default=os.environ.get("FLOW_LLM_API_KEY"))
    parser.add_argument("--model", default="qwen3-30b-a3b-instruct-2507")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--prune-every", type=int, default=6, help="call delete_task_memory every N tasks")
    args = parser.parse_args(argv)
    if not args.llm_base_url:
        parser.error("set --llm-base-url (or FLOW_LLM_BASE_URL) to an OpenAI-compatible endpoint")
    if args.rounds < 1 or args.prune_every < 1:
        parser.error("--rounds and --prune-every must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        loop(parse_args(argv))
    except (RuntimeError, httpx.HTTPError, openai.OpenAIError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
