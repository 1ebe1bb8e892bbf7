"""The HTTP adapter: `POST /<flow>` per flow; `GET /health` (200 healthy or degraded, 503 down), `/health/live`,
`/health/ready`; `GET /metrics` (Prometheus); the management API (`manage.py`: `/workspaces/...`) and the memory
browser (`/ui`); jobs (`/jobs/{id}`); OpenAPI at `/docs` (offline); MCP at `/mcp` and `/sse` (`mcp.mount`).
No logic lives here.

Schema errors are FastAPI's 422 `detail` list (echoed inputs cut short); every other failure is the envelope
`{"answer": "", "success": false, "metadata": {"error": {code, message, request_id}}}` with its status: see
`http_errors` (400 malformed JSON, 404, 405), `guard` (408 stalled body, 413 body too large, 503 overloaded) and
`origin_guard` (403 a request from another site's page, 421 a Host a loopback service does not answer).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from reme_service import json_pieces
from reme_service.app import ReMeApp
from reme_service.concurrency import holds_many, off_loop_if
from reme_service.errors import OverloadedError, RateLimitedError, ReMeError
from reme_service.flow.context import FlowResponse
from reme_service.flow.runner import FlowRunner
from reme_service.observe.request_info import current_request
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.query_limit import MAX_QUERY_CHARS
from reme_service.schema.json_limits import MAX_JSON_DEPTH
from reme_service.server.auth_gate import AuthGate
from reme_service.server.body import decode_body
from reme_service.server.docs import STATIC_PREFIX, docs_router, docs_static
from reme_service.server.envelope import request_id_from
from reme_service.server.event_routes import event_router
from reme_service.server.guard import BODY_KEY, EdgeGuard, EdgeLimits
from reme_service.server.http_errors import FLOW_ERROR_RESPONSES, error_response, install_error_handlers
from reme_service.server.job_routes import accept_job, job_router, runs_as_job
from reme_service.server.manage import manage_router
from reme_service.server.mcp import McpEndpoints
from reme_service.server.observer import RequestObserver
from reme_service.server.operator_routes import operator_router
from reme_service.server.origin_guard import OriginGuard, OriginPolicy
from reme_service.server.ui import ui_router
from reme_service.version import __version__

logger = logging.getLogger("reme_service.http")


def _request_id(request: Request) -> str:
    """The request's id: the one `observer.RequestObserver` fixed for it (and logs), else the headers'."""
    info = current_request.get()
    return info.request_id if info is not None else request_id_from(request.scope.get("headers", ()))


class _FlowRoute(Route):
    """A served flow: a plain Starlette route that names itself in the scope (`scope["route"]`) as FastAPI's
    routes do, so the request is counted and logged under its flow (`observer.RequestObserver.route_of`)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


def _flow_endpoint(
    app: ReMeApp, runner: FlowRunner[ServiceContext], offload_bytes: int
) -> Callable[[Request], Awaitable[Response]]:
    """The served endpoint: raw body → request model (`body.decode_body`, off the loop when large) → flow → JSON
    (off the loop when the request or the answer is large)."""

    flow = app.config.flow[runner.name]

    async def endpoint(request: Request) -> Response:
        request_id = _request_id(request)
        raw = request.scope.pop(BODY_KEY, None)  # read by the guard already (taken: the endpoint frees it)
        if not isinstance(raw, bytes):
            raw = await request.body()
        body = await decode_body(raw, runner.request_model, offload_bytes=offload_bytes)
        if runs_as_job(flow, body):  # a background flow asked to run as a job, or one that always does
            return await accept_job(app, runner, body, request)
        # A large request makes a large answer, and so does a small one that asks for much (`list` of a big
        # workspace): then the answer is dumped (`run_validated`), encoded and freed, with the request, off the loop.
        large_request = len(raw) > offload_bytes
        status, payload = await app.run_validated(runner, body, request_id, offload=large_request)
        large = large_request or holds_many(payload.get("answer"), payload.get("metadata"))
        headers = {"x-request-id": request_id, **_retry_after(status, payload)}
        held = [payload, body, raw]
        del payload, body, raw
        content = await off_loop_if(large, _encode_releasing, held, large)
        return Response(content, status_code=status, media_type="application/json", headers=headers)

    endpoint.__name__ = runner.name
    return endpoint


