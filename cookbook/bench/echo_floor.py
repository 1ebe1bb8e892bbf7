"""The HTTP floor for run_all.py: a bare FastAPI app served by uvicorn with the service's own server options.

`POST /retrieve_task_memory` parses the JSON body and sends it back three times as `metadata.memory_list`, so
the benchmark client (cookbook/bench/retrieval_speed.py) accepts the answer exactly as it accepts the service's;
`GET /health` answers 200. No validation model, no flow, no store: what is left is uvicorn, Starlette's
routing, FastAPI's endpoint call and one JSON parse and dump, the cost any endpoint of the service pays.

    .venv/bin/python cookbook/bench/echo_floor.py --port 8100
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from reme_service.config.models import HttpConfig

TOP_K = 3


def create_app() -> FastAPI:
    api = FastAPI(title="echo floor")

    @api.get("/health")
    async def health() -> Response:
        return Response(b'{"status":"ok"}', media_type="application/json")

    @api.post("/retrieve_task_memory")
    async def echo(request: Request) -> Response:
        body: Any = orjson.loads(await request.body())
        payload = {"answer": "", "success": True, "metadata": {"memory_list": [body] * TOP_K}}
        return Response(orjson.dumps(payload), media_type="application/json")

    return api


def server_options(http: HttpConfig) -> dict[str, Any]:
    """uvicorn.run's keyword arguments as reme_service.cli passes them (host and port aside)."""
    try:  # the service's own helper, when it has one
        from reme_service.server.http import uvicorn_options  # type: ignore[attr-defined]
    except ImportError:
        return {
            "timeout_keep_alive": http.timeout_keep_alive,
            "limit_concurrency": http.limit_concurrency,
            "access_log": http.access_log,
        }
    return dict(uvicorn_options(http))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="info", **server_options(HttpConfig()))


if __name__ == "__main__":
    main()
