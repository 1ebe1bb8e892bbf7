"""Values the service cannot carry through are refused at the edge, over real HTTP: 422 naming the field, nothing
written. Each case was a 500 found by schemathesis (issue 15): integers past 64 bits, nesting deeper than orjson
serialises and lone surrogates failed when the answer was serialised (after summary_working_memory had written its
files); offset/limit ≥ 2**63 failed in islice; a NUL or an over-long path part failed in the OS call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.schema.json_limits import MAX_JSON_DEPTH
from reme_service.schema.workspace_ids import WORKSPACE_ID_PATTERN
from reme_service.server.mcp import create_mcp_http_app
from reme_service.testing.serve import serve_in_thread
from tests.service.conftest import ServeFn
from tests.sse import next_event

pytestmark = pytest.mark.service

TOOL_OUTPUT = "\n".join(f"line {i}: order {1000 + i} shipped" for i in range(400))
# Small budgets so that the long tool result is offloaded to a file: the old code wrote it, then failed.
COMPACT = {"max_total_tokens": 200, "max_tool_message_tokens": 50, "keep_recent_count": 1}


def offload_messages(extra_block: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "why did order 1237 fail?"}, extra_block]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_log", "type": "function", "function": {"name": "log", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_log", "content": TOOL_OUTPUT},
        {"role": "assistant", "content": "looking"},
        {"role": "user", "content": "and?"},
    ]


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def post_raw(client: httpx.Client, flow: str, body: dict[str, Any]) -> httpx.Response:
    # json.dumps keeps integers of any size and writes lone surrogates as \\udXXX escapes, as a hostile client would.
    return client.post(f"/{flow}", content=json.dumps(body), headers={"content-type": "application/json"})


def only_error(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text[:500]
    detail = response.json()["detail"]
    assert len(detail) == 1, detail
    error: dict[str, Any] = detail[0]
    return error


# -------------------------------------------------------------------------------------------- message content


# The block sits at nesting level 5 of the body: {messages: [{content: [block]}]}; its value one deeper.
BAD_BLOCKS = [
    pytest.param({"type": "text", "n": 2**64}, "json_integer_range", ["n"], id="integer-2**64"),
    pytest.param({"type": "text", "n": 2**63}, "json_integer_range", ["n"], id="integer-2**63"),
    pytest.param({"type": "text", "n": -(2**63) - 1}, "json_integer_range", ["n"], id="integer-below-int64"),
    pytest.param({"type": "text", "x": nested(300)}, "json_too_deep", ["x"], id="nesting-300"),
    pytest.param({"type": "text", "text": "\ud800 broken"}, "json_invalid_unicode", ["text"], id="lone-surrogate"),
    pytest.param({"type": "text", "\udfff": 1}, "json_invalid_unicode", ["\\udfff"], id="surrogate-key"),
]


@pytest.mark.parametrize("flow", ["summary_working_memory", "summary_working_memory_for_as"])
@pytest.mark.parametrize(("block", "error_type", "inner_loc"), BAD_BLOCKS)
def test_content_the_answer_cannot_carry_is_422_and_no_file_is_written(
    serve: ServeFn, tmp_path: Path, flow: str, block: dict[str, Any], error_type: str, inner_loc: list[Any]
) -> None:
    with serve() as client:
        response = post_raw(client, flow, {"messages": offload_messages(block), **COMPACT})
        error = only_error(response)
        assert error["type"] == error_type
        loc = error["loc"]
        assert loc[:6] == ["body", "messages", 0, "content", 1, *inner_loc][:6]
        assert len(json.dumps(error["input"])) < 100  # a short, printable excerpt, never the value itself
    assert files_under(tmp_path / "data" / "working_memory") == []


def test_the_depth_limit_is_exact_and_leaves_room_for_the_answer(serve: ServeFn, tmp_path: Path) -> None:
    # body(1) > messages(2) > message(3) > content(4) > block(5) > x(6..): nested(59) puts the `1` at level 64.
    at_limit = {"type": "text", "x": nested(MAX_JSON_DEPTH - 5), "n": 2**63 - 1, "m": -(2**63)}
    with serve() as client:
        response = post_raw(client, "summary_working_memory", {"messages": offload_messages(at_limit), **COMPACT})
        assert response.status_code == 200, response.text[:500]
        echoed = response.json()["answer"][0]["content"][1]
        assert echoed["n"] == 2**63 - 1 and echoed["m"] == -(2**63) and echoed["x"] == at_limit["x"]
        assert len(files_under(tmp_path / "data" / "working_memory")) == 1  # the offloaded tool result

        one_deeper = {"type": "text", "x": nested(MAX_JSON_DEPTH - 4)}
        body = {"messages": offload_messages(one_deeper), **COMPACT, "store_dir": "deeper"}
        error = only_error(post_raw(client, "summary_working_memory", body))
        assert error["type"] == "json_too_deep" and error["loc"][:6] == ["body", "messages", 0, "content", 1, "x"]
        assert not (tmp_path / "data" / "working_memory" / "deeper").exists()


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"workspace_id": "w", "query": "q", "metadata": {"n": 2**64}}, ["body", "metadata", "n"]),
        ({"workspace_id": "w", "query": "q\udc80"}, ["body", "query"]),
        ({"workspace_id": "w", "query": "q", "metadata": {"a": [nested(70)]}}, ["body", "metadata", "a", 0]),
    ],
)
def test_every_declared_field_is_checked(serve: ServeFn, body: dict[str, Any], loc: list[Any]) -> None:
    with serve() as client:
        assert only_error(post_raw(client, "retrieve_task_memory", body))["loc"][: len(loc)] == loc


def test_memories_that_could_not_be_answered_are_not_stored(serve: ServeFn) -> None:
    memory = {"when_to_use": "w", "content": "c", "metadata": {"deep": nested(200)}}
    with serve() as client:
        error = only_error(
            post_raw(client, "vector_store", {"workspace_id": "w", "action": "insert", "memory_dicts": [memory]})
        )
        assert error["type"] == "json_too_deep" and error["loc"][:5] == ["body", "memory_dicts", 0, "metadata", "deep"]
        listed = post_raw(client, "vector_store", {"workspace_id": "w", "action": "list"}).json()
        assert listed["metadata"]["action_result"] == []


# ------------------------------------------------------------------------------------------ read offset/limit


@pytest.mark.parametrize("field", ["offset", "limit"])
@pytest.mark.parametrize("value", [2**63, 2**64, 1_000_000_001])
def test_read_offset_and_limit_past_their_maximum_are_422(
    serve: ServeFn, tmp_path: Path, field: str, value: int
) -> None:
    root = tmp_path / "data" / "working_memory"
    root.mkdir(parents=True)
    (root / "notes.txt").write_text("one\ntwo\n")
    with serve() as client:
        error = only_error(post_raw(client, "read_working_memory", {"file_path": "notes.txt", field: value}))
        assert error["loc"] == ["body", field]
        # The documented maximum is accepted: an offset past the end is the usual 400, a large limit reads all.
        ok = post_raw(client, "read_working_memory", {"file_path": "notes.txt", field: 1_000_000_000})
        assert ok.status_code == (400 if field == "offset" else 200), ok.text[:300]


# ---------------------------------------------------------------------------------------------------- paths

LONG_PART = "p" * 256
WIDE_PART = "€" * 86  # 86 characters, 258 bytes in UTF-8


@pytest.mark.parametrize(
    ("flow", "body", "field"),
    [
        ("vector_store", {"workspace_id": "w", "action": "dump", "path": "lib\x00x"}, "path"),
        ("vector_store", {"workspace_id": "w", "action": "dump", "path": f"lib/{LONG_PART}"}, "path"),
        ("vector_store", {"workspace_id": "w", "action": "dump", "path": f"{WIDE_PART}.jsonl"}, "path"),
        ("vector_store", {"workspace_id": "w", "action": "load", "path": "lib\x00"}, "path"),
        ("vector_store", {"workspace_id": "w", "action": "load", "path": LONG_PART}, "path"),
        ("vector_store", {"workspace_id": "w", "action": "load", "path": "a/" * 600}, "path"),
        ("read_working_memory", {"file_path": f"{LONG_PART}.txt"}, "file_path"),
        ("read_working_memory", {"file_path": "a\x00b"}, "file_path"),
        ("grep_working_memory", {"file_path": LONG_PART, "pattern": "x"}, "file_path"),
        (
            "summary_working_memory",
            {"messages": offload_messages({"type": "text"}), "store_dir": LONG_PART},
            "store_dir",
        ),
        ("summary_working_memory", {"messages": offload_messages({"type": "text"}), "store_dir": "s\x00"}, "store_dir"),
    ],
)
def test_paths_the_file_system_cannot_take_are_422(
    serve: ServeFn, tmp_path: Path, flow: str, body: dict[str, Any], field: str
) -> None:
    with serve() as client:
        error = only_error(post_raw(client, flow, {**body, **COMPACT}))
        assert error["loc"] == ["body", field] and error["type"] == "file_path"
        assert error["msg"].startswith("path ")
    written = [p for p in files_under(tmp_path) if p.suffix in {".jsonl", ".txt", ".json"}]
    assert written == []


def test_a_255_byte_path_part_still_works(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        post_raw(client, "vector_store", {"workspace_id": "w", "action": "insert", "memory_dicts": [{"content": "c"}]})
        name = "é" * 121 + ".jsonl"  # 242 + 6 = 248 bytes
        dumped = post_raw(client, "vector_store", {"workspace_id": "w", "action": "dump", "path": f"libs/{name}"})
        assert dumped.status_code == 200, dumped.text[:300]
        assert (tmp_path / "data" / "libraries" / "libs" / name).is_file()


# ------------------------------------------------------------------------------------------------- OpenAPI


def constraints(prop: dict[str, Any]) -> dict[str, Any]:
    """The keywords of a property schema, merged over the options of an optional field's `anyOf`."""
    merged = dict(prop)
    for option in prop.get("anyOf", []):
        merged.update(option)
    return merged


