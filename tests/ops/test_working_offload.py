"""Compaction, compression and the `auto` orchestration on message lists (no app, no HTTP)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reme_service.ops.working.compaction import CompactSettings, FileNamer, compact_messages
from reme_service.ops.working.compression import (
    CompressionPlan,
    CompressSettings,
    assemble,
    extract_snapshot,
    extractive_snapshot,
    group_messages,
    plan_compression,
    split_history,
)
from reme_service.ops.working.offload import DiskView, OffloadRequest, extractive_snapshotter, offload
from reme_service.ops.working.paths import WorkingRoot
from reme_service.ops.working.token_count import HeuristicTokenCounter
from reme_service.schema.messages import Message, Role, ToolCall

pytestmark = pytest.mark.anyio
COUNTER = HeuristicTokenCounter()
BIG = "row of tool output " * 500  # 9500 chars, 2375 tokens


def call(call_id: str, name: str = "run") -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments='{"q": 1}')


def conversation() -> list[Message]:
    return [
        Message(role=Role.SYSTEM, content="be helpful"),
        Message(role=Role.USER, content="Analyse the sales export"),
        Message(role=Role.ASSISTANT, content="", tool_calls=[call("call_a", "export")]),
        Message(role=Role.TOOL, content=BIG, tool_call_id="call_a"),
        Message(role=Role.ASSISTANT, content="", tool_calls=[call("call_b", "stats")]),
        Message(role=Role.TOOL, content="small result", tool_call_id="call_b"),
        Message(role=Role.ASSISTANT, content="The export has 500 rows."),
        Message(role=Role.USER, content="Which region sold most?"),
    ]


# ------------------------------------------------------------------------------------------------- compaction


def test_compaction_offloads_large_older_tool_results() -> None:
    settings = CompactSettings(max_total_tokens=100, max_tool_message_tokens=100, keep_recent_count=1, store_dir="s")
    result = compact_messages(conversation(), settings, COUNTER)
    assert result.applied and result.over_budget
    assert result.files == {"s/call_a.txt": BIG}
    assert result.messages[3].content == "tool call=call_a result is stored in file path=`s/call_a.txt`"
    assert result.messages[3].tool_call_id == "call_a"
    assert result.messages[5].content == "small result"  # below max_tool_message_tokens
    assert [m.role for m in result.messages] == [m.role for m in conversation()]


def test_compaction_preview_and_budget() -> None:
    preview = CompactSettings(
        max_total_tokens=100, max_tool_message_tokens=100, keep_recent_count=1, preview_char_length=12
    )
    content = compact_messages(conversation(), preview, COUNTER).messages[3].content
    assert content == "tool call=call_a result is stored in file path=`call_a.txt`\npreview: row of tool ..."
    within = CompactSettings(max_total_tokens=100_000, max_tool_message_tokens=100)
    unchanged = compact_messages(conversation(), within, COUNTER)
    assert not unchanged.applied and not unchanged.over_budget and unchanged.files == {}


def test_recent_messages_are_never_compacted() -> None:
    messages = [*conversation()[:3], Message(role=Role.TOOL, content=BIG, tool_call_id="call_a")]
    settings = CompactSettings(max_total_tokens=1, max_tool_message_tokens=1, keep_recent_count=1)
    assert not compact_messages(messages, settings, COUNTER).applied
    settings = CompactSettings(max_total_tokens=1, max_tool_message_tokens=1, keep_recent_count=0)
    assert compact_messages(messages, settings, COUNTER).applied


def test_file_names_are_sanitised_and_never_clash() -> None:
    messages = [
        Message(role=Role.TOOL, content=BIG, tool_call_id="../../etc/cron.d/x"),
        Message(role=Role.TOOL, content=BIG + "other", tool_call_id="call/1"),
        Message(role=Role.TOOL, content=BIG + "third", tool_call_id="call_1"),
        Message(role=Role.TOOL, content=BIG, tool_call_id=""),
        Message(role=Role.USER, content="recent"),
    ]
    settings = CompactSettings(max_total_tokens=1, max_tool_message_tokens=1, keep_recent_count=1)
    result = compact_messages(messages, settings, COUNTER)
    paths = list(result.files)
    assert paths[:3] == ["_.._etc_cron.d_x.txt", "call_1.txt", "call_1_2.txt"]
    assert len(paths[3]) == len("0123456789abcdef0123456789abcdef.txt")
    assert all("/" not in p for p in paths)


def test_file_namer_reuses_a_name_only_for_the_same_text() -> None:
    on_disk = {"s/call_a.txt": "old text"}
    namer = FileNamer(lambda path, text: on_disk.get(path, text) == text)
    assert namer.claim("s", "call_a", ".txt", "old text") == "s/call_a.txt"
    assert namer.claim("s", "call_a", ".txt", "new text") == "s/call_a_2.txt"
    assert namer.claim("s", "call_a", ".txt", "new text") == "s/call_a_2.txt"


# ------------------------------------------------------------------------------------------------ compression


def test_split_keeps_tool_results_with_their_call() -> None:
    messages = conversation()
    system, older, recent = split_history(messages, 2)
    assert [m.content for m in system] == ["be helpful"]
    assert [m.role for m in recent] == [Role.ASSISTANT, Role.USER]
    # keep 3 would start "recent" with the tool result of call_b: the call moves along with it
    _, older, recent = split_history(messages, 3)
    assert recent[0].tool_calls[0].id == "call_b"
    assert len(older) == 3
    _, older, recent = split_history(messages, 0)
    assert recent == [] and len(older) == 7


def test_grouping_rules() -> None:
    assert group_messages([5, 5, 5], None) == [[0, 1, 2]]
    assert group_messages([5, 5, 5], 0) == [[0, 1, 2]]
    assert group_messages([4, 4, 4, 20, 1], 10) == [[0, 1], [2], [3], [4]]
    assert group_messages([], 10) == []


def test_plan_archives_and_assemble() -> None:
    settings = CompressSettings(
        max_total_tokens=10, group_token_threshold=1000, keep_recent_count=1, store_dir="s", chat_id="c1"
    )
    plan = plan_compression(conversation(), settings, COUNTER, first_index=2)
    assert plan is not None
    assert plan.archive_paths == ["s/c1_2.json", "s/c1_3.json", "s/c1_4.json"]
    assert [len(g) for g in plan.groups] == [2, 1, 3]
    first = json.loads(plan.archives["s/c1_2.json"])
    assert first[0] == {"role": "user", "content": "Analyse the sales export", "reasoning_content": ""}
    assert first[1]["tool_calls"][0] == {
        "id": "call_a",
        "type": "function",
        "function": {"name": "export", "arguments": '{"q": 1}'},
    }
    assert plan.goal == "Analyse the sales export"
    out = assemble(plan, ["S0", "S1", "S2"])
    assert [m.role for m in out] == [Role.SYSTEM, Role.ASSISTANT, Role.USER]
    assert out[1].content == (
        "[Compressed conversation history - Part 0/3]\nS0\n(Original 2 messages are stored in: s/c1_2.json)\n\n"
        "[Compressed conversation history - Part 1/3]\nS1\n(Original 1 messages are stored in: s/c1_3.json)\n\n"
        "[Compressed conversation history - Part 2/3]\nS2\n(Original 3 messages are stored in: s/c1_4.json)\n"
    )


def test_plan_respects_budget_unless_forced() -> None:
    settings = CompressSettings(max_total_tokens=100_000, keep_recent_count=1)
    assert plan_compression(conversation(), settings, COUNTER) is None
    assert plan_compression(conversation(), settings, COUNTER, force=True) is not None
    everything_recent = CompressSettings(max_total_tokens=1, keep_recent_count=50)
    assert plan_compression(conversation(), everything_recent, COUNTER, force=True) is None


def test_snapshot_extraction() -> None:
    reply = "<scratchpad>thinking</scratchpad>\n<state_snapshot>\n<overall_goal>g</overall_goal>\n</state_snapshot>"
    assert extract_snapshot(reply) == "<overall_goal>g</overall_goal>"
    assert extract_snapshot("no tags at all") is None
    assert extract_snapshot("<state_snapshot>  </state_snapshot>") is None


def test_extractive_snapshot_quotes_the_messages() -> None:
    messages = conversation()
    _, older, _ = split_history(messages, 1)
    results = {m.tool_call_id: m.text for m in older if m.role is Role.TOOL}
    text = extractive_snapshot(older[:2], "Analyse the sales export", results)
    assert text.startswith("Extractive snapshot (no LLM was configured)")
    assert "<overall_goal>\nAnalyse the sales export\n</overall_goal>" in text
    assert '- called export({"q": 1}) -> row of tool output row of tool output' in text
    later = extractive_snapshot(older[4:], "Analyse the sales export", results)
    assert "- assistant: The export has 500 rows." in later
    assert "<recent_actions>\n- (none)\n</recent_actions>" in later


# ---------------------------------------------------------------------------------------------- orchestration


def request(mode: str, store: str = "s", **kw: object) -> OffloadRequest:
    compact = {k: v for k, v in kw.items() if k in CompactSettings.__dataclass_fields__}
    compress = {k: v for k, v in kw.items() if k in CompressSettings.__dataclass_fields__}
    return OffloadRequest(
        mode=mode,
        compact_ratio_threshold=float(kw.get("ratio", 0.75)),  # type: ignore[arg-type]
        compact=CompactSettings(store_dir=store, **compact),  # type: ignore[arg-type]
        compress=CompressSettings(store_dir=store, chat_id="c", **compress),  # type: ignore[arg-type]
    )


@pytest.fixture
def disk(tmp_path: Path) -> DiskView:
    return DiskView(WorkingRoot(tmp_path.resolve()))


async def test_auto_stops_after_compaction_when_it_is_enough(disk: DiskView) -> None:
    req = request("auto", max_total_tokens=100, max_tool_message_tokens=100, keep_recent_count=1)
    outcome = await offload(conversation(), req, COUNTER, extractive_snapshotter, disk)
    assert outcome.applied == "compact"
    assert outcome.compact_ratio is not None and outcome.compact_ratio < 0.1
    assert list(outcome.files) == ["s/call_a.txt"]
    assert outcome.tokens_after < outcome.tokens_before


async def test_auto_compresses_the_compacted_list_when_compaction_is_not_enough(disk: DiskView) -> None:
    req = request("auto", max_total_tokens=100, max_tool_message_tokens=100, keep_recent_count=1, ratio=0.01)
    outcome = await offload(conversation(), req, COUNTER, extractive_snapshotter, disk)
    assert outcome.applied == "compact+compress"
    assert list(outcome.files) == ["s/call_a.txt", "s/c_0.json"]
    archive = json.loads(outcome.files["s/c_0.json"])
    assert archive[2]["content"] == "tool call=call_a result is stored in file path=`s/call_a.txt`"
    assert [m.role for m in outcome.messages] == [Role.SYSTEM, Role.ASSISTANT, Role.USER]


async def test_auto_compresses_when_nothing_could_be_compacted(disk: DiskView) -> None:
    messages = [m for m in conversation() if m.content != BIG and m.tool_call_id != "call_a"]
    req = request("auto", max_total_tokens=5, max_tool_message_tokens=100, keep_recent_count=1)
    outcome = await offload(messages, req, COUNTER, extractive_snapshotter, disk)
    assert outcome.applied == "compress" and outcome.compact_ratio == 1.0


async def test_within_budget_nothing_changes_in_any_mode(disk: DiskView) -> None:
    for mode in ("compact", "compress", "auto"):
        outcome = await offload(conversation(), request(mode), COUNTER, extractive_snapshotter, disk)
        assert outcome.applied == "none" and outcome.files == {}
        assert outcome.messages == conversation()


async def test_later_compressions_never_overwrite_earlier_archives(disk: DiskView) -> None:
    (disk.root.root / "s").mkdir()
    (disk.root.root / "s" / "c_0.json").write_text("[]")
    (disk.root.root / "s" / "c_1.json").write_text("[]")
    req = request("compress", max_total_tokens=10, keep_recent_count=1)
    outcome = await offload(conversation(), req, COUNTER, extractive_snapshotter, disk)
    assert list(outcome.files) == ["s/c_2.json"]
    assert "Part 0/1" in outcome.messages[1].text


async def test_snapshots_of_groups_are_made_concurrently(disk: DiskView) -> None:
    seen: list[int] = []

    async def snapshot(group: list[Message], plan: CompressionPlan) -> str:
        seen.append(len(group))
        return f"summary of {len(group)}"

    req = request("compress", max_total_tokens=10, keep_recent_count=1, group_token_threshold=1000)
    outcome = await offload(conversation(), req, COUNTER, snapshot, disk)
    assert sorted(seen) == [1, 2, 3]
    assert "summary of 2" in outcome.messages[1].text
