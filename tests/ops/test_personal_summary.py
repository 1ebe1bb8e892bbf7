"""summary_personal_memory on the op harness (no app): message times, today's reload, batches, users, languages,
LLM path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from reme_service.app import ReMeApp
from reme_service.errors import FlowDeclarationError
from reme_service.schema.messages import Message
from reme_service.testing.scripted_llm import ScriptedLLM
from tests.ops.personal_helpers import last_prompt, personal_ops, stored

pytestmark = pytest.mark.anyio

WS = "alice_ws"


def user(content: str, time: str | None = None, **metadata: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "user", "content": content, "metadata": metadata}
    if time is not None:
        message["time_created"] = time
    return message


# ---------------------------------------------------------------- no LLM


async def test_observations_carry_the_message_time_and_the_event_time(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="Alice",
            trajectories=[
                {
                    "time_created": "1:56 pm on 8 May, 2023",
                    "messages": [
                        user("I went to a support group yesterday. What do you think?", dia_id="D1:3"),
                        {"role": "assistant", "content": "That sounds great."},
                        user("I have been painting since 2016.", "2023-05-09T10:00:00Z"),
                    ],
                }
            ],
        )
        assert result["success"], result
        assert result["metadata"]["no_llm_ops"] == ["InfoFilterOp", "GetObservationWithTimeOp", "ContraRepeatOp"]
        memories = {m["content"]: m for m in await stored(app, WS)}
        group = memories["I went to a support group yesterday."]  # the question is not part of the observation
        assert group["time_created"] == "2023-05-08 13:56:00"  # the trajectory's time, not now
        assert group["target"] == "Alice" and group["author"] == "rules"
        meta = group["metadata"]
        assert meta["memory_type"] == "observation"
        assert meta["observation_type"] == "personal_info_with_time"
        assert (meta["event_start"], meta["event_end"]) == ("2023-05-07 00:00:00", "2023-05-08 00:00:00")
        assert meta["source_metadata"] == {"dia_id": "D1:3"}
        painting = memories["I have been painting since 2016."]
        assert painting["time_created"] == "2023-05-09 10:00:00"  # the message's own time wins
        assert painting["metadata"]["event_start"] == "2016-01-01 00:00:00"


async def test_messages_without_a_time_are_dated_now(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="summary_personal_memory", workspace_id=WS, messages=[user("I am allergic to peanuts.")]
        )
        assert result["success"]
        (memory,) = await stored(app, WS)
        assert memory["time_created"][:10] == datetime.now().strftime("%Y-%m-%d")
        assert memory["target"] == "user"  # the default user_name


async def test_todays_stored_memories_are_reloaded_and_repetitions_replaced(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        first = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="Alice",
            messages=[user("I love hiking in the mountains.", "2023-05-08 09:00:00")],
        )
        old_id = first["metadata"]["memory_list"][0]["memory_id"]
        other_day = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="Alice",
            messages=[user("I love hiking in the mountains.", "2023-04-01 09:00:00")],
        )
        other_day_id = other_day["metadata"]["memory_list"][0]["memory_id"]
        second = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="Alice",
            messages=[user("I love hiking in the mountains with my dog.", "2023-05-08 18:00:00")],
        )
        assert second["metadata"]["deleted_memory_ids"] == [old_id]
        assert second["metadata"]["contra_repeat"] == {
            "checked": 2,
            "new_dropped": 0,
            "stored_deleted": 1,
            "stored_invalidated": 0,
        }
        ids = {m["memory_id"] for m in await stored(app, WS)}
        assert old_id not in ids and other_day_id in ids  # another day's memory is not "today's"
        assert {m["content"] for m in await stored(app, WS)} == {
            "I love hiking in the mountains.",
            "I love hiking in the mountains with my dog.",
        }


async def test_an_older_repetition_in_the_same_request_is_dropped(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[
                user("I live in Berlin.", "2023-05-08 09:00:00"),
                user("I live in Berlin.", "2023-05-08 09:05:00"),
            ],
        )
        assert [m["time_created"] for m in result["metadata"]["memory_list"]] == ["2023-05-08 09:05:00"]
        assert len(await stored(app, WS)) == 1


async def test_more_than_fifty_observations_are_all_stored(tmp_path: Path) -> None:
    messages = [
        user(f"My favourite number is {i} and I wrote it on card {i * 7}.", "2023-05-08 09:00") for i in range(120)
    ]
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(name="summary_personal_memory", workspace_id=WS, messages=messages)
        assert result["metadata"]["update_result"] == {"deleted_count": 0, "inserted_count": 120}
        assert len(await stored(app, WS)) == 120


async def test_users_and_memory_kinds_do_not_mix(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        await app.async_execute(
            name="vector_store",
            workspace_id=WS,
            action="insert",
            memory_dicts=[{"when_to_use": "I live in Berlin.", "content": "task memory, not personal"}],
        )
        for name in ("Alice", "Bob"):
            result = await app.async_execute(
                name="summary_personal_memory",
                workspace_id=WS,
                user_name=name,
                messages=[user("I live in Berlin.", "2023-05-08 09:00:00")],
            )
            # Bob's identical statement is not a repetition of Alice's, and the task memory is not reloaded
            assert result["metadata"]["contra_repeat"]["checked"] == 1
        memories = await stored(app, WS)
        assert sorted(m.get("target", "") for m in memories) == ["", "Alice", "Bob"]
        found = await app.async_execute(
            name="retrieve_personal_memory", workspace_id=WS, query="Where do I live?", user_name="Bob", top_k=5
        )
        assert [m["target"] for m in found["metadata"]["memory_list"]] == ["Bob"]
        everyone = await app.async_execute(
            name="retrieve_personal_memory", workspace_id=WS, query="Where do I live?", top_k=5
        )
        assert sorted(m["target"] for m in everyone["metadata"]["memory_list"]) == ["Alice", "Bob"]


async def test_chinese_messages_are_kept_in_chinese(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="小明",
            language="zh",
            messages=[user("我昨天去医院看了牙医。你觉得呢？", "2023年5月8日 下午1点56分"), user("你好")],
        )
        (memory,) = result["metadata"]["memory_list"]
        assert memory["content"] == "我昨天去医院看了牙医。"
        assert memory["time_created"] == "2023-05-08 13:56:00"
        assert memory["metadata"]["event_start"] == "2023-05-07 00:00:00"


async def test_resending_a_conversation_replaces_rather_than_duplicates(tmp_path: Path) -> None:
    request: dict[str, Any] = {
        "workspace_id": WS,
        "messages": [user("I am vegan.", "2023-05-08 09:00:00"), user("I work as a nurse.", "2023-05-08 09:01:00")],
    }
    async with personal_ops(tmp_path) as app:
        first = await app.async_execute("summary_personal_memory", **request)
        second = await app.async_execute("summary_personal_memory", **request)
        assert [m["memory_id"] for m in first["metadata"]["memory_list"]] == [
            m["memory_id"] for m in second["metadata"]["memory_list"]
        ]
        assert len(await stored(app, WS)) == 2


async def test_assistant_memorized_and_empty_input(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[
                {"role": "assistant", "content": "I am the assistant and I love tea."},
                user("I already told you I love tea.", memorized=True),
                user("thanks!"),
            ],
        )
        assert result["success"] and result["metadata"]["memory_list"] == []
        assert result["metadata"]["info_filter"] == {"messages": 3, "candidates": 1, "kept": 0}
        empty = await app.async_execute(name="summary_personal_memory", workspace_id=WS)
        assert empty["success"] is False
        assert empty["metadata"]["error"]["code"] == "invalid_request"
        assert "nothing to summarise" in empty["metadata"]["error"]["message"]


async def test_bad_times_are_request_errors_and_empty_messages_say_nothing(tmp_path: Path) -> None:
    async with personal_ops(tmp_path) as app:
        bad_time = await app.async_execute(
            name="summary_personal_memory", workspace_id=WS, messages=[user("I am vegan.", "last tuesday-ish")]
        )
        assert bad_time["metadata"]["error"]["code"] == "validation_error"
        (error,) = bad_time["metadata"]["error"]["details"]["errors"]
        assert error["loc"] == ("messages", 0, "time_created")
        empty = await app.async_execute(
            name="summary_personal_memory", workspace_id=WS, trajectories=[{"messages": [{"role": "user"}]}]
        )
        # ReMe's Message defaults content to "": a blank message is accepted and, saying nothing, stores nothing
        assert empty["success"] is True, empty
        assert empty["metadata"]["info_filter"] == {"messages": 1, "candidates": 0, "kept": 0}
        assert await stored(app, WS) == []


async def test_a_flow_declared_without_the_timed_schemas_still_refuses_bad_times(tmp_path: Path) -> None:
    # `messages` is left to the base field (plain `Message` items) and `trajectories` untyped, so neither is
    # time-checked by the request model; the other fields the ops read must be declared, or the flow does not start
    overlay = tmp_path / "plain_messages.yaml"
    overlay.write_text(
        "flow:\n  loose_summary:\n    flow_content: InfoFilterOp() >> (GetObservationOp() | GetObservationWithTimeOp()"
        " | LoadTodayMemoryOp()) >> ContraRepeatOp() >> UpdateVectorStoreOp()\n"
        "    input_schema: {trajectories: {type: array}, user_name: {type: string},"
        " language: {type: string, enum: ['', en, zh]}}\n"
    )
    async with ReMeApp(
        f"data_dir={tmp_path}",
        f"config={overlay}",
        "vector_store.default.backend=memory",
        "embedding_model.default.backend=hash",
        env={},
    ) as app:
        result = await app.async_execute(
            name="loose_summary", workspace_id=WS, messages=[user("I am vegan.", "sometime in spring")]
        )
        assert result["success"] is False
        error = result["metadata"]["error"]
        assert error["code"] == "invalid_request" and error["details"]["field"] == "messages.0.time_created"
        plain_trajectory = {"messages": [user("I am vegan.", "sometime in spring")]}
        result = await app.async_execute(name="loose_summary", workspace_id=WS, trajectories=[plain_trajectory])
        error = result["metadata"]["error"]
        assert error["details"]["field"] == "trajectories.0.messages.0.time_created"
        assert await stored(app, WS) == []
        good = {"messages": [user("I am vegan and I live in Lyon.")], "time_created": "2023-05-08 10:00:00"}
        result = await app.async_execute(name="loose_summary", workspace_id=WS, user_name="Alice", trajectories=[good])
        assert result["success"], result
        assert {m["time_created"] for m in await stored(app, WS)} == {"2023-05-08 10:00:00"}


def test_a_flow_whose_trajectories_would_lose_their_time_does_not_start(tmp_path: Path) -> None:
    # a plain `Trajectory` has no `time_created`: the request model would drop the conversation's time
    overlay = tmp_path / "plain_trajectories.yaml"
    overlay.write_text(
        "flow:\n  lossy_summary:\n    flow_content: InfoFilterOp() >> GetObservationOp() >> ContraRepeatOp()\n"
        "    input_schema: {trajectories: {type: array, items: Trajectory}, user_name: {type: string},"
        " language: {type: string, enum: ['', en, zh]}}\n"
    )
    with pytest.raises(FlowDeclarationError, match="InfoFilterOp reads request field 'trajectories'"):
        ReMeApp(f"data_dir={tmp_path}", f"config={overlay}", "vector_store.default.backend=memory", env={})


# ---------------------------------------------------------------- with an LLM

_LINE_RE = re.compile(r"^(\d+)\. (?:\[([^\]]*)\] )?[^:]+: (.*)$", re.MULTILINE)


def score_all(messages: Sequence[Message]) -> str:
    """Info filter: 3 for every message except greetings."""
    lines = _LINE_RE.findall(last_prompt(messages))
    return "\n".join(f"Result: {n} | {0 if text.lower().startswith('hi') else 3}" for n, _, text in lines)


def observe(times: dict[str, str]) -> Any:
    """Observation extraction: the message upper-cased as the information, a time from `times` by substring."""

    def reply(messages: Sequence[Message]) -> str:
        out = []
        for n, _, text in _LINE_RE.findall(last_prompt(messages)):
            time = next((t for key, t in times.items() if key in text), "none")
            out.append(f"Information: {n} | {time} | {text.upper()} | keyword")
        return "\n".join(out)

    return reply


def observe_plain(messages: Sequence[Message]) -> str:
    return "\n".join(
        f"Information: {n} | {text.upper()} | keyword" for n, _, text in _LINE_RE.findall(last_prompt(messages))
    )


def judge(verdicts: dict[int, str]) -> Any:
    def reply(messages: Sequence[Message]) -> str:
        count = len(re.findall(r"^\d+\. ", last_prompt(messages), re.MULTILINE))
        return "\n".join(f"Judgment: {n} | {verdicts.get(n, 'None')}" for n in range(1, count + 1))

    return reply


def scripted(
    *first_scores: str, times: dict[str, str] | None = None, verdicts: dict[int, str] | None = None
) -> ScriptedLLM:
    """The summary flow's LLM steps, each answered by a function of its prompt; `first_scores` are the info
    filter's first replies (before `score_all`)."""
    return (
        ScriptedLLM()
        .on("InfoFilterOp", *first_scores, score_all)
        .on("GetObservationWithTimeOp", observe(times or {}))
        .on("GetObservationOp", observe_plain)
        .on("ContraRepeatOp", judge(verdicts or {}))
    )