def _retry_after(status: int, payload: dict[str, Any]) -> dict[str, str]:
    """The `Retry-After` header of a flow's 429 (a key at its share of the regex lane, `auth/shares.py`)."""
    if status != 429:
        return {}
    error = (payload.get("metadata") or {}).get("error") or {}
    seconds = (error.get("details") or {}).get("retry_after")
    return {"retry-after": str(seconds)} if isinstance(seconds, int) else {}


def _encode_releasing(held: list[Any], large: bool = True) -> bytes:
    """Encode the payload `held[0]` and drop everything in `held` in this thread (a worker thread for a large one):
    freeing a request and an answer of 100,000 messages is tens of milliseconds the event loop should not spend.
    A `large` payload is encoded in pieces (`json_pieces`), so that this worker thread lets the event loop run."""
    content = json_pieces.encode(held[0]) if large else orjson.dumps(held[0])
    held.clear()
    return content


def _documented_endpoint(runner: FlowRunner[ServiceContext]) -> Callable[..., Awaitable[Response]]:
    """What OpenAPI shows for a flow: the same path with its request model as the body (never served)."""

    async def endpoint(body: Any) -> Response:  # pragma: no cover - documentation only
        raise NotImplementedError

    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=runner.request_model)]
    )
    endpoint.__name__ = runner.name
    return endpoint


def _flow_route(runner: FlowRunner[ServiceContext]) -> dict[str, Any]:
    responses: dict[int | str, Any] = {200: {"model": FlowResponse, "description": "the response envelope"}}
    if "run_async" in runner.request_model.model_fields:  # a background flow (server/job_routes.py)
        responses[202] = {"description": '"async": true: accepted as a job; metadata.job_id, then GET /jobs/{job_id}'}
        responses[409] = {"description": "the Idempotency-Key was used with another request (`conflict`)"}
    missing = list(dict.fromkeys(op.not_found for op in runner.tree.ops() if op.not_found))
    if missing:  # ops that raise NotFoundError
        responses[404] = {"model": FlowResponse, "description": f"not found (`not_found`): {'; '.join(missing)}"}
    return {
        "methods": ["POST"],
        "summary": runner.description or runner.name,
        "response_class": Response,
        "responses": {**responses, **FLOW_ERROR_RESPONSES},
        "name": runner.name,
    }


def _limits_text(app: ReMeApp) -> str:
    """The limits every request meets, enforced at the edge and in the request models (the OpenAPI description);
    a field's own bounds are on the field."""
    http = app.config.http
    rate = f"{http.body_min_rate:g} bytes/s on average after that" if http.body_min_rate else "no rate floor"
    return (
        "Limits on every request: a head of at most "
        f"{http.max_header_bytes} bytes (431); a body of at most {http.max_body_bytes} bytes (413), arriving within "
        f"{http.body_timeout:g} s of its last bytes and at {rate} (408); JSON nested at most {MAX_JSON_DEPTH} deep, "
        "integers within 64 bits, valid Unicode (422). The retrieval flows read the first "
        f"{MAX_QUERY_CHARS} characters of `query` (a longer one is cut; metadata.warning says so)."
    )


def _openapi_of(api: FastAPI, app: ReMeApp) -> Callable[[], dict[str, Any]]:
    """OpenAPI as if each flow took its request model: made once, on first use, by a twin app that only documents
    (the other routes are shared as they are)."""

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            twin = FastAPI(title=api.title, version=api.version, description=_limits_text(app))
            for route in api.routes:
                if not isinstance(route, _FlowRoute):  # the served flows: documented below
                    twin.router.routes.append(route)
            for runner in app.flows.values():
                twin.add_api_route(f"/{runner.name}", _documented_endpoint(runner), **_flow_route(runner))
            api.openapi_schema = twin.openapi()
        return api.openapi_schema

    return openapi


