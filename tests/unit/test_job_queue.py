"""`JobQueue` on its own: order, concurrency bounds, restarts, pruning and broken files."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from reme_service.auth.caller import TRUSTED
from reme_service.config.models import JobsConfig
from reme_service.jobs.files import JobFiles
from reme_service.jobs.queue import JobQueue
from reme_service.jobs.record import Job, now
from tests.conditions import until

pytestmark = pytest.mark.anyio


class Runs:
    """The execute function: records which jobs run at once and lets the test finish them one by one."""

    def __init__(self) -> None:
        self.running: list[str] = []
        self.peak = 0
        self.release: dict[str, asyncio.Event] = {}

    async def __call__(self, job: Job) -> tuple[int, dict[str, Any]]:
        self.running.append(job.job_id)
        self.peak = max(self.peak, len(self.running))
        event = self.release.setdefault(job.job_id, asyncio.Event())
        try:
            await event.wait()
        finally:
            self.running.remove(job.job_id)
        return 200, {"answer": job.workspace_id, "success": True, "metadata": {}}

    def finish(self, job_id: str) -> None:
        self.release.setdefault(job_id, asyncio.Event()).set()


async def submit(queue: JobQueue, workspace: str, key: str | None = None) -> Job:
    job, _ = await queue.submit(
        flow="f", workspace_id=workspace, request={}, caller=TRUSTED, idempotency_key=key, body_hash=workspace
    )
    return job


async def test_workers_and_workspaces_bound_what_runs_at_once(tmp_path: Path) -> None:
    runs = Runs()
    queue = JobQueue(JobsConfig(workers=2, per_workspace=1), JobFiles(tmp_path), runs)
    await queue.start()
    try:
        a1, a2, b1, c1 = [await submit(queue, ws) for ws in ("a", "a", "b", "c")]
        await until(lambda: len(runs.running) == 2)
        assert set(runs.running) == {a1.job_id, b1.job_id}  # a2 waits for a1, c1 for a free worker
        runs.finish(a1.job_id)
        await until(lambda: set(runs.running) == {b1.job_id, a2.job_id})  # a2 is older than c1
        for job in (b1, a2, c1):
            runs.finish(job.job_id)
        await until(lambda: all(queue.known(j.job_id).status == "done" for j in (a1, a2, b1, c1)))  # type: ignore[union-attr]
        assert runs.peak == 2
    finally:
        await queue.stop()


async def test_a_restart_runs_queued_jobs_again_and_fails_one_interrupted_twice(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    interrupted_once = Job(job_id="j1", flow="f", workspace_id="a", request={}, caller=TRUSTED, status="running")
    interrupted_once.attempts = 1
    interrupted_twice = Job(job_id="j2", flow="f", workspace_id="b", request={}, caller=TRUSTED, status="running")
    interrupted_twice.attempts = 2
    waiting = Job(job_id="j3", flow="f", workspace_id="c", request={}, caller=TRUSTED)
    for job in (interrupted_once, interrupted_twice, waiting):
        files.save(job)
    (tmp_path / "broken.json").write_text("{not json")
    runs = Runs()
    queue = JobQueue(JobsConfig(), files, runs)
    await queue.start()
    try:
        failed = await queue.get("j2")  # the result lives in its file
        assert failed is not None and failed.status == "failed" and failed.http_status == 500
        assert "interrupted by a restart twice" in failed.result["metadata"]["error"]["message"]  # type: ignore[index]
        await until(lambda: set(runs.running) == {"j1", "j3"})
        runs.finish("j1")
        runs.finish("j3")
        await until(lambda: queue.known("j1").status == "done" and queue.known("j3").status == "done")  # type: ignore[union-attr]
        assert queue.known("j1").attempts == 2  # type: ignore[union-attr]
        assert (tmp_path / "broken.json.bad").exists()  # set aside, not fatal
        reloaded = {job.job_id: job.status for job in files.load_all()}
        assert reloaded == {"j1": "done", "j2": "failed", "j3": "done"}  # every change is on disk
    finally:
        await queue.stop()


async def test_finished_jobs_and_their_keys_are_forgotten_after_keep_hours(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    old = Job(job_id="old", flow="f", workspace_id="a", request={}, caller=TRUSTED, status="done")
    old.idempotency_key, old.finished_at = "k", now() - timedelta(hours=25)
    files.save(old)
    queue = JobQueue(JobsConfig(keep_hours=24), files, Runs())
    await queue.start()
    try:
        assert queue.known("old") is None and not (tmp_path / "old.json").exists()
        job = await submit(queue, "a", key="k")  # the key is free again
        assert job.job_id != "old"
    finally:
        await queue.stop()


async def test_a_full_queue_refuses_new_jobs(tmp_path: Path) -> None:
    runs = Runs()
    queue = JobQueue(JobsConfig(workers=1, max_queued=2), JobFiles(tmp_path), runs)
    await queue.start()
    try:
        first = await submit(queue, "a")
        await until(lambda: runs.running == [first.job_id])
        await submit(queue, "b")
        await submit(queue, "c")
        with pytest.raises(Exception, match="jobs are waiting") as refused:
            await submit(queue, "d")
        assert getattr(refused.value, "status", None) == 503
        runs.finish(first.job_id)
    finally:
        for job_id in list(runs.release):
            runs.finish(job_id)
        await queue.stop()


async def test_waiting_jobs_are_bounded_in_bytes_and_kept_without_their_requests(tmp_path: Path) -> None:
    """Waiting jobs run from their files: memory keeps none of their requests, and past jobs.max_queued_mb of
    waiting files a submission is refused (503) and leaves no file; the bodies run whole all the same."""
    seen: list[int] = []

    async def execute(job: Job) -> tuple[int, dict[str, Any]]:
        seen.append(len(job.request["text"]))
        await gate.wait()
        return 200, {"answer": "", "success": True, "metadata": {}}

    gate = asyncio.Event()
    files = JobFiles(tmp_path)
    queue = JobQueue(JobsConfig(workers=1, max_queued_mb=1.0), files, execute)
    body = {"text": "x" * 300_000}  # ~0.3 MiB a job: three wait, the fourth would pass 1 MiB

    async def submit_big(workspace: str) -> Job:
        job, _ = await queue.submit(
            flow="f", workspace_id=workspace, request=body, caller=TRUSTED, idempotency_key=None, body_hash=workspace
        )
        return job

    await queue.start()
    try:
        first = await submit_big("a")
        await until(lambda: seen == [300_000])  # running: no longer waiting
        waiting = [await submit_big(ws) for ws in ("b", "c", "d")]
        assert all(queue._jobs[job.job_id].request == {} for job in waiting)  # nothing of them in memory
        with pytest.raises(Exception, match="jobs.max_queued_mb") as refused:
            await submit_big("e")
        assert getattr(refused.value, "status", None) == 503
        files_left = await asyncio.to_thread(lambda: list(tmp_path.glob("job_*.json")))
        assert len(files_left) == 4  # the refused job left no file
        gate.set()
        await until(lambda: seen == [300_000] * 4)  # each ran with its whole request, read from its file
        assert (await queue.get(first.job_id)) is not None
        await submit_big("f")  # room again once they ran
    finally:
        gate.set()
        await queue.stop()


async def test_two_processes_share_the_jobs_folder(tmp_path: Path) -> None:
    """Two queues on one folder stand for two service processes: a job runs in one of them, the other reads it from
    its file, and an Idempotency-Key names one job whichever process is asked."""
    runs_a, runs_b = Runs(), Runs()
    a = JobQueue(JobsConfig(), JobFiles(tmp_path), runs_a)
    b = JobQueue(JobsConfig(), JobFiles(tmp_path), runs_b)
    await a.start()
    try:
        job = await submit(a, "ws", key="same")
        await until(lambda: runs_a.running == [job.job_id])
        await b.start()  # b finds the job running, with its run lock held by a: not b's to run
        seen = await b.get(job.job_id)
        assert seen is not None and seen.status == "running" and runs_b.running == []
        again, known = await b.submit(
            flow="f", workspace_id="ws", request={}, caller=TRUSTED, idempotency_key="same", body_hash="ws"
        )
        assert known and again.job_id == job.job_id  # the key is on disk, not only in a's memory
        runs_a.finish(job.job_id)
        done = await b.wait(job.job_id, 10)  # b polls the file a writes
        assert done is not None and done.status == "done"
    finally:
        await a.stop()
        await b.stop()


def test_concurrent_reservations_of_a_key_agree_on_one_job(tmp_path: Path) -> None:
    """Threads (or processes) reserving one Idempotency-Key at once all get the same job: the first one's. (The key
    file was created and then written: a reservation reading it in between took the key too, in about one trial of
    six with eight threads, and two jobs ran for one key.)"""
    files = JobFiles(tmp_path)
    with ThreadPoolExecutor(8) as pool:
        for trial in range(200):
            start = threading.Barrier(8)

            def reserve(i: int, digest: str = f"key{trial}", start: threading.Barrier = start) -> str:
                start.wait()
                return files.reserve_key(digest, f"job{i}")

            holders = set(pool.map(reserve, range(8)))
            assert len(holders) == 1 and holders <= {f"job{i}" for i in range(8)}, (trial, holders)
    assert sorted(path.name for path in files.keys.iterdir()) == sorted(f"key{trial}" for trial in range(200))


async def test_a_job_left_running_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    files = JobFiles(tmp_path)
    left = Job(job_id=f"job_{'a' * 32}", flow="f", workspace_id="ws", request={}, caller=TRUSTED, status="running")
    left.attempts = 1
    files.save(left)  # its process died: nobody holds its run lock
    runs = Runs()
    queue = JobQueue(JobsConfig(), files, runs)
    await queue.start()
    try:
        await until(lambda: runs.running == [left.job_id])
        assert files.claim(left.job_id) is None  # held by the queue that runs it now
        runs.finish(left.job_id)
        done = await queue.wait(left.job_id, 10)
        assert done is not None and done.status == "done" and done.attempts == 2
    finally:
        await queue.stop()


async def test_a_job_another_process_finished_while_it_waited_here_is_not_run_again(tmp_path: Path) -> None:
    """b has job j waiting for its one worker; a starts, finds j unclaimed, runs and finishes it. When b's worker
    frees up and b takes j's run lock, j is done on disk: b must go on to its next job, not run j a second time."""
    files = JobFiles(tmp_path)
    blocker = Job(job_id=f"job_{'b' * 32}", flow="f", workspace_id="x", request={}, caller=TRUSTED)
    waiting = Job(job_id=f"job_{'c' * 32}", flow="f", workspace_id="y", request={}, caller=TRUSTED)
    files.save(blocker)
    files.save(waiting)
    runs_a, runs_b = Runs(), Runs()
    b = JobQueue(JobsConfig(workers=1), JobFiles(tmp_path), runs_b)
    a = JobQueue(JobsConfig(), JobFiles(tmp_path), runs_a)
    await b.start()
    try:
        await until(lambda: runs_b.running == [blocker.job_id])  # j waits in b's queue
        await a.start()  # a takes j (nobody holds its lock) and runs it; the blocker is b's
        await until(lambda: runs_a.running == [waiting.job_id])
        runs_a.finish(waiting.job_id)
        assert (await a.wait(waiting.job_id, 10)).status == "done"  # type: ignore[union-attr]
        after = await submit(b, "z")  # queued in b behind j (a never heard of it)
        runs_b.finish(blocker.job_id)
        await until(lambda: bool(runs_b.running) and runs_b.running != [blocker.job_id])  # b's worker moved on
        assert runs_b.running == [after.job_id]  # j was skipped, not run again
        runs_b.finish(after.job_id)
        seen = await b.wait(waiting.job_id, 10)
        assert seen is not None and seen.status == "done" and seen.attempts == 1
    finally:
        await a.stop()
        await b.stop()