async def test_llm_path_reads_times_against_the_message_time(tmp_path: Path) -> None:
    llm = scripted(times={"yesterday": "2023-05-07", "last week": "last week"})
    async with personal_ops(tmp_path, llm=llm) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="Alice",
            trajectories=[
                {
                    "messages": [
                        user("I went to a support group yesterday.", "2023-05-08 13:56:00"),
                        user("I moved to a new flat last week.", "2023-05-08 13:57:00"),
                        user("I like green tea.", "2023-05-08 13:58:00"),
                        user("hi there"),
                    ]
                }
            ],
        )
        assert result["success"], result
        assert "no_llm_ops" not in result["metadata"]
        memories = {m["content"]: m for m in await stored(app, WS)}
        assert set(memories) == {
            "I WENT TO A SUPPORT GROUP YESTERDAY.",
            "I MOVED TO A NEW FLAT LAST WEEK.",
            "I LIKE GREEN TEA.",
        }
        group = memories["I WENT TO A SUPPORT GROUP YESTERDAY."]
        assert group["author"] == llm.model_name == "scripted"  # the model that wrote it
        assert group["metadata"]["event_start"] == "2023-05-07 00:00:00"
        flat = memories["I MOVED TO A NEW FLAT LAST WEEK."]  # a relative answer is read against the message time
        assert (flat["metadata"]["event_start"], flat["metadata"]["event_end"]) == (
            "2023-05-01 00:00:00",
            "2023-05-08 00:00:00",
        )
        assert "event_start" not in memories["I LIKE GREEN TEA."]["metadata"]
        prompts = [call.prompt for call in llm.calls_of("GetObservationWithTimeOp")]
        assert any("[Monday, May 8, 2023, 13:56] Alice: I went to a support group yesterday." in p for p in prompts)


