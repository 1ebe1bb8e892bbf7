"""What operators and orchestrators poll: `/health` (every client's status: 200 healthy or degraded, 503 down),
`/health/live` (the process answers), `/health/ready` (requests can be served; 503 with the reasons when not) and
`/metrics` (Prometheus text format; behind a key when keys are required)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse, Response

from reme_service.app import ReMeApp
from reme_service.observe.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from reme_service.server.envelope import json_response

SERVING = ("healthy", "degraded")  # degraded: an LLM is unreachable; storage and retrieval still work


def failing_parts(report: dict[str, Any]) -> list[str]:
    """`kind.name: reason` for each client of a health report (`ReMeApp.health`) that is not ok."""
    failing = []
    for kind in ("vector_store", "embedding_model", "llm", "state"):
        for name, info in report.get(kind, {}).items():
            if info.get("status") in ("down", "unreachable"):
                failing.append(f"{kind}.{name}: {info.get('reason') or info['status']}")
    return failing or [f"the service is {report['status']}"]


def operator_router(app: ReMeApp) -> APIRouter:
    """`/health`, `/health/live`, `/health/ready` and `/metrics` of `app`."""
    router = APIRouter()

    @router.get("/health", summary="Service health: each store, embedding model and LLM (503 when down)")
    async def health() -> Response:
        report = await app.health()
        return json_response(report, 200 if report["status"] in SERVING else 503)

    @router.get("/health/live", summary="Liveness: 200 while the process serves requests")
    async def live() -> Response:
        return json_response({"status": "alive"})

    @router.get("/health/ready", summary="Readiness: 200 when requests can be served, else 503 with the reasons")
    async def ready() -> Response:
        report = await app.health()
        if report["status"] in SERVING:
            return json_response({"status": "ready", "health": report["status"]})
        return json_response({"status": "not_ready", "health": report["status"], "reasons": failing_parts(report)}, 503)

    @router.get("/metrics", summary="Prometheus metrics (text format)", response_class=PlainTextResponse)
    async def metrics() -> Response:
        return Response(app.metrics.render(), media_type=METRICS_CONTENT_TYPE)

    return router