def _install_middleware(api: FastAPI, app: ReMeApp) -> None:
    """Outermost first: RequestObserver > OriginGuard > CORS > AuthGate > EdgeGuard > routes."""
    http = app.config.http
    api.add_middleware(
        EdgeGuard,
        limits=EdgeLimits(
            max_body_bytes=http.max_body_bytes,
            body_timeout=http.body_timeout,
            body_min_rate=http.body_min_rate,
            limit_concurrency=http.limit_concurrency,
            body_budget_bytes=http.body_budget_bytes,
            retry_after=http.retry_after,
        ),
        routes=api.router.routes,  # the same list: routes added below are checked too
        flows=list(app.flows),
        shares=app.shares,
    )
    api.add_middleware(AuthGate, access=app.access)  # outside EdgeGuard: a request without a key is not read
    if http.cors_origins:
        api.add_middleware(
            CORSMiddleware,
            allow_origins=http.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["*"],
        )
    # before anything else reads the request: a rebinding Host or a foreign page's request goes no further (and gets
    # no CORS headers); the policy is decided by the configured bind, so in-process tests get it too
    api.add_middleware(OriginGuard, policy=OriginPolicy.of(http.host, http.allowed_hosts, http.cors_origins))
    # outermost: every answer, the guards' and the gate's included, is timed, counted and logged
    api.add_middleware(RequestObserver, metrics=app.metrics, flows=list(app.flows), access_log=http.access_log)


def create_http_app(app: ReMeApp, *, manage_lifecycle: bool = True) -> FastAPI:
    """Build the FastAPI app. With `manage_lifecycle`, the server's lifespan starts and stops `app`."""

    mcp = McpEndpoints(app, ("streamable-http", "sse"), host=app.config.http.host) if app.config.mcp.mount else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await app.start()
        try:
            async with mcp.lifespan() if mcp is not None else nullcontext():
                yield
        finally:
            if manage_lifecycle:
                await app.stop()

    api = FastAPI(title="ReMe memory service", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    http = app.config.http
    _install_middleware(api, app)
    # The flows first (the router tries routes in order, and flow calls are most of the traffic), each a plain
    # Starlette route: the endpoint reads and validates its body itself, so FastAPI's per-request dependency and
    # response machinery would be work for nothing. OpenAPI documents them through `_openapi_of`.
    for runner in app.flows.values():
        endpoint = _flow_endpoint(app, runner, http.offload_bytes)
        api.router.routes.append(_FlowRoute(f"/{runner.name}", endpoint, methods=["POST"], name=runner.name))
    # Every other route is declared once, on its resource's APIRouter, and included here.
    api.include_router(operator_router(app))  # /health, /health/live, /health/ready, /metrics
    api.include_router(job_router(app))  # GET /jobs/{job_id}
    api.include_router(event_router(app))  # GET /events
    api.mount(STATIC_PREFIX, docs_static(), name="docs-static")
    api.include_router(docs_router(api.title, api.openapi_url or "/openapi.json"))  # /docs, /redoc
    if mcp is not None:  # MCP on the same port and process: one owner of the store
        api.router.routes.extend(mcp.routes)
    api.include_router(manage_router(app))  # /workspaces, /workspaces/{id}/memories[/{memory_id}], export, import
    api.include_router(ui_router())  # the memory browser: GET /ui
    api.openapi = _openapi_of(api, app)  # type: ignore[method-assign]

    install_error_handlers(api, app.flows)

    retry_after = {"retry-after": str(app.config.http.retry_after)}

    @api.exception_handler(ReMeError)
    async def remex_handler(request: Request, exc: ReMeError) -> Response:
        if isinstance(exc, RateLimitedError):  # a key at its share (auth/shares.py)
            return error_response(exc, request, {"retry-after": str(exc.retry_after)})
        return error_response(exc, request, retry_after if isinstance(exc, OverloadedError) else None)

    @api.exception_handler(Exception)
    async def unexpected_handler(request: Request, exc: Exception) -> Response:
        request_id = _request_id(request)
        logger.exception("[%s] unexpected error", request_id)
        error = ReMeError(f"internal error ({type(exc).__name__}); see the server log for request {request_id}")
        return error_response(error, request, request_id=request_id)

    return api