async def test_llm_contradiction_invalidates_the_older_stored_memory(tmp_path: Path) -> None:
    llm = scripted(verdicts={2: "Contradiction"})
    async with personal_ops(tmp_path, llm=llm) as app:
        first = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[user("I work at Google.", "2023-05-08 09:00:00")],
        )
        old_id = first["metadata"]["memory_list"][0]["memory_id"]
        second = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[user("I work at Microsoft now.", "2023-05-08 17:00:00")],
        )
        assert second["metadata"]["deleted_memory_ids"] == []
        assert second["metadata"]["invalidated_memory_ids"] == [old_id]
        memories = {m["content"]: m for m in await stored(app, WS)}
        assert set(memories) == {"I WORK AT MICROSOFT NOW.", "I WORK AT GOOGLE."}  # kept, marked no longer true
        assert memories["I WORK AT GOOGLE."]["valid_to"] == "2023-05-08 17:00:00"
        assert memories["I WORK AT MICROSOFT NOW."]["valid_to"] == ""
        contra = [call.prompt for call in llm.calls_of("ContraRepeatOp")]
        assert (
            "1. [2023-05-08 17:00:00] I WORK AT MICROSOFT NOW.\n2. [2023-05-08 09:00:00] I WORK AT GOOGLE."
            in contra[-1]
        )


