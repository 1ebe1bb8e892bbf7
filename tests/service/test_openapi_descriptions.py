"""The OpenAPI document describes every field of every request and response schema we define."""

from __future__ import annotations

import pytest

from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

FASTAPI_OWN = {"HTTPValidationError", "ValidationError"}  # FastAPI's 422 body, not ours


def test_every_schema_field_has_a_description(serve: ServeFn) -> None:
    with serve() as client:
        spec = client.get("/openapi.json").json()
    missing = [
        f"{name}.{field}"
        for name, schema in spec["components"]["schemas"].items()
        if name not in FASTAPI_OWN
        for field, prop in schema.get("properties", {}).items()
        if not prop.get("description")
    ]
    assert missing == []


def test_every_flow_documents_its_response_envelope(serve: ServeFn) -> None:
    with serve() as client:
        spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        if "post" in item and not path.startswith("/workspaces/"):  # the management API's import is not a flow
            ok = item["post"]["responses"]["200"]["content"]["application/json"]["schema"]
            assert ok == {"$ref": "#/components/schemas/FlowResponse"}, path
