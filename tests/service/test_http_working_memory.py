"""Working memory over real HTTP: compaction, compression (LLM and extractive), the for_as variant, grep and
read, confinement to the root, every bad input of the contract, and the agent flows driven by the fake LLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.testing.openai_server import FakeOpenAI, FakeReply
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

LOG_LINES = [f"2024-05-14 12:{i // 60:02d}:{i % 60:02d} INFO order {1000 + i} shipped" for i in range(400)]
LOG_LINES[237] = "2024-05-14 12:03:57 ERROR payment 4711 declined by issuer (code CARD_BLOCKED)"
LOG = "\n".join(LOG_LINES)
SNAPSHOT = (
    "<scratchpad>the user debugs payments</scratchpad>\n<state_snapshot>\n<overall_goal>Find the failed "
    "payment</overall_goal>\n<key_knowledge>\n- the log is in s/call_log.txt\n</key_knowledge>\n<recent_actions>\n"
    "- read the log\n</recent_actions>\n</state_snapshot>"
)


def messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a support agent."},
        {"role": "user", "content": "Why did the payment of order 1237 fail?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "call_log", "type": "function", "function": {"name": "read_log", "arguments": '{"day": 14}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_log", "content": LOG},
        {"role": "assistant", "content": "The log is long; I will look for the order."},
        {"role": "user", "content": "Please tell me the error code."},
    ]


def root_of(tmp_path: Path) -> Path:
    return tmp_path / "data" / "working_memory"


def post(client: httpx.Client, flow: str, **body: Any) -> tuple[int, dict[str, Any]]:
    r = client.post(f"/{flow}", json=body)
    return r.status_code, r.json()


COMPACT = {"max_total_tokens": 500, "max_tool_message_tokens": 200, "keep_recent_count": 1}


# ------------------------------------------------------------------------------------------- summary flows


def test_compact_writes_the_tool_output_and_leaves_a_placeholder(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        status, body = post(
            client,
            "summary_working_memory",
            messages=messages(),
            working_summary_mode="compact",
            store_dir="s",
            preview_char_length=20,
            **COMPACT,
        )
        assert status == 200 and body["success"] is True
        answer = body["answer"]
        assert [m["role"] for m in answer] == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert answer[3]["content"] == (
            "tool call=call_log result is stored in file path=`s/call_log.txt`\npreview: 2024-05-14 12:00:00 ..."
        )
        assert answer[3]["tool_call_id"] == "call_log"
        assert answer[2]["tool_calls"][0]["function"] == {"name": "read_log", "arguments": '{"day": 14}'}
        assert (root_of(tmp_path) / "s" / "call_log.txt").read_text() == LOG
        meta = body["metadata"]
        assert meta["write_file_dict"] == {"s/call_log.txt": LOG}
        assert meta["written_files"] == ["s/call_log.txt"]
        summary = meta["working_summary"]
        assert summary["applied"] == "compact" and summary["tokens_after"] < summary["tokens_before"]
        assert "no_llm_ops" not in meta

        # the agent reloads details from the file with the path it was given
        status, body = post(client, "grep_working_memory", file_path="s/call_log.txt", pattern=r"error \w+ \d+")
        assert status == 200
        assert body["answer"] == f"s/call_log.txt:238:{LOG_LINES[237]}"
        status, body = post(client, "read_working_memory", file_path="s/call_log.txt", offset=236, limit=3)
        assert body["answer"].splitlines() == LOG_LINES[236:239]
        assert body["metadata"]["read"] == {
            "file_path": "s/call_log.txt",
            "start_line": 237,
            "lines": 3,
            "has_more": True,
        }


def test_under_budget_the_messages_come_back_unchanged(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        status, body = post(client, "summary_working_memory", messages=messages())
        assert status == 200
        assert [m["content"] for m in body["answer"]] == [m["content"] for m in messages()]
        assert body["metadata"]["write_file_dict"] == {}
        assert body["metadata"]["working_summary"]["applied"] == "none"
        assert not root_of(tmp_path).exists() or not any(root_of(tmp_path).iterdir())


def test_for_as_returns_the_files_and_writes_nothing(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        status, body = post(
            client,
            "summary_working_memory_for_as",
            messages=messages(),
            working_summary_mode="compact",
            store_dir="agent1",
            **COMPACT,
        )
        assert status == 200
        assert body["metadata"]["write_file_dict"] == {"agent1/call_log.txt": LOG}
        assert "written_files" not in body["metadata"]
        assert not (root_of(tmp_path) / "agent1").exists()


def test_compress_without_llm_is_extractive_and_says_so(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        status, body = post(
            client,
            "summary_working_memory",
            messages=messages(),
            working_summary_mode="compress",
            max_total_tokens=500,
            keep_recent_count=1,
            store_dir="s",
            chat_id="chat1",
            group_token_threshold=1000,
        )
        assert status == 200, body
        answer = body["answer"]
        assert [m["role"] for m in answer] == ["system", "assistant", "user"]
        text = answer[1]["content"]
        assert text.startswith("[Compressed conversation history - Part 0/3]\nExtractive snapshot (no LLM")
        assert "<overall_goal>\nWhy did the payment of order 1237 fail?\n</overall_goal>" in text
        assert "(Original 2 messages are stored in: s/chat1_0.json)" in text
        assert "[Compressed conversation history - Part 2/3]" in text
        assert body["metadata"]["no_llm_ops"] == ["MessageOffloadOp"]
        archive = json.loads((root_of(tmp_path) / "s" / "chat1_1.json").read_text())
        assert archive == [{"role": "tool", "content": LOG, "reasoning_content": "", "tool_call_id": "call_log"}]


def test_compress_with_the_llm_uses_its_snapshot(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.on_op("MessageOffloadOp", SNAPSHOT)
    with serve("llm.default.max_retries=0", env={"FLOW_LLM_BASE_URL": url}) as client:
        status, body = post(
            client,
            "summary_working_memory",
            messages=messages(),
            working_summary_mode="auto",
            compact_ratio_threshold=0.01,
            store_dir="s",
            chat_id="c",
            **COMPACT,
        )
        assert status == 200, body
        text = body["answer"][1]["content"]
        assert text.startswith("[Compressed conversation history - Part 0/1]\n<overall_goal>Find the failed payment")
        assert text.endswith("(Original 4 messages are stored in: s/c_0.json)\n")
        assert "no_llm_ops" not in body["metadata"]
        assert body["metadata"]["working_summary"]["applied"] == "compact+compress"
        assert sorted(body["metadata"]["written_files"]) == ["s/c_0.json", "s/call_log.txt"]
        assert fake.ops == ["MessageOffloadOp"]
        prompt = fake.requests_to("chat")[0]["messages"][0]["content"]
        assert "Why did the payment of order 1237 fail?" in prompt
        assert "result is stored in file path=`s/call_log.txt`" in prompt  # compacted before compression


def test_bad_snapshots_and_llm_outages_are_502_and_write_nothing(
    serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake, url = fake_openai, fake_openai.base_url
    body_args = {"messages": messages(), "working_summary_mode": "compress", "store_dir": "s", **COMPACT}
    with serve("llm.default.max_retries=0", env={"FLOW_LLM_BASE_URL": url}) as client:
        fake.on_op("MessageOffloadOp", "Sure! The user wanted something.")
        status, body = post(client, "summary_working_memory", **body_args)
        assert status == 502
        assert "did not follow the expected format after 3 attempts" in body["metadata"]["error"]["message"]
        assert fake.ops == ["MessageOffloadOp"] * 3
        fake.reset()
        fake.fail_next(5, status=500, message="model crashed", endpoint="chat")
        status, body = post(client, "summary_working_memory", **body_args)
        assert status == 502 and "model crashed" in body["metadata"]["error"]["message"]
    assert not (root_of(tmp_path) / "s").exists()


def test_configured_root_is_used(serve: ServeFn, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    with serve(f"working_memory_dir={elsewhere}") as client:
        status, _ = post(
            client, "summary_working_memory", messages=messages(), working_summary_mode="compact", **COMPACT
        )
        assert status == 200
        assert (elsewhere / "call_log.txt").read_text() == LOG
        assert post(client, "read_working_memory", file_path="call_log.txt", limit=1)[1]["answer"] == LOG_LINES[0]


# ------------------------------------------------------------------------------------------------- bad input


def test_invalid_mode_is_400_listing_the_modes(serve: ServeFn) -> None:
    with serve() as client:
        for flow in ("summary_working_memory", "summary_working_memory_for_as"):
            status, body = post(client, flow, messages=messages(), working_summary_mode="shrink")
            assert status == 400, flow
            assert body["success"] is False and body["answer"] == ""
            assert "valid modes: compact, compress, auto" in body["metadata"]["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("compact_ratio_threshold", 0),
        ("compact_ratio_threshold", -0.5),
        ("compact_ratio_threshold", 1.5),
        ("max_total_tokens", 0),
        ("max_total_tokens", -100),
        ("max_tool_message_tokens", 0),
        ("max_tool_message_tokens", -1),
        ("group_token_threshold", -1),
        ("keep_recent_count", -1),
        ("preview_char_length", -5),
    ],
)
def test_out_of_range_knobs_are_422(serve: ServeFn, field: str, value: float) -> None:
    with serve() as client:
        r = client.post("/summary_working_memory", json={"messages": messages(), field: value})
        assert r.status_code == 422
        assert r.json()["detail"][0]["loc"] == ["body", field]


def test_messages_that_are_not_openai_style_are_422(serve: ServeFn) -> None:
    bad_lists: list[Any] = [
        "just a string",
        ["a string item"],
        [{"role": "robot", "content": "hi"}],
        [{"role": "user", "content": 42}],
        [{"role": "assistant", "content": "", "tool_calls": "call it"}],
        [{"role": "assistant", "content": "", "tool_calls": [{"id": 7, "function": {"name": "f"}}]}],
        [{"role": "tool", "content": "x", "tool_call_id": ["not", "a", "string"]}],
    ]
    with serve() as client:
        assert client.post("/summary_working_memory", json={}).status_code == 422  # messages is required
        for bad in bad_lists:
            r = client.post("/summary_working_memory", json={"messages": bad})
            assert r.status_code == 422, bad
            assert r.json()["detail"][0]["loc"][:2] == ["body", "messages"]


def test_paths_outside_the_root_are_403(serve: ServeFn, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("password=hunter2\n")
    root = root_of(tmp_path)
    root.mkdir(parents=True)
    (root / "escape").symlink_to(outside, target_is_directory=True)
    with serve() as client:
        for store_dir in ("../outside", "/etc", str(outside), "escape", "a/../../.."):
            status, body = post(client, "summary_working_memory", messages=messages(), store_dir=store_dir, **COMPACT)
            assert status == 403, store_dir
            assert body["metadata"]["error"]["code"] == "path_not_allowed"
        for file_path in ("../../outside/secret.txt", str(outside / "secret.txt"), "escape/secret.txt", "/etc/passwd"):
            status, body = post(client, "grep_working_memory", file_path=file_path, pattern="password")
            assert status == 403, file_path
            assert "hunter2" not in json.dumps(body)
            status, _ = post(client, "read_working_memory", file_path=file_path)
            assert status == 403, file_path
        # a hostile tool_call_id only names a file inside the root
        hostile = messages()
        hostile[2]["tool_calls"][0]["id"] = hostile[3]["tool_call_id"] = "../../outside/pwned"
        status, body = post(
            client, "summary_working_memory", messages=hostile, working_summary_mode="compact", **COMPACT
        )
        assert status == 200
        assert list(body["metadata"]["write_file_dict"]) == ["_.._outside_pwned.txt"]
        assert (root / "_.._outside_pwned.txt").is_file()
        assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_grep_and_read_errors(serve: ServeFn, tmp_path: Path) -> None:
    root = root_of(tmp_path)
    (root / "s").mkdir(parents=True)
    (root / "s" / "notes.txt").write_text("alpha (beta)\nGamma\n")
    with serve() as client:
        status, body = post(client, "grep_working_memory", file_path="s/missing.txt", pattern="x")
        assert status == 404 and body["success"] is False
        status, body = post(client, "grep_working_memory", file_path="s/notes.txt", pattern="(beta")
        assert status == 400 and "invalid regular expression" in body["metadata"]["error"]["message"]
        status, body = post(client, "grep_working_memory", file_path="s/notes.txt", pattern="(beta", literal=True)
        assert (status, body["answer"]) == (200, "s/notes.txt:1:alpha (beta)")
        status, body = post(
            client, "grep_working_memory", file_path="s/notes.txt", pattern="gamma", case_sensitive=True
        )
        assert body["answer"] == 'No matches found for pattern "gamma" in file_path "s/notes.txt".'
        assert body["metadata"]["grep"]["matches"] == 0
        assert post(client, "grep_working_memory", file_path="s", pattern="x")[0] == 400
        assert post(client, "grep_working_memory", file_path="s/notes.txt", pattern="x", limit=0)[0] == 422
        assert client.post("/grep_working_memory", json={"file_path": "s/notes.txt"}).status_code == 422
        assert post(client, "read_working_memory", file_path="s/missing.txt")[0] == 404
        status, body = post(client, "read_working_memory", file_path="s/notes.txt", offset=10, limit=5)
        assert status == 400 and "which has 2 lines" in body["metadata"]["error"]["message"]
        assert post(client, "read_working_memory", file_path="s/notes.txt", offset=-1)[0] == 422
        status, body = post(client, "read_working_memory", file_path="s/notes.txt", offset=0, limit=0)
        assert body["answer"] == "alpha (beta)\nGamma"


# ------------------------------------------------------------------------------------------------ agent flows


def test_agentic_retrieve_greps_and_reads_its_offloaded_context(
    serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.script(
        FakeReply(tool_calls=[("Grep", {"file_path": "run/call_log.txt", "pattern": r"error payment \d+"})]),
        FakeReply(
            content="Reading around the hit.",
            tool_calls=[
                ("ReadFile", {"file_path": "run/call_log.txt", "offset": 236, "limit": 3}),
                ("Shell", {"cmd": "cat /etc/passwd"}),
                ("ReadFile", {"file_path": "../../outside.txt"}),
            ],
        ),
        FakeReply(content="The payment was declined by the issuer: error 4711 (CARD_BLOCKED)."),
    )
    with serve(env={"FLOW_LLM_BASE_URL": url}) as client:
        status, body = post(
            client, "agentic_retrieve", messages=messages(), working_summary_mode="compact", store_dir="run", **COMPACT
        )
        assert status == 200, body
        assert body["answer"] == "The payment was declined by the issuer: error 4711 (CARD_BLOCKED)."
        meta = body["metadata"]
        assert (meta["steps"], meta["tool_calls"], meta["stopped"]) == (3, 4, "answered")
        assert meta["written_files"] == ["run/call_log.txt"]
        assert (root_of(tmp_path) / "run" / "call_log.txt").read_text() == LOG

    requests = fake.requests_to("chat")
    assert len(requests) == 3
    assert fake.ops == ["AgenticRetrieveOp"] * 3
    assert {t["function"]["name"] for t in requests[0]["tools"]} == {"Grep", "ReadFile"}
    first = requests[0]["messages"]
    assert first[0]["role"] == "system" and "Grep" in first[0]["content"]
    assert LOG not in json.dumps(first)  # the model never saw the raw log
    assert any("result is stored in file path=`run/call_log.txt`" in str(m.get("content")) for m in first)
    tool_outputs = [m["content"] for m in requests[2]["messages"] if m["role"] == "tool"]
    assert f"run/call_log.txt:238:{LOG_LINES[237]}" in tool_outputs
    assert "\n".join(LOG_LINES[236:239]) + "\n(more lines follow; continue with offset=239)" in tool_outputs
    assert "Error: unknown tool 'Shell'; available tools: Grep, ReadFile" in tool_outputs
    assert any(o.startswith("Error: file_path '../../outside.txt' resolves outside") for o in tool_outputs)
    # every tool call got exactly one result, in the transcript returned to the client too
    transcript = meta["messages"]
    call_ids = [c["id"] for m in transcript for c in m.get("tool_calls", [])]
    result_ids = [m["tool_call_id"] for m in transcript if m["role"] == "tool"]
    assert sorted(result_ids) == sorted([*call_ids])


def test_agentic_retrieve_stops_at_max_steps(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    fake.default_reply = FakeReply(tool_calls=[("Grep", {"file_path": "nothing.txt", "pattern": "x"})])
    overlay = tmp_path / "steps.yaml"
    overlay.write_text("flow:\n  agentic_retrieve:\n    flow_content: AgenticRetrieveOp(max_steps=2)\n")
    with serve(f"config={overlay}", env={"FLOW_LLM_BASE_URL": url}) as client:
        status, body = post(client, "agentic_retrieve", messages=messages())
        assert status == 200
        assert (body["metadata"]["steps"], body["metadata"]["stopped"]) == (2, "max_steps")
        assert body["metadata"]["messages"][-1]["content"].startswith("Error: file 'nothing.txt' does not exist")


def test_agent_flows_without_an_llm_are_400(serve: ServeFn) -> None:
    with serve() as client:
        status, body = post(client, "agentic_retrieve", messages=messages())
        assert status == 400 and "needs an LLM" in body["metadata"]["error"]["message"]


def test_react_without_a_search_tool_is_400(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overlay = tmp_path / "react.yaml"
    overlay.write_text("flow:\n  react:\n    flow_content: ReactSearchOp(search_tool='')\n")
    with serve(f"config={overlay}", env={"FLOW_LLM_BASE_URL": url}) as client:
        status, body = post(client, "react", query="What is the capital of France?")
        assert status == 400
        message = body["metadata"]["error"]["message"]
        assert "no search tool configured" in message and "search_tool='vector_store'" in message
    assert fake.requests_to("chat") == []


def test_react_with_the_vector_store_search_tool(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    fake, url = fake_openai, fake_openai.base_url
    overlay = tmp_path / "react.yaml"
    overlay.write_text("flow:\n  react:\n    flow_content: ReactSearchOp(search_tool='vector_store', top_k=2)\n")
    fake.script(
        FakeReply(tool_calls=[("search_memory", {"query": "book a flight ticket"}), ("search_memory", {})]),
        FakeReply(content="Compare prices before booking."),
    )
    with serve(f"config={overlay}", env={"FLOW_LLM_BASE_URL": url}) as client:
        r = client.post(
            "/vector_store",
            json={
                "workspace_id": "ws",
                "action": "insert",
                "memory_dicts": [
                    {"when_to_use": "book a flight ticket", "content": "compare prices before booking"},
                    {"when_to_use": "update the user profile", "content": "open settings first"},
                ],
            },
        )
        assert r.status_code == 200
        status, body = post(client, "react", workspace_id="ws", query="How should I book a flight?")
        assert status == 200, body
        assert body["answer"] == "Compare prices before booking."
        assert (body["metadata"]["steps"], body["metadata"]["tool_calls"]) == (2, 2)
        status, body = post(client, "react", query=None, messages=None)  # null is accepted, as in ReMe
        assert status == 400 and "nothing to answer" in body["metadata"]["error"]["message"]
    assert fake.ops == ["ReactSearchOp"] * 2
    second = fake.requests_to("chat")[1]["messages"]
    outputs = [m["content"] for m in second if m["role"] == "tool"]
    assert outputs[0].startswith("[1] relevance ")
    assert "when to use: book a flight ticket\n    compare prices before booking" in outputs[0]
    assert outputs[1] == "Error: argument 'query' is required"
    assert "search_memory" in second[0]["content"]  # the role prompt names the tool


@pytest.mark.parametrize("flow_content", [None, "SimpleReactOp()"])  # the packaged flow, and ReMe's default.yaml's
def test_react_answers_with_an_llm_alone_as_reme_does(
    serve: ServeFn, fake_openai: FakeOpenAI, flow_content: str | None
) -> None:
    """ReMe's `POST /react {"query": ...}` answers 200 with `answer` and `metadata.messages`; its web search needed a
    DashScope key, the stand-in here is the workspace's memories (nothing stored: the tool says so)."""
    fake, url = fake_openai, fake_openai.base_url
    fake.script(
        FakeReply(tool_calls=[("search_memory", {"query": "Xiaomi Corporation"})]),
        FakeReply(content="Xiaomi makes phones and electric cars."),
    )
    overrides = [f"flow.react.flow_content={flow_content}"] if flow_content else []
    with serve(*overrides, env={"FLOW_LLM_BASE_URL": url}) as client:
        r = client.post("/react", json={"query": "Analyze Xiaomi Corporation"})
        assert r.status_code == 200, r.text
        body = r.json()
    assert body["success"] is True and body["answer"] == "Xiaomi makes phones and electric cars."
    roles = [m["role"] for m in body["metadata"]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert body["metadata"]["messages"][3]["content"] == "No stored memory matches 'Xiaomi Corporation'."
