"""Flows run as background jobs: a request is checked when it is submitted, queued (`queue.JobQueue`, on disk),
run later as its submitter, and its end published as a `JOB` event (docs/jobs.md).

A job runs its flow through the same path as a request (`RunFlow`: `ReMeApp.run_validated`), with the submitter
as the request's caller (`auth.caller.current_caller`, set for the run as an edge sets it), so it is checked,
audited and metered exactly as the same request made directly.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson
from pydantic import BaseModel

from reme_service.auth.caller import Caller, current_caller
from reme_service.auth.policy import RequestScope
from reme_service.config.models import JobsConfig
from reme_service.errors import NotFoundError, error_envelope
from reme_service.events.bus import EventBus
from reme_service.events.event import Event
from reme_service.flow.runner import FlowRunner
from reme_service.jobs.queue import JobQueue
from reme_service.jobs.record import Job
from reme_service.state.interfaces import JobStore

#: how a job's flow is run: (runner, validated request, request id, offload) -> (HTTP status, body)
RunFlow = Callable[..., Awaitable[tuple[int, dict[str, Any]]]]


class FlowJobs:
    """The jobs of one app: `queue` holds them; `submit` adds one; the queue runs each through `run_flow`."""

    def __init__(
        self,
        config: JobsConfig,
        files: JobStore,
        flows: Mapping[str, FlowRunner[Any]],
        run_flow: RunFlow,
        events: EventBus,
        *,
        stands: Callable[[Caller], bool] | None = None,
        recheck_seconds: float = 1.0,
    ) -> None:
        """`stands`: whether a job's submitter still has the rights it had (`auth.access.Access.still_valid`)."""
        self._flows = flows
        self._run_flow = run_flow
        self._events = events
        self.queue = JobQueue(
            config, files, self._run, on_finished=self._finished, stands=stands, recheck_seconds=recheck_seconds
        )

    async def submit(
        self, runner: FlowRunner[Any], request: BaseModel, scope: RequestScope, *, idempotency_key: str | None
    ) -> tuple[Job, bool]:
        """Queue `request` as a job of `scope`'s caller on its workspace (`scope` resolved and checked as the flow
        would check it: `ReMeApp.request_scope`). Returns the job and whether `idempotency_key` already named it.

        The request is dumped and hashed in a worker thread, whatever its size: the submission waits for a worker
        thread anyway (the job's file, fsynced), so the hop costs nothing that matters, and the size of a request
        is not known here (100,000 messages take seconds of CPU)."""
        body, digest = await asyncio.to_thread(_job_body, runner.name, request)
        return await self.queue.submit(
            flow=runner.name,
            workspace_id=scope.workspace_id,
            request=body,
            caller=scope.caller,
            idempotency_key=idempotency_key,
            body_hash=digest,
        )

    def _finished(self, job: Job) -> None:
        job_info = {"job_id": job.job_id, "status": job.status, "http_status": job.http_status, "flow": job.flow}
        self._events.publish(Event(type="JOB", workspace_id=job.workspace_id, job=job_info, flow=job.flow))

    async def _run(self, job: Job) -> tuple[int, dict[str, Any]]:
        """Run a job's flow as its submitter (the queue calls this). Its request is validated, and its answer
        dumped, in worker threads whatever their size: a job is background work that already waits for worker
        threads (its file is saved at each change), and a stored request's size is unknown (see `submit`)."""
        runner = self._flows.get(job.flow)
        if runner is None:
            return 404, error_envelope(NotFoundError(f"flow {job.flow!r} is no longer served"), job.job_id)
        request = await asyncio.to_thread(_validate, runner.request_model, job.request)
        token = current_caller.set(job.caller)
        try:
            progress = functools.partial(self.queue.progress, job.job_id)
            return await self._run_flow(runner, request, job.job_id, offload=True, progress=progress)
        finally:
            current_caller.reset(token)


def _job_body(flow: str, request: BaseModel) -> tuple[dict[str, Any], str]:
    """A job's request as stored (JSON-ready, without `async`) and the hash an Idempotency-Key replay must match."""
    body = request.model_dump(mode="json", exclude={"run_async"})
    return body, hashlib.sha256(orjson.dumps([flow, body], option=orjson.OPT_SORT_KEYS)).hexdigest()


def _validate(model: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    """A stored job request as its flow's request model (in a worker thread: `FlowJobs._run`)."""
    return model.model_validate(data)