class BigResults:
    """The execute function of jobs whose result is large (a `vector_store list` of a big workspace)."""

    async def __call__(self, job: Job) -> tuple[int, dict[str, Any]]:
        return 200, {"answer": "", "success": True, "metadata": {"rows": ["x" * 1000] * 100, "of": job.job_id}}


async def big_job(queue: JobQueue, key: str | None = None) -> Job:
    job, _ = await queue.submit(
        flow="f",
        workspace_id="ws",
        request={"memory_dicts": ["y" * 1000] * 50},
        caller=TRUSTED,
        idempotency_key=key,
        body_hash="big",
    )
    return job


async def test_finished_jobs_keep_neither_request_nor_result_in_memory_and_are_capped(tmp_path: Path) -> None:
    queue = JobQueue(JobsConfig(max_finished=5), JobFiles(tmp_path), BigResults())
    await queue.start()
    try:
        first = await big_job(queue, key="k-first")
        await until(lambda: queue.known(first.job_id) is not None and queue.known(first.job_id).finished)  # type: ignore[union-attr]
        # replayed by its Idempotency-Key while it is kept, result read from its file
        replay, known = await queue.submit(
            flow="f", workspace_id="ws", request={}, caller=TRUSTED, idempotency_key="k-first", body_hash="big"
        )
        assert known and replay.job_id == first.job_id
        jobs = [first, *[await big_job(queue) for _ in range(11)]]
        await until(lambda: all(queue.known(j.job_id) is None or queue.known(j.job_id).finished for j in jobs))  # type: ignore[union-attr]
        await until(lambda: len(queue._jobs) == 5)
        kept = list(queue._jobs.values())
        assert all(j.finished and j.request == {} and j.result is None for j in kept)  # slim in memory
        assert {j.job_id for j in kept} == {j.job_id for j in jobs[-5:]}  # the newest five, oldest pruned first
        assert await asyncio.to_thread(lambda: len(list(tmp_path.glob("job_*.json")))) == 5  # and on disk
        # a kept job's result is read from its file
        latest = await queue.get(jobs[-1].job_id)
        assert latest is not None and latest.result is not None
        assert latest.result["metadata"]["of"] == jobs[-1].job_id and len(latest.result["metadata"]["rows"]) == 100
        # a pruned one is unknown (404 over HTTP), and its Idempotency-Key is free again
        assert await queue.get(first.job_id) is None
        again, known = await queue.submit(
            flow="f", workspace_id="ws", request={}, caller=TRUSTED, idempotency_key="k-first", body_hash="other"
        )
        assert not known and again.job_id != first.job_id
    finally:
        await queue.stop()


