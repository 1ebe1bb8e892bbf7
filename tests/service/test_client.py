"""`reme_service.client` against the real service over HTTP: results, typed errors, retries, flow coverage."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from reme_service.app import ReMeApp
from reme_service.client import (
    AsyncReMeClient,
    FlowResult,
    ReMeClient,
    RequestValidationError,
    ServiceConnectionError,
)
from reme_service.client_flows import FlowMethods
from reme_service.errors import (
    InvalidRequestError,
    LLMError,
    NotFoundError,
    OverloadedError,
    PathNotAllowedError,
    ReMeError,
)
from reme_service.server.http import create_http_app
from reme_service.testing.openai_server import FakeOpenAI
from reme_service.testing.ports import free_port
from reme_service.testing.serve import serve_in_thread
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

MEMORIES = [
    {"when_to_use": "book a flight ticket", "content": "compare prices before booking", "score": 0.9},
    {"when_to_use": "send an email to a contact", "content": "look the contact up first", "score": 0.5},
]
TRAJECTORY = {
    "messages": [
        {"role": "user", "content": "Book the cheapest flight to Oslo"},
        {"role": "assistant", "content": "Compared three airlines and booked the cheapest one."},
    ],
    "score": 1.0,
    "metadata": {"query": "Book the cheapest flight to Oslo"},
}


def _base_url(client: httpx.Client) -> str:
    return str(client.base_url).rstrip("/")


def test_sync_client_round_trip(serve: ServeFn) -> None:
    with serve() as http, ReMeClient(_base_url(http), workspace_id="client_ws") as reme:
        stored = reme.vector_store("insert", memory_dicts=MEMORIES)
        assert isinstance(stored, FlowResult) and stored.success is True
        assert len(stored.metadata["action_result"]["memory_ids"]) == 2
        assert stored.request_id  # the server's x-request-id

        hits = reme.retrieve_task_memory("I want to book a flight", top_k=1)
        assert [m["when_to_use"] for m in hits.memory_list] == ["book a flight ticket"]
        assert "compare prices before booking" in hits.answer

        # the client's default workspace applies; an explicit one wins
        assert reme.retrieve_task_memory("flight", workspace_id="other").memory_list == []
        # generic call and the same request give the same memories
        generic = reme.call("retrieve_task_memory", query="I want to book a flight", top_k=1)
        assert generic.memory_list == hits.memory_list
        assert "retrieve_task_memory" in reme.flows()
        assert reme.health()["status"] == "healthy"


def test_async_client_round_trip(serve: ServeFn) -> None:
    import asyncio

    async def scenario(base_url: str) -> None:
        async with AsyncReMeClient(base_url, workspace_id="async_ws") as reme:
            await reme.vector_store("insert", memory_dicts=MEMORIES)
            a, b = await asyncio.gather(
                reme.retrieve_task_memory("send an email", top_k=1),
                reme.retrieve_task_memory_simple("book a flight", top_k=1),
            )
            assert a.memory_list[0]["when_to_use"] == "send an email to a contact"
            assert "compare prices" in b.answer
            listed = await reme.vector_store("list")
            assert len(listed.metadata["action_result"]) == 2
            with pytest.raises(InvalidRequestError) as info:
                await reme.vector_store("explode")  # type: ignore[arg-type]
            assert info.value.status == 400
            assert "vector_store" in await reme.flows()

    with serve() as http:
        asyncio.run(scenario(_base_url(http)))


def test_summary_with_pydantic_trajectories(serve: ServeFn) -> None:
    from reme_service.schema.messages import Trajectory

    with serve() as http, ReMeClient(_base_url(http), workspace_id="summ") as reme:
        result = reme.summary_task_memory_simple([Trajectory.model_validate(TRAJECTORY)])
        assert result.success is True
        assert result.metadata.get("no_llm_ops")  # the offline path ran and said so
        assert reme.vector_store("list").metadata["action_result"]


def test_errors_are_the_service_types_with_its_message(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as http, ReMeClient(_base_url(http), workspace_id="errs") as reme:
        with pytest.raises(InvalidRequestError) as bad_action:
            reme.vector_store("explode")  # type: ignore[arg-type]
        assert type(bad_action.value) is InvalidRequestError
        assert (bad_action.value.status, bad_action.value.code) == (400, "invalid_request")
        assert "explode" in bad_action.value.message
        assert bad_action.value.details["request_id"]

        with pytest.raises(RequestValidationError) as bad_type:
            reme.retrieve_task_memory("flight", top_k="many")  # type: ignore[arg-type]
        assert bad_type.value.status == 422 and bad_type.value.code == "validation_error"
        assert "top_k" in bad_type.value.message
        assert isinstance(bad_type.value, InvalidRequestError)  # catchable as "bad request"
        assert bad_type.value.details["errors"][0]["loc"] == ["body", "top_k"]

        with pytest.raises(NotFoundError) as unknown:
            reme.no_such_flow(query="x")
        assert unknown.value.status == 404 and "no_such_flow" in unknown.value.message

        with pytest.raises(PathNotAllowedError) as outside:
            reme.vector_store("dump", path="/")
        assert outside.value.status == 403

        with pytest.raises(InvalidRequestError) as bad_workspace:
            reme.retrieve_task_memory("x", workspace_id="../../etc")
        assert "workspace" in bad_workspace.value.message


def test_provider_failure_is_llm_error(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    fake, url = fake_openai, fake_openai.base_url
    with (
        serve("llm.default.max_retries=1", env={"FLOW_LLM_BASE_URL": url}) as http,
        ReMeClient(_base_url(http), workspace_id="llm") as reme,
    ):
        fake.fail_next(10, status=500, message="model crashed", endpoint="chat")
        with pytest.raises(LLMError) as info:
            reme.summary_task_memory_simple([TRAJECTORY])
        assert info.value.status == 502 and "model crashed" in info.value.message
        assert reme.vector_store("list").metadata["action_result"] == []  # nothing stored half-way


def test_non_envelope_error_keeps_status_and_text() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="Service Unavailable")

    http = httpx.Client(transport=httpx.MockTransport(handler))
    with http, ReMeClient("http://svc", http_client=http) as reme, pytest.raises(ReMeError) as info:
        reme.retrieve_task_memory("x")
    assert (info.value.status, info.value.code) == (503, "http_error")
    assert "Service Unavailable" in info.value.message


def test_connection_refused_is_retried_then_raised() -> None:
    port = free_port()
    started = time.monotonic()
    with (
        ReMeClient(f"http://127.0.0.1:{port}", retries=2, backoff=0.05) as reme,
        pytest.raises(ServiceConnectionError) as info,
    ):
        reme.retrieve_task_memory("x")
    assert info.value.details["attempts"] == 3
    assert time.monotonic() - started >= 0.05 + 0.1  # it waited between attempts


@pytest.fixture
def late_server(tmp_path: Path) -> Iterator[tuple[str, threading.Event]]:
    """A server that starts listening ~0.4 s after the test begins, on a port chosen up front."""
    port = free_port()
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    server = uvicorn.Server(uvicorn.Config(create_http_app(app), host="127.0.0.1", port=port, log_level="warning"))
    ready = threading.Event()

    def run() -> None:
        time.sleep(0.4)
        ready.set()
        server.run()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}", ready
    finally:
        server.should_exit = True
        thread.join(10)


def test_connection_retries_reach_a_server_that_comes_up(late_server: tuple[str, threading.Event]) -> None:
    base_url, ready = late_server
    assert not ready.is_set()
    with ReMeClient(base_url, retries=8, backoff=0.1) as reme:
        result = reme.vector_store("list", workspace_id="late")
    assert ready.is_set() and result.success is True


def test_every_flow_has_a_method_whose_fields_the_flow_accepts(tmp_path: Path) -> None:
    app = ReMeApp(f"data_dir={tmp_path}", "embedding_model.default.backend=hash", env={})
    reme = ReMeClient("http://unused")
    try:
        for name, runner in app.flows.items():
            assert callable(getattr(reme, name)), name  # typed, or generic through __getattr__
            method = getattr(FlowMethods, name, None)
            if method is None:
                continue  # a flow newer than the typed methods: reachable generically
            accepted = set(runner.request_model.model_fields)
            named = [
                p.name
                for p in inspect.signature(method).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
            ]
            assert set(named) <= accepted, f"{name}: the client sends {set(named) - accepted}, which the flow ignores"
            required = {f for f, spec in app.config.flow[name].input_schema.items() if spec.required}
            assert required <= set(named), f"{name}: required fields {required - set(named)} lack a parameter"
    finally:
        reme.close()


def _busy_then_ok(busy_times: int, retry_after: str) -> tuple[Starlette, list[float]]:
    """A loopback server that answers the service's `overloaded` 503 `busy_times` times, then a success envelope;
    it records when each request arrived."""
    arrivals: list[float] = []

    async def flow(request: Request) -> JSONResponse:
        arrivals.append(time.monotonic())
        if len(arrivals) <= busy_times:
            error = {"code": "overloaded", "message": "busy", "request_id": "r"}
            body = {"answer": "", "success": False, "metadata": {"error": error}}
            return JSONResponse(body, status_code=503, headers={"retry-after": retry_after})
        return JSONResponse({"answer": "ok", "success": True, "metadata": {}})

    return Starlette(routes=[Route("/vector_store", flow, methods=["POST"])]), arrivals


def test_an_overloaded_answer_is_retried_after_the_servers_retry_after() -> None:
    app, arrivals = _busy_then_ok(2, "0.2")
    with serve_in_thread(app) as base_url, ReMeClient(base_url, retries=3) as reme:
        result = reme.vector_store("list", workspace_id="w")
    assert result.answer == "ok" and len(arrivals) == 3
    assert all(later - earlier >= 0.19 for earlier, later in zip(arrivals, arrivals[1:], strict=False))


def test_overloaded_past_the_retries_raises_overloaded_error() -> None:
    app, arrivals = _busy_then_ok(10, "0")
    with (
        serve_in_thread(app) as base_url,
        ReMeClient(base_url, retries=2) as reme,
        pytest.raises(OverloadedError) as caught,
    ):
        reme.vector_store("list", workspace_id="w")
    assert caught.value.status == 503 and len(arrivals) == 3


@pytest.mark.anyio
async def test_the_async_client_retries_an_overloaded_answer_too() -> None:
    app, arrivals = _busy_then_ok(1, "0")
    with serve_in_thread(app) as base_url:
        async with AsyncReMeClient(base_url, retries=1) as reme:
            result = await reme.vector_store("list", workspace_id="w")
    assert result.answer == "ok" and len(arrivals) == 2
