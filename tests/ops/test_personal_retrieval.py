"""retrieve_personal_memory on the op harness (no app): time fusion, type ratios, the answer's times, users, the
LLM steps."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reme_service.schema.messages import Message
from reme_service.testing.run_op import FlowCaller
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops.personal_helpers import personal_ops

pytestmark = pytest.mark.anyio

WS = "ws"


async def remember(app: FlowCaller, *said: tuple[str, str], user_name: str = "Alice") -> None:
    """Summarise (no LLM) each (text, time) as a user message of `user_name`."""
    messages = [{"role": "user", "content": text, "time_created": time} for text, time in said]
    result = await app.async_execute(
        name="summary_personal_memory", workspace_id=WS, user_name=user_name, messages=messages
    )
    assert result["success"], result


async def insert(app: FlowCaller, text: str, time: str, **inner: Any) -> None:
    """Store an observation directly (for tests whose app has an LLM, so summaries would use it)."""
    memory = {
        "memory_type": "personal",
        "when_to_use": text,
        "content": text,
        "target": "Alice",
        "time_created": time,
        "metadata": {"memory_type": "observation", **inner},
    }
    result = await app.async_execute(name="vector_store", workspace_id=WS, action="insert", memory_dicts=[memory])
    assert result["success"], result


async def retrieve(app: FlowCaller, **fields: Any) -> dict[str, Any]:
    result = await app.async_execute(name="retrieve_personal_memory", workspace_id=WS, **fields)
    assert result["success"], result
    return result


HIKES = (
    ("I went hiking at Mount Hood yesterday.", "2023-04-10 18:00:00"),
    ("I went hiking at Mount Rainier yesterday.", "2023-05-08 18:00:00"),
)


async def test_the_period_asked_about_boosts_memories_of_that_time(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, *HIKES)
        last_week = await retrieve(app, query="Where did I go hiking last week?", query_time="2023-05-10", top_k=2)
        assert last_week["metadata"]["time_extraction"] == {
            "text": "last week",
            "label": "2023-05-01..2023-05-07",
            "start": "2023-05-01 00:00:00",
            "end": "2023-05-08 00:00:00",
            "method": "rules",
        }
        top, other = last_week["metadata"]["memory_list"]
        assert "Rainier" in top["content"] and top["time_match"] == "event"
        assert top["fused_score"] == pytest.approx(top["relevance"] * 2.0, abs=1e-5)
        assert other["time_match"] is None and other["fused_score"] == pytest.approx(other["relevance"], abs=1e-5)
        april = await retrieve(app, query="Where did I go hiking in April 2023?", query_time="2023-05-10", top_k=1)
        assert "Hood" in april["metadata"]["memory_list"][0]["content"]
        # relative to the query's own time: asked in mid-April, "last week" is the week of the Mount Hood hike
        earlier = await retrieve(app, query="Where did I go hiking last week?", query_time="2023-04-12", top_k=1)
        assert "Hood" in earlier["metadata"]["memory_list"][0]["content"]


async def test_a_memory_said_within_the_period_matches_by_message_time(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, ("I adopted a cat named Tilly.", "2023-03-15 10:00:00"))
        await remember(app, ("I adopted a dog named Rex.", "2022-06-01 10:00:00"))
        result = await retrieve(app, query="Which pet did I adopt in March 2023?", query_time="2023-06-01", top_k=2)
        top = result["metadata"]["memory_list"][0]
        assert "Tilly" in top["content"] and top["time_match"] == "message"


async def test_time_candidates_beyond_the_semantic_recall_are_found(tmp_path: Path) -> None:
    head = "SetQueryOp() >> (ExtractTimeOp() | (RetrieveMemoryOp(recall_top_k=1) >> SemanticRankOp())) >> "
    overlay = tmp_path / "small_recall.yaml"
    overlay.write_text(
        "flow:\n"
        f"  retrieve_personal_memory:\n    flow_content: {head}FuseRerankOp()\n"
        f"  retrieve_without_time:\n    flow_content: {head}FuseRerankOp(enable_time_fusion=False)\n"
        "    input_schema: {query: {type: string}, query_time: {type: any, items: Timestamp}, top_k: {type: integer},"
        " user_name: {type: string}, language: {type: string, enum: ['', en, zh]}}\n"
    )
    async with personal_ops(tmp_path, f"config={overlay}") as app:
        await remember(app, ("I love hiking, hiking and more hiking at Mount Rainier.", "2023-05-01 10:00:00"))
        await remember(app, ("We went hiking through the rain.", "2022-01-10 10:00:00"))
        query = {"query": "hiking in January 2022", "query_time": "2023-06-01", "top_k": 1}
        plain = await app.async_execute(name="retrieve_without_time", workspace_id=WS, **query)
        assert "Rainier" in plain["metadata"]["memory_list"][0]["content"]  # the one semantic candidate
        result = await retrieve(app, **query)
        (top,) = result["metadata"]["memory_list"]
        assert "through the rain" in top["content"] and top["time_match"] == "message"


async def test_insights_outrank_observations_and_unknown_kinds_weigh_one(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        insert = await app.async_execute(
            name="vector_store",
            workspace_id=WS,
            action="insert",
            memory_dicts=[
                {
                    "memory_type": "personal",
                    "when_to_use": f"Alice loves green tea ({kind or 'plain'})",
                    "content": f"Alice loves green tea ({kind or 'plain'})",
                    "target": "Alice",
                    "reflection_subject": "drinks",
                    "metadata": {"memory_type": kind},
                }
                for kind in ("observation", "insight", "")
            ],
        )
        assert insert["success"], insert
        result = await retrieve(app, query="What does Alice drink?", user_name="Alice", top_k=3)
        memories = result["metadata"]["memory_list"]
        assert [m["metadata"]["memory_type"] for m in memories][0] == "insight"
        ratios = {m["metadata"]["memory_type"]: m["fused_score"] / m["relevance"] for m in memories}
        assert ratios == pytest.approx({"insight": 2.0, "observation": 1.0, "": 1.0})
        assert result["answer"].splitlines()[0].endswith("drinks: Alice loves green tea (insight)")


async def test_the_answer_carries_the_times(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, HIKES[1])
        result = await retrieve(app, query="Where did I go hiking?", top_k=1)
        assert result["answer"] == (
            "[2023-05-08 18:00:00 Monday] I went hiking at Mount Rainier yesterday. (time: 2023-05-07)"
        )


async def test_when_questions_favour_memories_that_record_a_time(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, ("I love the pottery class.", "2023-07-01 10:00:00"))
        await remember(app, ("I signed up for the pottery class yesterday.", "2023-07-03 10:00:00"))
        result = await retrieve(app, query="When did I sign up for the pottery class?", top_k=2)
        timed = next(m for m in result["metadata"]["memory_list"] if "signed" in m["content"])
        assert timed["fused_score"] == pytest.approx(timed["relevance"] * 1.2, abs=1e-5)
        assert result["metadata"]["time_extraction"] is None


async def test_the_query_can_come_from_messages_with_their_time(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, *HIKES)
        result = await retrieve(
            app,
            messages=[
                {"role": "assistant", "content": "How can I help?"},
                {"role": "user", "content": "Where did I go hiking last week?", "time_created": "2023-04-12 09:00"},
            ],
            top_k=1,
        )
        assert result["metadata"]["query_time"] == "2023-04-12 09:00:00"
        assert "Hood" in result["metadata"]["memory_list"][0]["content"]
        empty = await app.async_execute(name="retrieve_personal_memory", workspace_id=WS, query="  ")
        assert empty["success"] is True and empty["metadata"]["memory_list"] == []  # as ReMe: empty, not an error
        assert "query was empty" in empty["metadata"]["warning"]


async def test_an_unknown_workspace_is_an_empty_success(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="retrieve_personal_memory", workspace_id="nobody", query="What did I do last week?"
        )
        assert result["success"] and result["answer"] == "" and result["metadata"]["memory_list"] == []


async def test_bad_query_time_is_a_validation_error(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(name="retrieve_personal_memory", workspace_id=WS, query="q", query_time="soon")
        assert result["metadata"]["error"]["code"] == "validation_error"
        assert result["metadata"]["error"]["details"]["errors"][0]["loc"] == ("query_time",)


async def test_time_words_the_rules_cannot_read_go_to_the_llm(tmp_path: Path) -> None:
    llm = ScriptedLLM().on("ExtractTimeOp", "Thinking...\nTime: 2022-12-20..2023-01-05")
    async with personal_ops(tmp_path, llm=llm) as app:
        await insert(app, "I skied in the Alps.", "2022-12-28 10:00:00")
        result = await retrieve(app, query="What did I do over the holidays?", query_time="2023-02-01", top_k=1)
        assert result["metadata"]["time_extraction"]["method"] == "llm"
        assert result["metadata"]["time_extraction"]["label"] == "2022-12-20..2023-01-05"
        assert result["metadata"]["memory_list"][0]["time_match"] == "message"
        (call,) = llm.calls
        assert call.op == "ExtractTimeOp"
        assert "asked a question at Wednesday, February 1, 2023, 00:00" in call.messages[0].text
        # a period the rules can read never reaches the LLM
        await retrieve(app, query="What did I do last week?", query_time="2023-02-01")
        assert len(llm.calls) == 1


async def test_without_an_llm_unreadable_time_words_are_reported(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await remember(app, ("I skied in the Alps.", "2022-12-28 10:00:00"))
        result = await retrieve(app, query="What did I do over the holidays?")
        assert result["metadata"]["no_llm_ops"] == ["ExtractTimeOp"]
        assert result["metadata"]["time_extraction"] is None


async def test_malformed_time_answers_are_retried_then_502(tmp_path: Path) -> None:
    llm = ScriptedLLM().on("ExtractTimeOp", "Probably the winter holidays.")
    async with personal_ops(tmp_path, llm=llm) as app:
        await insert(app, "I skied in the Alps.", "2022-12-28 10:00:00")
        result = await app.async_execute(
            name="retrieve_personal_memory", workspace_id=WS, query="What did I do over the holidays?"
        )
        assert result["success"] is False and result["metadata"]["error"]["code"] == "llm_error"
        assert "ExtractTimeOp" in result["metadata"]["error"]["message"]
        assert [call.op for call in llm.calls] == ["ExtractTimeOp"] * 3


async def test_semantic_rank_reorders_by_the_llm_scores(tmp_path: Path) -> None:
    overlay = tmp_path / "ranker.yaml"
    overlay.write_text(
        "flow:\n  retrieve_personal_memory:\n    flow_content: SetQueryOp() >> (ExtractTimeOp() | "
        "(RetrieveMemoryOp() >> SemanticRankOp(output_memory_max_count=2))) >> FuseRerankOp()\n"
    )

    def rank(messages: Sequence[Message]) -> str:
        prompt = messages[0].text
        lines = [line for line in prompt.splitlines() if line[:1].isdigit() and ". " in line]
        return "\n".join(f"Score: {line.split('.')[0]} | {0.9 if 'tea' in line else 0.2}" for line in lines)

    llm = ScriptedLLM().on("SemanticRankOp", rank)
    async with personal_ops(tmp_path, f"config={overlay}", llm=llm) as app:
        await insert(app, "My favourite drink is coffee with milk.", "2023-05-01 10:00:00")
        await insert(app, "My favourite drink is coffee, black.", "2023-05-02 10:00:00")
        await insert(app, "I also drink green tea in the evening.", "2023-05-03 10:00:00")
        result = await retrieve(app, query="What is my favourite drink coffee?", top_k=3)
        memories = result["metadata"]["memory_list"]
        assert "tea" in memories[0]["content"] and memories[0]["relevance"] == 0.9
        assert [call.op for call in llm.calls] == ["SemanticRankOp"]
