"""The HTTP adapter: `POST /<flow>` per flow, `GET /health`, OpenAPI at `/docs`. No logic lives here.

Schema errors are FastAPI's 422 `detail` list (echoed inputs cut short); every other failure is the envelope
`{"answer": "", "success": false, "metadata": {"error": {code, message, request_id}}}` with its status: see
`http_errors` (400 malformed JSON, 404, 405) and `guard` (408 stalled body, 413 body too large, 503 overloaded).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import Response

from reme_service import __version__
from reme_service.app import ReMeApp
from reme_service.errors import ReMeError
from reme_service.flow.context import FlowResponse
from reme_service.flow.runner import FlowRunner
from reme_service.server.envelope import request_id_from
from reme_service.server.guard import EdgeGuard, EdgeLimits
from reme_service.server.http_errors import FLOW_ERROR_RESPONSES, error_response, install_error_handlers

logger = logging.getLogger("reme_service.http")


def _json(body: Any, status: int = 200, request_id: str | None = None) -> Response:
    headers = {"x-request-id": request_id} if request_id else None
    return Response(orjson.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _request_id(request: Request) -> str:
    return request_id_from(request.scope.get("headers", ()))


def _flow_endpoint(app: ReMeApp, runner: FlowRunner) -> Callable[..., Awaitable[Response]]:
    async def endpoint(request: Request, body: Any) -> Response:
        request_id = _request_id(request)
        status, payload = await app.run_validated(runner, body, request_id)
        return _json(payload, status, request_id)

    # FastAPI reads the body model from the signature; each flow gets its own generated model.
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
            inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=runner.request_model),
        ]
    )
    endpoint.__name__ = runner.name
    return endpoint


def create_http_app(app: ReMeApp, *, manage_lifecycle: bool = True) -> FastAPI:
    """Build the FastAPI app. With `manage_lifecycle`, the server's lifespan starts and stops `app`."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            await app.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                await app.stop()

    api = FastAPI(title="ReMe memory service", version=__version__, lifespan=lifespan)
    http = app.config.http
    api.add_middleware(
        EdgeGuard,
        limits=EdgeLimits(
            max_body_bytes=http.max_body_bytes,
            body_timeout=http.body_timeout,
            limit_concurrency=http.limit_concurrency,
            retry_after=http.retry_after,
        ),
    )
    if app.config.http.cors_origins:
        api.add_middleware(
            CORSMiddleware,
            allow_origins=app.config.http.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["*"],
        )

    @api.get("/health", summary="Service health: status of the store and providers")
    async def health() -> Response:
        return _json(await app.health())

    for runner in app.flows.values():
        api.add_api_route(
            f"/{runner.name}",
            _flow_endpoint(app, runner),
            methods=["POST"],
            summary=runner.description or runner.name,
            response_class=Response,
            responses={200: {"model": FlowResponse, "description": "the response envelope"}, **FLOW_ERROR_RESPONSES},
            name=runner.name,
        )

    install_error_handlers(api, app.flows)

    @api.exception_handler(ReMeError)
    async def remex_handler(request: Request, exc: ReMeError) -> Response:
        return error_response(exc, request)

    @api.exception_handler(Exception)
    async def unexpected_handler(request: Request, exc: Exception) -> Response:
        request_id = _request_id(request)
        logger.exception("[%s] unexpected error", request_id)
        error = ReMeError(f"internal error ({type(exc).__name__}); see the server log for request {request_id}")
        return error_response(error, request, request_id=request_id)

    return api