def test_openapi_shows_the_enforced_constraints(serve: ServeFn) -> None:
    with serve() as client:
        components = client.get("/openapi.json").json()["components"]["schemas"]
    workspace = components["RetrieveTaskMemoryRequest"]["properties"]["workspace_id"]
    assert workspace["pattern"] == WORKSPACE_ID_PATTERN and workspace["maxLength"] == 256
    read = components["ReadWorkingMemoryRequest"]["properties"]
    for field in ("offset", "limit"):
        assert constraints(read[field])["maximum"] == 1_000_000_000 and constraints(read[field])["minimum"] == 0
    for model, field in [
        ("ReadWorkingMemoryRequest", "file_path"),
        ("GrepWorkingMemoryRequest", "file_path"),
        ("SummaryWorkingMemoryRequest", "store_dir"),
        ("VectorStoreRequest", "path"),
    ]:
        path = constraints(components[model]["properties"][field])
        assert path["pattern"] == "^[^\\x00]*$" and path["maxLength"] == 1024, (model, field)
        assert "255 bytes" in path["description"]


# ------------------------------------------------------------------------------------------ numbers JSON has not


@pytest.mark.parametrize(
    ("number", "reason"),
    [
        ("NaN", "NaN is not JSON"),
        ("-Infinity", "-Infinity is not JSON"),
        ("1e400", "too large for a double"),
        ("-2.5E+400", "too large for a double"),
        ("1" + "0" * 5000, "cannot read"),
    ],
    ids=["nan", "infinity", "overflowing-exponent", "negative-overflowing-exponent", "5001-digit-integer"],
)
def test_numbers_json_cannot_carry_are_400_and_nothing_is_stored(serve: ServeFn, number: str, reason: str) -> None:
    """Python's parser reads NaN, Infinity and 1e400 (as float values that come back as null, a record no read of the
    workspace could then validate) and fails on integers of over 4,300 digits with a bare ValueError (a 500)."""
    record = (
        '{"workspace_id": "nums", "tool_call_results": [{"tool_name": "search", "input": {"q": "x"}, '
        f'"output": "ok", "success": true, "time_cost": {number}, "token_cost": 3}}]}}'
    )
    with serve() as client:
        response = client.post("/add_tool_call_result", content=record, headers={"content-type": "application/json"})
        assert response.status_code == 400, response.text[:300]
        error = response.json()["metadata"]["error"]
        assert error["code"] == "invalid_request" and reason in error["message"], error
        listed = post_raw(client, "vector_store", {"workspace_id": "nums", "action": "list"})
        assert listed.status_code == 200 and listed.json()["metadata"]["action_result"] == []
        good = client.post("/add_tool_call_result", content=record.replace(number, "1.5"))
        assert good.status_code == 200 and good.json()["success"] is True, good.text[:300]
        strings = client.post("/retrieve_tool_memory", json={"workspace_id": "nums", "tool_names": "search"})
        assert strings.status_code == 200 and strings.json()["success"] is True


