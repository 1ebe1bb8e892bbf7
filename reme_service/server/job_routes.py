"""Jobs over HTTP: a background flow's request with `"async": true` is answered 202 with its job id
(`accept_job`), and `GET /jobs/{job_id}[?wait=S]` tells how it is going (docs/jobs.md).

A job is visible only to callers whose key covers its workspace; to others it does not exist (404), so job ids
say nothing about other workspaces. The `Idempotency-Key` header (1-255 printable characters) makes a retried
submission return the job of the first one. A key may have `auth.per_key.jobs` jobs queued at once; past it a
submission is 429 with Retry-After (a replay of a known Idempotency-Key too).
"""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from reme_service import json_pieces
from reme_service.app import ReMeApp
from reme_service.auth.caller import caller_now
from reme_service.auth.policy import visible
from reme_service.auth.shares import share_refused
from reme_service.concurrency import holds_many, off_loop_if
from reme_service.config.models import FlowConfig
from reme_service.errors import InvalidRequestError, NotFoundError, ReMeError
from reme_service.flow.runner import FlowRunner
from reme_service.jobs.record import Job
from reme_service.ops.common.context import ServiceContext
from reme_service.server.envelope import json_response, request_id_from
from reme_service.server.http_errors import error_response

IDEMPOTENCY_HEADER = "idempotency-key"


def _idempotency_key(request: Request) -> str | None:
    value = request.headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    if not 1 <= len(value) <= 255 or not value.isprintable():
        raise InvalidRequestError("the Idempotency-Key header must be 1-255 printable characters")
    return value


def runs_as_job(flow: FlowConfig, body: BaseModel) -> bool:
    """Whether an HTTP request of `flow` becomes a job: it says `"async": true`, or its flow's `job_when` says so
    (`vector_store` with `action: reembed`)."""
    if getattr(body, "run_async", False):
        return True
    return any(getattr(body, field, None) in values for field, values in flow.job_when.items())


async def accept_job(app: ReMeApp, runner: FlowRunner[ServiceContext], body: BaseModel, request: Request) -> Response:
    """Queue the validated `body` as a job and answer 202 (200 when the Idempotency-Key names a known job). A
    submission refused (its workspace or scope not the key's: 403; a bad workspace id: 400; too many jobs: 503) is
    audited as the same request sent without `"async"` would be (`AuditRecorder.flow_done`)."""
    idempotency_key = _idempotency_key(request)
    request_id = request_id_from(request.scope.get("headers", ()))
    caller = caller_now()
    try:
        bound = app.config.auth.per_key.jobs
        if app.jobs.queue.queued_of(caller.key_id) >= bound:  # one key's backlog does not take every key's queue
            raise share_refused("queued jobs", bound, "auth.per_key.jobs", app.shares.retry_after)
        scope = app.request_scope(runner, body)
        job, known = await app.jobs.submit(runner, body, scope, idempotency_key=idempotency_key)
    except ReMeError as error:
        trail = app.audit.new_trail(request_id, runner.name)
        await app.audit.flow_done(runner.name, body, request_id, trail, error.code, caller)
        raise
    envelope = {
        "answer": "",
        "success": True,
        "metadata": {"job_id": job.job_id, "status": job.status, "idempotent_replay": known},
        "job_id": job.job_id,
    }
    return json_response(
        envelope, 200 if known else 202, request_id=request_id, headers={"location": f"/jobs/{job.job_id}"}
    )


def job_router(app: ReMeApp) -> APIRouter:
    """`GET /jobs/{job_id}` of `app`."""
    router = APIRouter()

    @router.get(
        "/jobs/{job_id}",
        summary="A background job: status, timings and, once finished, the flow's answer",
        responses={404: {"description": "no such job, or not one of the key's workspaces (the error envelope)"}},
    )
    async def get_job(
        request: Request,
        job_id: str,
        wait: float = Query(0, ge=0, le=60, description="seconds to wait for the job to finish (long poll)"),
    ) -> Response:
        job = await app.jobs.queue.get(job_id)
        if job is None or not visible(caller_now(), job.workspace_id):
            return error_response(NotFoundError(f"no job {job_id!r}"), request)
        job = await app.jobs.queue.wait(job_id, wait) or job
        result = job.result or {}  # a finished job's answer: encoded off the loop when large, as a flow's
        large = holds_many(result.get("answer"), result.get("metadata"))
        return Response(await off_loop_if(large, _view_json, job, large), media_type="application/json")

    return router


def _view_json(job: Job, large: bool = True) -> bytes:
    """What `GET /jobs/{job_id}` answers, as JSON (`Job.view`); a `large` one in pieces (`json_pieces`)."""
    return json_pieces.encode(job.view()) if large else orjson.dumps(job.view())