async def test_llm_batches_keep_every_observation(tmp_path: Path) -> None:
    llm = scripted()
    messages = [user(f"My locker number {i} is painted blue.", f"2023-05-08 09:{i % 60:02d}:00") for i in range(120)]
    async with personal_ops(tmp_path, llm=llm) as app:
        result = await app.async_execute(name="summary_personal_memory", workspace_id=WS, messages=messages)
        assert result["metadata"]["update_result"]["inserted_count"] == 120
        contra = llm.calls_of("ContraRepeatOp")
        assert sorted(len(re.findall(r"^\d+\. ", call.prompt, re.MULTILINE)) for call in contra) == [20, 50, 50]
        scoring = llm.calls_of("InfoFilterOp")
        assert len(scoring) == 6  # batches of 20


async def test_malformed_llm_replies_are_retried_then_502_and_nothing_is_stored(tmp_path: Path) -> None:
    llm = ScriptedLLM().on("InfoFilterOp", score_all).on("GetObservationOp", "Sure! Alice likes tea.")
    async with personal_ops(tmp_path, llm=llm) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[user("I like green tea.", "2023-05-08 09:00:00"), user("I am a nurse.", "2023-05-08 09:01:00")],
        )
        assert result["success"] is False
        error = result["metadata"]["error"]
        assert error["code"] == "llm_error"
        assert "GetObservationOp" in error["message"] and "after 3 attempts" in error["message"]
        assert len(llm.calls_of("GetObservationOp")) == 3
        assert await stored(app, WS) == []