async def test_finished_jobs_files_are_capped_by_size_but_the_newest_is_kept(tmp_path: Path) -> None:
    queue = JobQueue(JobsConfig(max_finished_mb=0.25), JobFiles(tmp_path), BigResults())  # ~2 jobs of ~150 KB
    await queue.start()
    try:
        jobs = [await big_job(queue) for _ in range(6)]
        await until(lambda: queue.known(jobs[-1].job_id) is not None and queue.known(jobs[-1].job_id).finished)  # type: ignore[union-attr]
        await until(lambda: sum(queue._sizes.values()) <= 0.25 * 1024 * 1024)  # pruned as the last one finished
        assert jobs[-1].job_id in queue._jobs and jobs[0].job_id not in queue._jobs
        assert len(queue._jobs) < 6
    finally:
        await queue.stop()

    tiny = JobQueue(JobsConfig(max_finished_mb=0.01), JobFiles(tmp_path / "tiny"), BigResults())
    await tiny.start()
    try:
        job = await big_job(tiny)
        await until(lambda: tiny.known(job.job_id) is not None and tiny.known(job.job_id).finished)  # type: ignore[union-attr]
        got = await tiny.get(job.job_id)  # larger than the cap alone, still readable until the next one finishes
        assert got is not None and got.result is not None
    finally:
        await tiny.stop()
