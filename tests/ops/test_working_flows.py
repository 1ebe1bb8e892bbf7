"""The working-memory flows through the Python API (`ReMeApp.async_execute`): configurable token counters, op
parameters checked at start-up, and the no-LLM compression path in Chinese."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from reme_service.errors import ConfigError
from reme_service.ops.working import MessageOffloadOp
from reme_service.ops.working.message_io import parse_messages
from reme_service.ops.working.token_count import TokenizerTokenCounter

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
