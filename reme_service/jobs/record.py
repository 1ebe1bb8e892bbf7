"""`Job`: one background flow run, as persisted and as `GET /jobs/{job_id}` shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from reme_service.auth.caller import Caller

JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
MAX_ATTEMPTS = 2  # a job a restart interrupted runs once more; interrupted again, it fails


def now() -> datetime:
    return datetime.now(UTC)


class JobProgress(BaseModel):
    """How far a running job is: `done` of `total` rows (None while unknown). Kept in the memory of the process
    running the job (not written to its file on each step); its last value is saved when the job ends."""

    done: int = 0
    total: int | None = None
    unit: Literal["rows"] = "rows"


class Job(BaseModel):
    job_id: str
    flow: str
    workspace_id: str
    status: JobStatus = "queued"
    request: dict[str, Any] = Field(description="the validated request, as the flow received it")
    caller: Caller = Field(description="who submitted it: the job runs with that key's rights")
    idempotency_key: str | None = None
    body_hash: str = ""
    attempts: int = 0
    queued_at: datetime = Field(default_factory=now)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    http_status: int | None = None
    result: dict[str, Any] | None = Field(default=None, description="the envelope the synchronous call returns")
    reason: str | None = Field(
        default=None, description="why the job was cancelled, or its request and result erased (None otherwise)"
    )
    progress: JobProgress | None = Field(default=None, description="rows done/total, for a flow that reports it")

    @property
    def finished(self) -> bool:
        return self.status in ("done", "failed", "cancelled")

    def cancelled(self, reason: str, *, http_status: int | None = None, result: dict[str, Any] | None = None) -> Job:
        """This job cancelled, `reason` saying why, without its request; its answer `result` (an error envelope
        holding no request text) with `http_status`."""
        changes = {"request": {}, "result": result, "http_status": http_status, "reason": reason}
        return self.model_copy(update={**changes, "status": "cancelled", "finished_at": self.finished_at or now()})

    def scrubbed(self, reason: str) -> Job:
        """This (finished) job without its request and result, `reason` saying why."""
        return self.model_copy(update={"request": {}, "result": None, "reason": reason})

    def view(self) -> dict[str, Any]:
        """What `GET /jobs/{job_id}` answers (never the request body nor the key)."""
        timings: dict[str, Any] = {"queued_at": self.queued_at.isoformat()}
        if self.started_at is not None:
            timings["started_at"] = self.started_at.isoformat()
            timings["queue_seconds"] = round((self.started_at - self.queued_at).total_seconds(), 3)
        if self.finished_at is not None:
            timings["finished_at"] = self.finished_at.isoformat()
            if self.started_at is not None:
                timings["run_seconds"] = round((self.finished_at - self.started_at).total_seconds(), 3)
        return {
            "job_id": self.job_id,
            "status": self.status,
            "flow": self.flow,
            "workspace_id": self.workspace_id,
            "attempts": self.attempts,
            "http_status": self.http_status,
            "result": self.result,
            "reason": self.reason,
            "timings": timings,
            "progress": self.progress.model_dump() if self.progress is not None else None,
        }