async def test_an_unscored_message_is_re_asked(tmp_path: Path) -> None:
    llm = scripted("Result: 1 | 3")  # the first reply scores only one of two messages
    async with personal_ops(tmp_path, llm=llm) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            messages=[user("I like green tea.", "2023-05-08 09:00:00"), user("I am a nurse.", "2023-05-08 09:01:00")],
        )
        assert result["success"], result
        assert len(result["metadata"]["memory_list"]) == 2
        assert len(llm.calls_of("InfoFilterOp")) == 2


async def test_chinese_prompts_and_chinese_labels(tmp_path: Path) -> None:
    llm = ScriptedLLM().on("InfoFilterOp", "结果：1 | 3\n结果：2 | 3")

    def observe_zh(messages: Sequence[Message]) -> str:
        lines = _LINE_RE.findall(last_prompt(messages))
        return "\n".join(f"信息：{n} | 2023-05-07 | 小明昨天去看了牙医 | 牙医, 医院" for n, _, _ in lines)

    llm.on("GetObservationWithTimeOp", observe_zh)
    llm.on("GetObservationOp", "信息：1 | 小明喜欢喝绿茶 | 绿茶")
    llm.on("ContraRepeatOp", "判断：1 | 无\n判断：2 | 无")
    async with personal_ops(tmp_path, llm=llm) as app:
        result = await app.async_execute(
            name="summary_personal_memory",
            workspace_id=WS,
            user_name="小明",
            language="zh",
            messages=[user("我喜欢喝绿茶。", "2023-05-08 09:00:00"), user("我昨天去看了牙医。", "2023-05-08 09:01:00")],
        )
        assert result["success"], result
        memories = {m["content"]: m for m in await stored(app, WS)}
        assert set(memories) == {"小明喜欢喝绿茶", "小明昨天去看了牙医"}
        assert memories["小明昨天去看了牙医"]["metadata"]["keywords"] == ["牙医", "医院"]
        assert memories["小明昨天去看了牙医"]["metadata"]["event_start"] == "2023-05-07 00:00:00"
        prompts = [call.prompt for call in llm.calls]
        assert any("1. [2023年5月8日 星期一 09:01] 小明: 我昨天去看了牙医。" in p for p in prompts)
