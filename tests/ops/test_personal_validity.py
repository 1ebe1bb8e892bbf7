"""Time validity of personal memories (`ops/personal/lifecycle.py`): a contradiction invalidates instead of
deleting (an INVALIDATE in the history and the events), retrieval reads facts as they held at `as_of`, skips invalid
ones unless `include_invalid`, honours a TTL, and weighs age by a bounded decay."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from reme_service.app import ReMeApp
from reme_service.events.event import Event
from reme_service.schema.messages import Message
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops import test_personal_reflection as reflection
from tests.ops.personal_helpers import last_prompt, personal_app, stored
from tests.ops.test_personal_summary import scripted, user

pytestmark = pytest.mark.anyio

WS = "validity"


async def retrieve(app: ReMeApp, query: str, **fields: Any) -> dict[str, Any]:
    result = await app.async_execute(name="retrieve_personal_memory", workspace_id=WS, query=query, top_k=5, **fields)
    assert result["success"], result
    return result


def contents(result: dict[str, Any]) -> set[str]:
    return {m["content"] for m in result["metadata"]["memory_list"]}


async def insert(app: ReMeApp, *memories: dict[str, Any], workspace: str = WS) -> None:
    dicts = [{"memory_type": "personal", "target": "alice", "when_to_use": m["content"], **m} for m in memories]
    result = await app.async_execute(name="vector_store", workspace_id=workspace, action="insert", memory_dicts=dicts)
    assert result["success"], result


async def test_a_contradiction_invalidates_and_as_of_reads_the_past(tmp_path: Path) -> None:
    llm = scripted(verdicts={2: "Contradiction"})
    async with personal_app(tmp_path, llm=llm) as app:
        first = await app.async_execute(
            name="summary_personal_memory", workspace_id=WS, messages=[user("I work at Google.", "2023-05-08 09:00:00")]
        )
        old_id = first["metadata"]["memory_list"][0]["memory_id"]
        events: list[Event] = []
        async with app.events.subscribe(lambda event: True) as subscription:
            second = await app.async_execute(
                name="summary_personal_memory",
                workspace_id=WS,
                messages=[user("I work at Microsoft now.", "2023-05-08 17:00:00")],
            )
            while not subscription.queue.empty():
                events.append(subscription.queue.get_nowait())
        assert second["metadata"]["invalidated_memory_ids"] == [old_id]
        assert [(e.type, e.memory_ids) for e in events if e.type == "INVALIDATE"] == [("INVALIDATE", [old_id])]
        assert {e.type for e in events} == {"ADD", "INVALIDATE"}  # the invalidation is not also an UPDATE

        assert app.history is not None
        entries = await app.history.read(WS, old_id)
        assert [e["event"] for e in entries] == ["ADD", "INVALIDATE"]
        assert entries[1]["before"]["valid_to"] == "" and entries[1]["after"]["valid_to"] == "2023-05-08 17:00:00"
        assert entries[1]["flow"] == "summary_personal_memory"

        query = "Where do I work?"
        assert contents(await retrieve(app, query)) == {"I WORK AT MICROSOFT NOW."}
        assert contents(await retrieve(app, query, as_of="2023-05-08 12:00:00")) == {"I WORK AT GOOGLE."}
        assert contents(await retrieve(app, query, as_of="2023-05-08 17:00:00")) == {"I WORK AT MICROSOFT NOW."}
        assert contents(await retrieve(app, query, as_of="2023-05-01")) == set()  # nothing was known yet
        everything = await retrieve(app, query, include_invalid=True)
        assert contents(everything) == {"I WORK AT GOOGLE.", "I WORK AT MICROSOFT NOW."}


async def test_ttl_from_the_request_or_the_workspace_settings(tmp_path: Path) -> None:
    settings = orjson.dumps({"short": {"ttl_seconds": 60}}).decode()
    async with personal_app(tmp_path, f"lifecycle.workspaces={settings}") as app:
        said = [user("I am allergic to peanuts.", "2026-11-02 18:30:00")]
        for workspace, extra in ((WS, {"ttl": 3600}), ("short", {}), ("forever", {})):
            result = await app.async_execute(
                name="summary_personal_memory", workspace_id=workspace, messages=said, **extra
            )
            assert result["success"], result
        spans = {}
        for workspace in (WS, "short", "forever"):
            (memory,) = await stored(app, workspace)
            assert memory["valid_from"] == "2026-11-02 18:30:00" and memory["recorded_at"]
            recorded = datetime.fromisoformat(memory["recorded_at"])
            expires = memory["expires_at"]
            spans[workspace] = (datetime.fromisoformat(expires) - recorded).total_seconds() if expires else None
        assert spans == {WS: 3600, "short": 60, "forever": None}

        (memory,) = await stored(app, WS)
        expires_at = datetime.fromisoformat(memory["expires_at"])
        before = (expires_at - timedelta(seconds=1)).isoformat(sep=" ")
        after = expires_at.isoformat(sep=" ")
        query = "What am I allergic to?"
        assert contents(await retrieve(app, query, as_of=before)) == {"I am allergic to peanuts."}
        assert contents(await retrieve(app, query, as_of=after)) == set()
        assert contents(await retrieve(app, query, as_of=after, include_invalid=True)) == {"I am allergic to peanuts."}


async def test_decay_is_a_bounded_multiplier_never_a_filter(tmp_path: Path) -> None:
    memories = [
        {"content": "I play the violin every evening.", "valid_from": "2026-10-27 12:00:00"},  # 30 days old
        {"content": "I play the cello every evening.", "valid_from": "2016-11-26 12:00:00"},  # 10 years old
        {"content": "I play the piano every evening.", "valid_from": "2026-11-26 12:00:00"},  # new
    ]
    query = {"query": "Which instrument do I play every evening?", "query_time": "2026-11-26 12:00:00"}
    fused: dict[str, dict[str, float]] = {}
    for name, overrides in (
        ("off", ()),
        ("on", ("lifecycle.decay_half_life_days=30", "lifecycle.decay_floor=0.2")),
    ):
        async with personal_app(tmp_path / name, *overrides) as app:
            await insert(app, *memories)
            result = await retrieve(app, **query)
            fused[name] = {
                m["content"].split()[3]: m["fused_score"] / m["relevance"] for m in result["metadata"]["memory_list"]
            }
    assert fused["off"] == {"violin": 1.0, "cello": 1.0, "piano": 1.0}
    on = fused["on"]
    assert set(on) == {"violin", "cello", "piano"}  # the old one ranks lower, it is not dropped
    assert abs(on["piano"] - 1.0) < 1e-3 and abs(on["violin"] - 0.5) < 1e-3 and abs(on["cello"] - 0.2) < 1e-3


async def test_a_workspace_overrides_only_what_it_sets(tmp_path: Path) -> None:
    settings = orjson.dumps({"slow": {"decay_half_life_days": 365}}).decode()
    async with personal_app(
        tmp_path, "lifecycle.decay_half_life_days=30", "lifecycle.decay_floor=0.3", f"lifecycle.workspaces={settings}"
    ) as app:
        lifecycle = app.config.lifecycle
        assert lifecycle.for_workspace("slow").decay_half_life_days == 365
        assert lifecycle.for_workspace("slow").decay_floor == 0.3
        assert lifecycle.for_workspace("other").decay_half_life_days == 30
        assert lifecycle.for_workspace("other").ttl_seconds is None


async def test_a_reflection_invalidates_a_contradicted_insight_without_a_correction(tmp_path: Path) -> None:
    def judge(messages: Sequence[Message]) -> str:
        lines = re.findall(r"^(\d+)\. ([^:]+):", last_prompt(messages), re.MULTILINE)
        return "\n".join(f"Judgment: {n} | {'Contradiction' if s == 'job' else 'None'}" for n, s in lines)

    llm = ScriptedLLM().on("GetReflectionSubjectOp", "Subject: hiking").on("UpdateInsightOp", reflection.value)
    llm.on("LongContraRepeatOp", judge)
    old = {**reflection.observation("Alice works as a teacher", "2023-01-01 09:00:00"), "reflection_subject": "job"}
    old["metadata"] = {"memory_type": "insight", "insight_type": "insight"}
    async with personal_app(tmp_path, llm=llm) as app:
        await reflection.insert(app, [reflection.observation(t, d) for t, d in reflection.SAID] + [old])
        (job_id,) = [m["memory_id"] for m in await stored(app, reflection.WS) if m["reflection_subject"] == "job"]
        result = await reflection.reflect(app)
        assert result["metadata"]["invalidated_memory_ids"] == [job_id]
        assert result["metadata"]["deleted_memory_ids"] == []
        (job,) = [m for m in await stored(app, reflection.WS) if m["memory_id"] == job_id]
        assert job["valid_to"] and job["content"] == "Alice works as a teacher"  # kept, no longer valid
        assert app.history is not None
        assert [e["event"] for e in await app.history.read(reflection.WS, job_id)] == ["ADD", "INVALIDATE"]
        assert "job" not in {m["reflection_subject"] for m in result["metadata"]["memory_list"]}


async def test_without_as_of_only_invalidated_and_expired_facts_are_left_out(tmp_path: Path) -> None:
    async with personal_app(tmp_path) as app:
        await insert(
            app,
            {"content": "I will move to Oslo in 2099.", "valid_from": "2099-01-01 00:00:00"},  # dated ahead of now
            {"content": "I moved to Oslo long ago.", "valid_to": "2020-01-01 00:00:00"},
            {"content": "I moved to Oslo, it expired.", "expires_at": "2020-01-01 00:00:00"},
            {"content": "I moved to Oslo, invalid ahead.", "valid_to": "2099-06-01 00:00:00"},
        )
        assert contents(await retrieve(app, "Oslo move")) == {"I will move to Oslo in 2099."}
        assert contents(await retrieve(app, "Oslo move", as_of="2099-03-01")) == {
            "I will move to Oslo in 2099.",
            "I moved to Oslo, invalid ahead.",
        }
        assert len(contents(await retrieve(app, "Oslo move", include_invalid=True))) == 4
