"""The 422 `detail` excerpts: an echoed input orjson cannot write (an integer past 64 bits) is shown as text."""

from __future__ import annotations

import orjson

from reme_service.server.http_errors import excerpt, short_detail


def test_an_input_with_a_huge_integer_is_echoed_as_text() -> None:
    huge = {"ß": 20321574841849856624761579241472, "workspace_id": "f"}
    shown = excerpt(huge)
    assert shown == '{"ß": 20321574841849856624761579241472, "workspace_id": "f"}'
    detail = short_detail([{"type": "missing", "loc": ("body", "x"), "msg": "Field required", "input": huge}])
    assert orjson.loads(orjson.dumps({"detail": detail}))["detail"][0]["input"] == shown
    assert excerpt({"a": 1}) == {"a": 1} and excerpt("x" * 300) == "x" * 200 + "…"
