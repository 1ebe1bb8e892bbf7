"""The edge limits of request values (`schema.json_limits`, `schema.paths`) on the generated request models, and the
same path check where paths do not come through a request model (agent tool calls, `Services.resolve_path`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from reme_service.app import ReMeApp
from reme_service.config.models import FlowConfig, InputField
from reme_service.errors import InvalidRequestError
from reme_service.file_roots import FileRoots
from reme_service.ops.working.paths import WorkingRoot
from reme_service.schema.json_limits import INT64_MAX, INT64_MIN, MAX_JSON_DEPTH, check_json_values, find_problem
from reme_service.schema.paths import MAX_COMPONENT_BYTES, path_problem
from reme_service.schema.requests import build_request_model

FLOW = FlowConfig(
    flow_content="X()",
    input_schema={
        "messages": InputField(type="array", items="Message"),
        "items": InputField(type="array", items="object"),
        "offset": InputField(type="integer", minimum=0),
        "path": InputField(type="string", items="FilePath"),
    },
)
Model = build_request_model("limits_demo", FLOW)


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def errors_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(ValidationError) as caught:
        Model.model_validate(body)
    return [dict(e) for e in caught.value.errors()]


@pytest.mark.parametrize(
    ("fits", "too_far"), [(INT64_MAX, INT64_MAX + 1), (INT64_MIN, INT64_MIN - 1), (2**53 + 1, 2**64), (0, 10**400)]
)
def test_the_64_bit_boundary_is_exact_and_names_the_location(fits: int, too_far: int) -> None:
    assert Model.model_validate({"items": [{"a": {"n": fits}}]}).items == [{"a": {"n": fits}}]  # type: ignore[attr-defined]
    (error,) = errors_of({"items": [{"a": {"n": too_far}}]})
    assert error["type"] == "json_integer_range" and error["loc"] == ("items", 0, "a", "n")
    assert len(error["input"]) <= 43  # an excerpt, not the number
    # Keys the flow does not declare stay ignored, whatever they hold.
    assert Model.model_validate({"undeclared": too_far, "other": nested(100)})


def test_nesting_is_counted_from_the_body_and_the_limit_is_inclusive() -> None:
    # body(1) > items(2) > item(3) > nested lists: nested(k) has k lists, the `1` sits at level 3 + k.
    assert Model.model_validate({"items": [{"x": nested(MAX_JSON_DEPTH - 3)}]})
    (error,) = errors_of({"items": [{"x": nested(MAX_JSON_DEPTH - 2)}]})
    assert error["type"] == "json_too_deep" and error["loc"][:3] == ("items", 0, "x")
    (error,) = errors_of({"items": [{"x": nested(5000)}]})  # far past Python's own recursion limit for json.dumps
    assert error["type"] == "json_too_deep"


def test_a_lone_surrogate_is_refused_in_values_and_keys() -> None:
    (error,) = errors_of({"messages": [{"role": "user", "content": "ok \udcff"}]})
    assert error["type"] == "json_invalid_unicode" and error["loc"] == ("messages", 0, "content")
    assert error["input"] == "ok \\udcff"
    (error,) = errors_of({"items": [{"\ud83d": 1}]})
    assert error["loc"] == ("items", 0, "\\ud83d")
    # A valid pair (an emoji) is fine.
    assert Model.model_validate({"items": [{"\U0001f600": "\U0001f600"}]})


def test_models_passed_by_python_callers_are_walked_too() -> None:
    from reme_service.schema.messages import Message, Role

    message = Message(role=Role.USER, content=[{"type": "text", "n": 2**64}])
    (error,) = errors_of({"messages": [message]})
    assert error["loc"] == ("messages", 0, "content", 0, "n")


def test_values_within_the_limits_still_serialise_inside_an_answer() -> None:
    ok = {"a": [INT64_MAX, INT64_MIN, "\U0001f600", 1.5, None, True, nested(MAX_JSON_DEPTH - 2)]}
    assert find_problem(ok) is None
    check_json_values(ok, "demo")
    # An answer echoes request values a few levels deeper than the request held them; orjson still takes them.
    orjson.dumps({"answer": "", "metadata": {"memory_list": [{"metadata": ok}]}})
    for bad in [{"a": INT64_MAX + 1}, {"a": nested(MAX_JSON_DEPTH)}, {"a": "\udc00"}]:
        assert find_problem(bad) is not None
        with pytest.raises(ValidationError):
            check_json_values(bad, "demo")


@pytest.mark.parametrize(
    ("fits", "refused", "reason"),
    [
        ("a.jsonl", "a\x00b", "NUL"),
        ("x" * MAX_COMPONENT_BYTES, "x" * (MAX_COMPONENT_BYTES + 1), "part of 256 bytes"),
        ("dir/" + "é" * 127, "dir/" + "€" * 86, "part of 258 bytes"),  # 254 bytes vs 258 bytes, fewer characters
        ("a/" * 512, "a/" * 600, "at most 1024 bytes"),
        ("../up", "../" + "u" * 256, "part of 256 bytes"),  # where a path points is judged later (403), not here
    ],
)
def test_paths_are_judged_by_what_the_file_system_takes(fits: str, refused: str, reason: str) -> None:
    assert path_problem(fits) is None
    assert Model.model_validate({"path": fits}).path == fits  # type: ignore[attr-defined]
    problem = path_problem(refused)
    assert problem is not None and reason in problem
    (error,) = errors_of({"path": refused})
    assert error["loc"] == ("path",) and reason in error["msg"]


def test_agent_tool_paths_get_the_same_check_as_a_400(tmp_path: Path) -> None:
    root = WorkingRoot(tmp_path.resolve())
    with pytest.raises(InvalidRequestError) as caught:
        root.resolve("s/" + "n" * 300 + ".txt", field="file_path")
    assert "file_path has a part of 304 bytes" in caught.value.message
    assert caught.value.details == {"field": "file_path"}


def test_file_roots_refuse_what_the_file_system_cannot_take(tmp_path: Path) -> None:
    roots = FileRoots.configured([str(tmp_path)])
    for bad in ("lib\x00", str(tmp_path / ("n" * 300))):
        with pytest.raises(InvalidRequestError):
            roots.resolve(bad, write=False)
    assert roots.resolve(str(tmp_path / "lib.jsonl"), write=True) == tmp_path.resolve() / "lib.jsonl"


@pytest.mark.anyio
async def test_the_python_api_answers_the_validation_envelope(tmp_path: Path) -> None:
    async with ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", env={}) as app:
        result = await app.async_execute(
            "summary_working_memory_for_as", messages=[{"role": "user", "content": [{"type": "text", "n": 2**64}]}]
        )
    error = result["metadata"]["error"]
    assert result["success"] is False and error["code"] == "validation_error"
    assert tuple(error["details"]["errors"][0]["loc"]) == ("messages", 0, "content", 0, "n")
