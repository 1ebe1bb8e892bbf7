"""Build a memory library from agent trajectories: `summary_task_memory` over them, then `vector_store dump`.

```
python docs/library/build_library.py docs/library/trajectories/agent_runs.jsonl --out docs/library/agent_runs.jsonl
python docs/library/build_library.py runs.jsonl --out lib.jsonl llm.default.model_name=qwen-plus   # with an LLM
python docs/library/build_library.py runs.jsonl --out /srv/libs/ --base-url http://127.0.0.1:8002  # a running service
```

Input: JSON lines, one trajectory each: `{"task_id", "messages": [...OpenAI-style...], "score": 1.0 (success) or
lower, "metadata": {"query": "the task"}}`. The trajectories are summarised in batches into one workspace (named
after the output file unless `--workspace` is given) and the workspace is dumped as a library file in the format
`vector_store load` reads (see README.md).

By default the service runs in this process (in-memory store, no files besides the output); `key=value` arguments
configure it as they configure `reme` (an LLM through `llm.default.*` or the FLOW_LLM_* variables; without one the
service keeps each run's task, outcome and key steps as a raw experience, and the output says so). With
`--base-url` the flows run on that service instead, and `--out` is a path on the service's machine, inside its
file roots.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

Runner = Callable[..., Awaitable[dict[str, Any]]]


def read_trajectories(path: Path) -> list[dict[str, Any]]:
    """Every trajectory of a JSON-lines file; a bad line stops the build with its number."""
    trajectories = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
            raise SystemExit(f"{path}:{number}: a trajectory is an object with a 'messages' list")
        trajectories.append(item)
    return trajectories


def batches(items: Sequence[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


def _checked(flow: str, response: dict[str, Any]) -> dict[str, Any]:
    if not response.get("success"):
        error = response.get("metadata", {}).get("error", {})
        raise SystemExit(f"{flow} failed: {error.get('message', response)}")
    return response


async def build(
    run: Runner, trajectories: list[dict[str, Any]], *, workspace: str, out: str, batch_size: int, report: Any
) -> dict[str, Any]:
    """Summarise the trajectories into `workspace` (emptied first) and dump it to `out`; returns the dump result."""
    _checked("vector_store delete", await run("vector_store", workspace_id=workspace, action="delete"))
    offline: set[str] = set()
    for number, batch in enumerate(batches(trajectories, batch_size), 1):
        response = _checked(
            "summary_task_memory", await run("summary_task_memory", workspace_id=workspace, trajectories=batch)
        )
        stored = len(response["metadata"].get("memory_list", []))
        offline.update(response["metadata"].get("no_llm_ops", []))
        report(f"batch {number}: {len(batch)} trajectories -> {stored} memories")
    if offline:
        report(f"no LLM configured: {', '.join(sorted(offline))} kept raw experiences")
    dumped = _checked("vector_store dump", await run("vector_store", workspace_id=workspace, action="dump", path=out))
    return dict(dumped["metadata"]["action_result"])


async def build_in_process(args: argparse.Namespace, trajectories: list[dict[str, Any]]) -> dict[str, Any]:
    from reme_service.app import ReMeApp

    # the output (resolved by main) is the only place the in-process service may write a library
    root = args.out if not args.out.endswith(".jsonl") else str(Path(args.out).parent)
    with tempfile.TemporaryDirectory(prefix="reme-build-") as scratch:
        app = ReMeApp(
            "vector_store.default.backend=memory",
            f"data_dir={scratch}",
            f"file_roots={json.dumps([root])}",
            "log_level=WARNING",
            *args.overrides,
        )
        async with app:
            return await build(
                app.async_execute,
                trajectories,
                workspace=args.workspace,
                out=args.out,
                batch_size=args.batch,
                report=_say,
            )


async def build_remote(args: argparse.Namespace, trajectories: list[dict[str, Any]]) -> dict[str, Any]:
    from reme_service.client import AsyncReMeClient
    from reme_service.errors import ReMeError

    async with AsyncReMeClient(args.base_url) as client:

        async def run(flow: str, **fields: Any) -> dict[str, Any]:
            try:
                return (await client.call(flow, **fields)).model_dump()
            except ReMeError as error:
                raise SystemExit(f"{flow} failed: {error.message}") from None

        return await build(
            run, trajectories, workspace=args.workspace, out=args.out, batch_size=args.batch, report=_say
        )


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trajectories", type=Path, help="JSON-lines file of trajectories")
    parser.add_argument("--out", required=True, help="the library file (.jsonl), or a directory for <workspace>.jsonl")
    parser.add_argument("--workspace", help="workspace id (default: the output file's name)")
    parser.add_argument("--batch", type=int, default=8, help="trajectories per summary_task_memory call")
    parser.add_argument("--base-url", help="run on this service instead of in this process")
    parser.add_argument("overrides", nargs="*", help="service config overrides, key.sub=value (in-process only)")
    args = parser.parse_intermixed_args(argv)
    if args.batch < 1:
        parser.error("--batch must be >= 1")
    if args.workspace is None:
        args.workspace = Path(args.out).stem if args.out.endswith(".jsonl") else "library"
    trajectories = read_trajectories(args.trajectories)
    if not trajectories:
        parser.error(f"{args.trajectories} holds no trajectory")
    if not args.base_url:
        args.out = str(Path(args.out).resolve())
    builder = build_remote if args.base_url else build_in_process
    result = asyncio.run(builder(args, trajectories))
    _say(f"wrote {result['size']} memories from {len(trajectories)} trajectories to {result['path']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
