"""The working-memory flows through the Python API (`ReMeApp.async_execute`): configurable token counters, op
parameters checked at start-up, the no-LLM compression path in Chinese, and the time budget of grep patterns."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from reme_service.errors import ConfigError
from reme_service.ops.working import file_tools
from reme_service.ops.working.message_io import parse_messages
from reme_service.ops.working.message_offload_op import MessageOffloadOp
from reme_service.ops.working.token_count import TokenizerTokenCounter
from tests.conditions import until

pytestmark = pytest.mark.anyio

FLOWS = 'enabled_flows=["summary_working_memory","summary_working_memory_for_as","react","agentic_retrieve"]'
CODE = "def f(x):\n    return {'a': [x, x + 1]}\n" * 300


def messages() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "请帮我检查这个函数"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "cat", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": CODE},
        {"role": "assistant", "content": "函数返回一个字典。"},
        {"role": "user", "content": "还有别的问题吗？"},
    ]


def app(tmp_path: Path, *overrides: str) -> ReMeApp:
    return ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", FLOWS, *overrides, env={})


async def test_minilm_counter_is_configurable_per_flow(tmp_path: Path) -> None:
    overlay = tmp_path / "minilm.yaml"
    overlay.write_text(
        "flow:\n  summary_working_memory_for_as:\n    flow_content: MessageOffloadOp(token_counter='minilm')\n"
    )
    async with app(tmp_path, f"config={overlay}") as reme:
        result = await reme.async_execute(name="summary_working_memory_for_as", messages=messages())
        default = await reme.async_execute(name="summary_working_memory", messages=messages())
    summary = result["metadata"]["working_summary"]
    assert summary["token_counter"] == "minilm"
    expected = TokenizerTokenCounter.minilm().count_messages(parse_messages(messages()))
    assert summary["tokens_before"] == expected
    assert default["metadata"]["working_summary"]["token_counter"] == "heuristic"
    assert expected > default["metadata"]["working_summary"]["tokens_before"]  # code: WordPiece counts more


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("MessageOffloadOp(token_counter='tiktoken')", "unknown token counter 'tiktoken'; valid: heuristic"),
        ("MessageOffloadOp(max_concurrency=0)", "max_concurrency"),
        ("ReactSearchOp(search_tool='web')", "unknown search_tool 'web'; available: vector_store"),
        ("AgenticRetrieveOp(max_steps=0)", "max_steps"),
        ("GrepOp(grep_timeout=0)", "grep_timeout"),
    ],
)
def test_bad_op_parameters_stop_the_start(tmp_path: Path, expression: str, message: str) -> None:
    overlay = tmp_path / "bad.yaml"
    overlay.write_text(f'flow:\n  react:\n    flow_content: "{expression}"\n')
    with pytest.raises(ConfigError, match=message):
        app(tmp_path, f"config={overlay}")


async def test_chinese_extractive_compression(tmp_path: Path) -> None:
    async with app(tmp_path, "language=zh") as reme:
        result = await reme.async_execute(
            name="summary_working_memory",
            messages=messages(),
            working_summary_mode="compress",
            max_total_tokens=100,
            keep_recent_count=1,
            chat_id="会话/1",
        )
    assert result["success"] is True, result
    text = result["answer"][0]["content"]
    assert "<overall_goal>\n请帮我检查这个函数\n</overall_goal>" in text
    assert "- assistant: 函数返回一个字典。" in text
    assert result["metadata"]["written_files"] == ["_1_0.json"]  # the chat id is sanitised
    assert (tmp_path / "working_memory" / "_1_0.json").is_file()
    assert result["metadata"]["no_llm_ops"] == ["MessageOffloadOp"]


def test_ops_with_equal_parameters_are_equal() -> None:
    assert MessageOffloadOp() == MessageOffloadOp()
    assert MessageOffloadOp(token_counter="minilm") != MessageOffloadOp()
    assert repr(MessageOffloadOp(token_counter="minilm")) == "MessageOffloadOp(token_counter='minilm')"


class WatchedPattern:
    """A compiled pattern that notes when its search of a line beginning with 'aaa' (the bomb) starts and how it
    ends: `ended` is None while it runs, then "finished" or "stopped by its budget" (regex's TimeoutError)."""

    def __init__(self, pattern: Any) -> None:
        self.pattern = pattern
        self.started = threading.Event()
        self.ended: str | None = None

    def search(self, line: str, **options: Any) -> Any:
        if not line.startswith("aaa"):
            return self.pattern.search(line, **options)
        self.started.set()
        try:
            found = self.pattern.search(line, **options)
        except TimeoutError:
            self.ended = "stopped by its budget"
            raise
        self.ended = "finished"
        return found


@pytest.mark.timeout(60)  # without its budget the search ends "finished" (~30 s) or, on a slow machine, times out
async def test_a_regex_bomb_answers_400_in_its_budget_and_blocks_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`(a|a)+$` on 24 "a"s and a "!" backtracks for tens of seconds; the default budget of 1 s stops the search
    (a 400), and all the while the event loop keeps answering health checks and other greps: they are counted by
    what the bomb's search was doing when each answer arrived, not timed (a clock says little on a loaded machine)."""
    watched: list[WatchedPattern] = []

    def compile_pattern(*args: Any, **options: Any) -> WatchedPattern:
        watched.append(WatchedPattern(real_compile(*args, **options)))
        return watched[-1]

    real_compile = file_tools.compile_pattern
    monkeypatch.setattr(file_tools, "compile_pattern", compile_pattern)
    folder = tmp_path / "working_memory"
    folder.mkdir()
    (folder / "bomb.txt").write_text("a" * 24 + "!\n", encoding="utf-8")
    (folder / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    answered_while_searching = 0  # health checks and other greps answered while the bomb's search ran
    # one caller runs all of it here (the Python API): it may run two searches at once, so that its other greps are
    # not queued behind its own bomb by the per-key share of the regex lane (`auth/shares.FairLane`, tested on its own)
    async with app(tmp_path, 'enabled_flows=["grep_working_memory"]', "auth.per_key.regex=2") as reme:
        bomb = asyncio.create_task(
            reme.async_execute(name="grep_working_memory", file_path="bomb.txt", pattern=r"(a|a)+$")
        )
        await until(lambda: bool(watched) and watched[0].started.is_set())
        while not bomb.done():
            health = await reme.health()
            other = await reme.async_execute(name="grep_working_memory", file_path="notes.txt", pattern="^b")
            assert health["status"] == "healthy" and other["answer"] == "notes.txt:2:beta"
            answered_while_searching += watched[0].ended is None
        answer = await bomb
    assert watched[0].ended == "stopped by its budget"
    # on the loop thread the search would hold the loop until its end: nothing would be answered meanwhile
    assert answered_while_searching >= 2, f"{answered_while_searching} answers while the bomb ran"
    error = answer["metadata"].get("error", {})
    assert error.get("code") == "invalid_request", answer  # 400
    assert "the pattern took longer than 1 s" in error["message"] and "simplify it" in error["message"]


@pytest.mark.slow
async def test_many_regex_bombs_at_once_leave_the_worker_threads_to_others(tmp_path: Path) -> None:
    """More bombs at once than the default executor has threads (min(32, cores + 4)): they run in the regex lane
    (two threads), so a request that needs an ordinary worker thread (read_working_memory) is answered while every
    bomb is still pending. In the default executor it would wait for a bomb's budget to run out."""
    folder = tmp_path / "working_memory"
    folder.mkdir()
    (folder / "bomb.txt").write_text("a" * 24 + "!\n", encoding="utf-8")
    (folder / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    count = min(32, (os.cpu_count() or 1) + 4) + 1
    # each bomb holds a lane thread 1 s: far longer than the read takes, even on a busy machine
    grep = 'flow.grep_working_memory.flow_content="GrepOp(grep_timeout=1.0)"'
    async with app(tmp_path, 'enabled_flows=["grep_working_memory", "read_working_memory"]', grep) as reme:
        bombs = [
            asyncio.create_task(reme.async_execute(name="grep_working_memory", file_path="bomb.txt", pattern="(a|a)+$"))
            for _ in range(count)
        ]
        read = await reme.async_execute(name="read_working_memory", file_path="notes.txt")
        pending = sum(not bomb.done() for bomb in bombs)
        answers = await asyncio.gather(*bombs)
    assert read["success"] is True and "beta" in read["answer"]
    assert pending == count, f"the read waited until {count - pending} bombs had used up their budget"
    assert all(answer["metadata"]["error"]["code"] == "invalid_request" for answer in answers)


@pytest.mark.slow
async def test_a_pattern_whose_counted_repeats_multiply_is_refused_before_it_is_compiled(tmp_path: Path) -> None:
    """`(?:a{1000}){1000}b` stands for a million atoms: compiling it takes ~0.3 s and 300 MB, holding the GIL, and a
    few more braces take a server past any memory (compiling cannot be interrupted). It is a 400 naming the
    limit, before any compiling; a pattern at the limit, or of unbounded repeats, is searched."""
    folder = tmp_path / "working_memory"
    folder.mkdir()
    (folder / "notes.txt").write_text("a" * 10_000 + "\nbeta\n", encoding="utf-8")
    # the last search costs ~0.4 s of CPU: a budget that a loaded machine cannot run out of, as the limit is the point
    patient = 'flow.grep_working_memory.flow_content="GrepOp(grep_timeout=60)"'
    async with app(tmp_path, 'enabled_flows=["grep_working_memory"]', patient) as reme:

        async def grep(pattern: str) -> dict[str, Any]:
            return await reme.async_execute(name="grep_working_memory", file_path="notes.txt", pattern=pattern)

        for bomb in ("(?:a{1000}){1000}b", "((((a{100}){100}){100}){100})", "a{10001}", "((a{100})(?#){100})(?#){100}"):
            error = (await grep(bomb))["metadata"].get("error", {})
            assert error.get("code") == "invalid_request", bomb
            assert "at most 10,000" in error["message"] and "nested counts multiply" in error["message"]
        verbose = (await grep("(?x)((a{100}) {100}) {100}"))["metadata"]["error"]  # spaces there are not atoms
        assert verbose["code"] == "invalid_request" and "verbose mode" in verbose["message"]
        assert (await grep("a{10000}"))["answer"].startswith("notes.txt:1:aaa")
        assert (await grep("(?:a{100})+b|be(?:ta){1,9000}"))["answer"] == "notes.txt:2:beta"
