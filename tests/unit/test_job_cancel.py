"""`JobQueue` and the rights of a job: acknowledged only once durable, cancelled when its key is revoked (queued or
at its next write), erased with its workspace, and not run twice after it began writing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from reme_service.auth.caller import Caller
from reme_service.config.models import JobsConfig
from reme_service.jobs.files import JobFiles
from reme_service.jobs.queue import ERASED, REVOKED, JobQueue
from reme_service.jobs.record import Job
from reme_service.storage.writer import pass_write_gate
from tests.conditions import until
from tests.contract.test_local_store import FsyncRecorder, contents_synced, name_synced

pytestmark = pytest.mark.anyio

KEY = Caller(key_id="k1", name="one", scope="write", workspaces=("ws",))
SECRET = "zq-job-secret-7c1"


class Flow:
    """The execute function: a flow that waits to be released, then makes one store write (through the real write
    gate, as `GuardedStore` does) and answers with the request's text."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.writes: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, job: Job) -> tuple[int, dict[str, Any]]:
        self.started.append(job.job_id)
        await self.release.wait()
        try:
            await pass_write_gate()
        except Exception as exc:  # as `ReMeApp.run_validated` answers a refused write  # noqa: BLE001
            return 403, {"answer": "", "success": False, "metadata": {"error": str(exc)}}
        self.writes.append(job.job_id)
        return 200, {"answer": str(job.request), "success": True, "metadata": {}}


class Keys:
    """Whether a key still stands: what `Access.still_valid` answers, switched by the test."""

    def __init__(self) -> None:
        self.revoked: set[str | None] = set()

    def __call__(self, caller: Caller) -> bool:
        return caller.key_id not in self.revoked


async def submit(queue: JobQueue, workspace: str = "ws", caller: Caller = KEY) -> Job:
    job, _ = await queue.submit(
        flow="f",
        workspace_id=workspace,
        request={"text": f"{SECRET} {workspace}"},
        caller=caller,
        idempotency_key=None,
        body_hash="h",
    )
    return job


def files_holding(folder: Path, text: str) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes())


async def test_a_job_is_acknowledged_only_once_its_file_and_name_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    queue = JobQueue(JobsConfig(workers=1), JobFiles(tmp_path), Flow())
    synced = await fsync.during(submit(queue))  # not started: the job stays queued, its file as submitted
    (path,) = await asyncio.to_thread(lambda: list(tmp_path.glob("job_*.json")))
    assert contents_synced(synced, path) and name_synced(synced, path)


async def test_a_revoked_keys_queued_jobs_are_cancelled_with_a_reason(tmp_path: Path) -> None:
    flow, keys = Flow(), Keys()
    queue = JobQueue(JobsConfig(workers=1), JobFiles(tmp_path), flow, stands=keys, recheck_seconds=0.05)
    await queue.start()
    try:
        first = await submit(queue)
        await until(lambda: flow.started == [first.job_id])
        waiting = [await submit(queue) for _ in range(3)]
        keys.revoked.add(KEY.key_id)
        ids = [job.job_id for job in waiting]  # cancelled by the periodic re-check, before any of them runs
        await until(lambda: all(getattr(queue.known(i), "status", None) == "cancelled" for i in ids))
        flow.release.set()
        done = await queue.wait(first.job_id, 10)
        assert done is not None and done.status == "cancelled" and done.reason == REVOKED  # stopped at its write
        assert flow.writes == [] and flow.started == [first.job_id]
        for job in waiting:
            on_disk = await queue.get(job.job_id)
            assert on_disk is not None and on_disk.view()["reason"] == REVOKED and on_disk.request == {}
    finally:
        await queue.stop()


async def test_a_running_job_stops_at_its_next_write_once_its_key_is_revoked(tmp_path: Path) -> None:
    flow, keys = Flow(), Keys()
    other = KEY.model_copy(update={"key_id": "k2"})
    queue = JobQueue(JobsConfig(workers=2, per_workspace=2), JobFiles(tmp_path), flow, stands=keys, recheck_seconds=60)
    await queue.start()
    try:
        revoked, kept = await submit(queue), await submit(queue, caller=other)
        await until(lambda: len(flow.started) == 2)
        keys.revoked.add(KEY.key_id)  # no re-check round comes: the write gate finds it
        flow.release.set()
        stopped, finished = await queue.wait(revoked.job_id, 10), await queue.wait(kept.job_id, 10)
        assert stopped is not None and (stopped.status, stopped.reason) == ("cancelled", REVOKED)
        assert finished is not None and finished.status == "done"
        assert flow.writes == [kept.job_id]
    finally:
        await queue.stop()


async def test_erasing_a_workspace_scrubs_its_jobs_requests_and_results(tmp_path: Path) -> None:
    flow = Flow()
    queue = JobQueue(JobsConfig(workers=1), JobFiles(tmp_path), flow)
    await queue.start()
    try:
        finished = await submit(queue, "doomed")
        flow.release.set()
        await queue.wait(finished.job_id, 10)
        flow.release.clear()
        running = await submit(queue, "doomed")
        await until(lambda: running.job_id in flow.started)
        waiting, kept = await submit(queue, "doomed"), await submit(queue, "kept")
        assert files_holding(tmp_path, f"{SECRET} doomed")
        assert await queue.erase_workspace("doomed") == 3
        flow.release.set()
        await queue.wait(running.job_id, 10)
        await queue.wait(kept.job_id, 10)
        assert files_holding(tmp_path, f"{SECRET} doomed") == []
        assert flow.writes == [finished.job_id, kept.job_id]  # the running one stopped at its write
        for job in (finished, running, waiting):
            view = (await queue.get(job.job_id)).view()  # type: ignore[union-attr]
            assert SECRET not in str(view) and view["reason"] == ERASED
        assert [(await queue.get(j.job_id)).status for j in (finished, running, waiting)] == [  # type: ignore[union-attr]
            "done",
            "cancelled",
            "cancelled",
        ]
    finally:
        await queue.stop()


async def test_a_job_interrupted_after_it_began_writing_is_not_run_again(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    left = Job(job_id="job_" + "a" * 32, flow="f", workspace_id="ws", request={}, caller=KEY, status="running")
    files.save(left)
    files.mark_writing(left.job_id)  # its process died during its write
    flow = Flow()
    flow.release.set()
    queue = JobQueue(JobsConfig(), files, flow)
    await queue.start()
    try:
        job = await queue.get(left.job_id)
        assert job is not None and job.status == "failed" and flow.started == []
    finally:
        await queue.stop()