MCP_INSERT = (
    '{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {{"name": "vector_store", "arguments": '
    '{{"workspace_id": "nums", "action": "insert", "memory_dicts": [{{"when_to_use": "w", "content": "c", '
    '"metadata": {{"x": {number}}}}}]}}}}}}'
)
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.mark.parametrize("number", ["NaN", "-Infinity", "1e400", "1" + "0" * 400 + ".0"])
def test_numbers_json_cannot_carry_are_a_parse_error_over_mcp_too(serve: ServeFn, number: str) -> None:
    """The MCP SDK parses a posted message itself and hands a tool null for NaN, Infinity and numbers past a double
    (stored, and answered as success): the body is read by the flows' parser first, and refused as JSON-RPC
    refuses malformed JSON (400, code -32700); nothing is stored. The same call with 1.5 runs."""
    with serve() as client:
        refused = client.post("/mcp", content=MCP_INSERT.format(number=number), headers=MCP_HEADERS)
        assert refused.status_code == 400, refused.text[:300]
        error = refused.json()["error"]
        assert error["code"] == -32700 and ("not JSON" in error["message"] or "double" in error["message"]), error
        listed = post_raw(client, "vector_store", {"workspace_id": "nums", "action": "list"})
        assert listed.json()["metadata"]["action_result"] == []
        ran = client.post("/mcp", content=MCP_INSERT.format(number="1.5"), headers=MCP_HEADERS)
        assert ran.status_code == 200 and '"isError":false' in ran.text.replace(" ", ""), ran.text[:300]


def test_an_mcp_sse_message_with_nan_is_a_parse_error_when_mcp_serves_alone(tmp_path: Path) -> None:
    """Served alone (`backend=mcp`), without the HTTP edge that reads bodies first: the message is read, refused
    the same way, and nothing reaches the session."""
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    with (
        serve_in_thread(create_mcp_http_app(app, "sse")) as base_url,
        httpx.Client(base_url=base_url, timeout=10) as http,
        http.stream("GET", "/sse") as opened,
    ):
        lines = opened.iter_lines()  # kept: a dropped line iterator closes the stream
        kind, endpoint = next_event(lines)
        assert kind == "endpoint"
        refused = http.post(endpoint, content=MCP_INSERT.format(number="NaN"), headers=MCP_HEADERS)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32700, refused.text[:300]
        accepted = http.post(endpoint, content=MCP_INSERT.format(number="1.5"), headers=MCP_HEADERS)
        assert accepted.status_code == 202  # the well-formed message reaches the session (its reply: on the stream)
