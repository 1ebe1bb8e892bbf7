"""The OpenAPI document describes every field of every request and response schema we define."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from reme_service.app import ReMeApp
from reme_service.config.models import HttpConfig
from reme_service.ops.common.query_limit import MAX_QUERY_CHARS
from reme_service.ops.vector_store.recall_vector_store_op import MAX_TOP_K
from reme_service.ops.working.file_tools import MAX_PATTERN_CHARS
from reme_service.schema.json_limits import MAX_JSON_DEPTH
from reme_service.schema.paths import MAX_PATH_BYTES
from reme_service.schema.workspace_ids import MAX_ID_CHARS
from reme_service.server.http import create_http_app
from reme_service.server.pages import MAX_LIMIT
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


def _sources(module_name: str) -> str:
    """A module's source and that of the reme_service.ops modules it takes names from (its helpers)."""
    module = sys.modules[module_name]
    helpers: set[str] = {
        str(getattr(value, "__module__", None) or getattr(value, "__name__", ""))
        for value in vars(module).values()
        if inspect.isfunction(value) or inspect.isclass(value) or inspect.ismodule(value)
    }
    names = {module_name, *(name for name in helpers if name.startswith("reme_service.ops."))}
    return "".join(inspect.getsource(sys.modules[name]) for name in sorted(names) if name in sys.modules)


def test_every_route_that_can_answer_404_documents_it(tmp_path: Path) -> None:
    """A flow whose ops (or their helpers) raise NotFoundError, and a route whose module does, list 404 (D22)."""
    app = ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash")
    api = create_http_app(app)
    paths = api.openapi()["paths"]
    undocumented = [
        f"POST /{runner.name} ({type(op).__name__})"
        for runner in app.flows.values()
        for op in runner.tree.ops()
        if "NotFoundError(" in _sources(type(op).__module__)
        and "404" not in paths[f"/{runner.name}"]["post"]["responses"]
    ]
    routes = [
        inner
        for route in api.routes
        for inner in (route.original_router.routes if hasattr(route, "original_router") else [route])
    ]
    for route in routes:
        if (
            isinstance(route, APIRoute)
            and route.include_in_schema
            and "NotFoundError" in _sources(route.endpoint.__module__)
        ):
            for method in route.methods or ():
                if "404" not in paths[route.path_format][method.lower()]["responses"]:
                    undocumented.append(f"{method} {route.path_format}")
    assert not undocumented, undocumented
    assert "404" in paths["/jobs/{job_id}"]["get"]["responses"] and "404" in paths["/vector_store"]["post"]["responses"]


def _field(spec: dict[str, Any], path: str, name: str) -> dict[str, Any]:
    schema = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    model = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    field: dict[str, Any] = model["properties"][name]
    for option in field.get("anyOf", []):  # a nullable field: the constraints are on its non-null branch
        field = {**option, **field}
    return field


# (flow, field, JSON-schema keyword, the limit the code enforces)
FLOW_LIMITS = [
    ("/retrieve_task_memory", "top_k", "maximum", MAX_TOP_K),
    ("/retrieve_task_memory_simple", "top_k", "maximum", MAX_TOP_K),
    ("/retrieve_personal_memory", "top_k", "maximum", MAX_TOP_K),
    ("/retrieve_task_memory", "workspace_id", "maxLength", MAX_ID_CHARS),
    ("/grep_working_memory", "pattern", "maxLength", MAX_PATTERN_CHARS),
    ("/read_working_memory", "file_path", "maxLength", MAX_PATH_BYTES),
    ("/vector_store", "path", "maxLength", MAX_PATH_BYTES),
]


def test_the_openapi_states_the_enforced_limits(tmp_path: Path) -> None:
    """Each limit the code enforces on a request is stated where a client reads it (D22)."""
    spec = create_http_app(ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash")).openapi()
    for path, name, keyword, limit in FLOW_LIMITS:
        assert _field(spec, path, name).get(keyword) == limit, (path, name, keyword)
    wait = next(p for p in spec["paths"]["/jobs/{job_id}"]["get"]["parameters"] if p["name"] == "wait")
    assert wait["schema"]["maximum"] == 60
    assert f"≤ {MAX_LIMIT}" in spec["paths"]["/workspaces"]["get"]["summary"]
    stated = spec["info"]["description"]
    http = HttpConfig()
    for figure in (
        http.max_header_bytes,
        http.max_body_bytes,
        f"{http.body_min_rate:g}",
        MAX_JSON_DEPTH,
        MAX_QUERY_CHARS,
    ):
        assert str(figure) in stated, figure
