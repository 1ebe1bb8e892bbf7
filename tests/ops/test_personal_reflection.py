"""reflect_personal_memory on the op harness (no app): when a reflection is due, insights per subject,
contradictions between insights, observations marked as consumed, and the LLM path's failures."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from reme_service.schema.messages import Message
from reme_service.testing.run_op import FlowCaller
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops.personal_helpers import last_prompt, personal_ops, stored

pytestmark = pytest.mark.anyio

WS = "ws"
SAID = [
    ("I love hiking in the mountains.", "2023-05-01 10:00:00"),
    ("I went hiking with my dog last weekend.", "2023-05-02 10:00:00"),
    ("My dog is a golden retriever named Max.", "2023-05-03 10:00:00"),
    ("I drink green tea every morning.", "2023-05-04 10:00:00"),
    ("I bought new hiking boots.", "2023-05-05 10:00:00"),
    ("I work as a nurse at the city hospital.", "2023-05-06 10:00:00"),
    ("My shift at the hospital starts at 7.", "2023-05-07 10:00:00"),
    ("I prefer green tea over coffee.", "2023-05-08 10:00:00"),
    ("I walk my dog Max twice a day.", "2023-05-09 10:00:00"),
    ("I am planning a hiking trip to Norway.", "2023-05-10 10:00:00"),
    ("The hospital gave me a promotion to head nurse.", "2023-05-11 10:00:00"),
    ("I started learning Norwegian for the trip.", "2023-05-12 10:00:00"),
]


def observation(text: str, time: str, user: str = "Alice") -> dict[str, Any]:
    return {
        "memory_type": "personal",
        "when_to_use": text,
        "content": text,
        "target": user,
        "time_created": time,
        "metadata": {"memory_type": "observation", "observation_type": "personal_info", "reflected": False},
    }


async def insert(app: FlowCaller, memories: list[dict[str, Any]]) -> None:
    result = await app.async_execute(name="vector_store", workspace_id=WS, action="insert", memory_dicts=memories)
    assert result["success"], result


def kinds(memories: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in memories if m["metadata"].get("memory_type") == kind]


async def reflect(app: FlowCaller, user_name: str = "Alice") -> dict[str, Any]:
    result = await app.async_execute(name="reflect_personal_memory", workspace_id=WS, user_name=user_name)
    assert result["success"], result
    return result


async def test_reflection_without_an_llm_builds_insights_from_recurring_subjects(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await insert(
            app, [observation(t, d) for t, d in SAID] + [observation("I own a cat.", "2023-05-01 00:00:00", "Bob")]
        )
        result = await reflect(app)
        assert result["metadata"]["no_llm_ops"] == ["GetReflectionSubjectOp", "UpdateInsightOp", "LongContraRepeatOp"]
        assert result["metadata"]["reflection"] == {
            "user_name": "Alice",
            "observations": 12,
            "remaining": 0,
            "insights": 0,
            "due": True,
            "reflected_observations": 12,
        }
        insights = {m["reflection_subject"]: m for m in kinds(await stored(app, WS), "insight")}
        assert set(insights) == {"hospital", "hiking", "dog"}
        dog = insights["dog"]
        assert dog["content"].startswith("I walk my dog Max twice a day. / My dog is a golden retriever named Max.")
        assert dog["target"] == "Alice" and dog["time_created"] == "2023-05-09 10:00:00"
        assert dog["when_to_use"] == f"dog: {dog['content']}"
        observations = kinds(await stored(app, WS), "observation")
        assert {m["target"]: m["metadata"]["reflected"] for m in observations} == {"Alice": True, "Bob": False}
        again = await reflect(app)
        assert again["metadata"]["reflection"]["due"] is False
        assert again["answer"] == "not enough new observations to reflect on (0 < 10)"
        found = await app.async_execute(
            name="retrieve_personal_memory", workspace_id=WS, query="What is my dog called?", user_name="Alice"
        )
        assert found["answer"].splitlines()[0].startswith("[2023-05-09 10:00:00 Tuesday] dog: I walk my dog Max")


async def test_below_the_threshold_nothing_is_written(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await insert(app, [observation(t, d) for t, d in SAID[:4]])
        result = await reflect(app)
        assert result["answer"] == "not enough new observations to reflect on (4 < 10)"
        assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 0}
        assert all(m["metadata"]["reflected"] is False for m in await stored(app, WS))


async def test_reflection_moves_through_the_history_oldest_first(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await insert(
            app, [observation(f"I visited museum number {i}.", f"2023-01-01 10:{i:02d}:00") for i in range(60)]
        )
        first = await reflect(app)
        assert first["metadata"]["reflection"]["remaining"] == 10
        unreflected = [m for m in kinds(await stored(app, WS), "observation") if not m["metadata"]["reflected"]]
        assert sorted(m["time_created"] for m in unreflected)[0] == "2023-01-01 10:50:00"
        second = await reflect(app)
        assert second["metadata"]["reflection"]["observations"] == 10
        assert second["metadata"]["reflection"]["remaining"] == 0


async def test_a_later_reflection_updates_an_existing_insight(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await insert(app, [observation(t, d) for t, d in SAID])
        await reflect(app)
        later = [observation(f"My dog learned trick number {i}.", f"2023-06-{i + 1:02d} 10:00:00") for i in range(10)]
        await insert(app, later)
        result = await reflect(app)
        updated = {m["reflection_subject"]: m for m in result["metadata"]["memory_list"]}
        assert "dog" in updated
        assert updated["dog"]["content"].startswith("My dog learned trick number 9. / My dog learned trick number 8.")
        assert "I walk my dog Max twice a day." in updated["dog"]["content"]  # the old value follows
        assert len([m for m in kinds(await stored(app, WS), "insight") if m["reflection_subject"] == "dog"]) == 1


# ---------------------------------------------------------------- with an LLM


def value(messages: Sequence[Message]) -> str:
    subject = re.search(r'summary of Alice\'s "([^"]+)"', last_prompt(messages))
    assert subject is not None
    return f"Value: Alice's {subject.group(1)}: merged from the notes"


def judge(messages: Sequence[Message]) -> str:
    lines = re.findall(r"^(\d+)\. ([^:]+):", last_prompt(messages), re.MULTILINE)
    verdicts = {"job": "Contradiction | Alice used to teach", "drinks": "Contained"}
    return "\n".join(f"Judgment: {n} | {verdicts.get(subject, 'None')}" for n, subject in lines)


async def test_llm_reflection_with_contradicting_and_contained_insights(tmp_path: Path) -> None:
    llm = ScriptedLLM()
    llm.on("GetReflectionSubjectOp", "Subject: hiking\nSubject: dog")
    llm.on("UpdateInsightOp", value)
    llm.on("LongContraRepeatOp", judge)
    old = [
        {**observation(text, "2023-01-01 09:00:00"), "reflection_subject": subject}
        for subject, text in (("job", "Alice works as a teacher"), ("drinks", "Alice drinks tea"))
    ]
    for memory in old:
        memory["metadata"] = {"memory_type": "insight", "insight_type": "insight"}
    async with personal_ops(tmp_path, llm=llm) as app:
        await insert(app, [observation(t, d) for t, d in SAID] + old)
        ids = {m["reflection_subject"]: m["memory_id"] for m in kinds(await stored(app, WS), "insight")}
        result = await reflect(app)
        assert "no_llm_ops" not in result["metadata"]
        assert result["metadata"]["deleted_memory_ids"] == [ids["drinks"]]
        insights = {m["reflection_subject"]: m["content"] for m in kinds(await stored(app, WS), "insight")}
        assert insights == {
            "hiking": "Alice's hiking: merged from the notes",
            "dog": "Alice's dog: merged from the notes",
            "job": "Alice used to teach",
        }
        (subjects,) = llm.calls_of("GetReflectionSubjectOp")
        assert "Subjects we already keep a summary for: job, drinks" in subjects.prompt
        update = next(c.prompt for c in llm.calls_of("UpdateInsightOp") if 'summary of Alice\'s "hiking"' in c.prompt)
        assert "- [2023-05-01 10:00:00] I love hiking in the mountains." in update


async def test_llm_failure_during_reflection_is_502_and_changes_nothing(tmp_path: Path) -> None:
    llm = ScriptedLLM()
    llm.on("GetReflectionSubjectOp", "Subject: hiking")
    llm.on("UpdateInsightOp", "I think Alice likes hiking a lot.")
    async with personal_ops(tmp_path, llm=llm) as app:
        await insert(app, [observation(t, d) for t, d in SAID])
        result = await app.async_execute(name="reflect_personal_memory", workspace_id=WS, user_name="Alice")
        assert result["success"] is False
        assert result["metadata"]["error"]["code"] == "llm_error"
        assert "UpdateInsightOp" in result["metadata"]["error"]["message"]
        memories = await stored(app, WS)
        assert kinds(memories, "insight") == []
        assert all(m["metadata"]["reflected"] is False for m in memories)
