"""`JobQueue`: accepts jobs, runs them in submission order — at most `jobs.workers` at once and
`jobs.per_workspace` per workspace — and keeps them on disk (`files.JobFiles`) through every change of state.

Restart: queued jobs run again in their order; a job that was running when the process stopped runs once more if
it had not begun to write (its first store write is recorded first: `JobFiles.mark_writing`), and fails if it is
interrupted again; one interrupted after it began writing fails without running again, so its writes happen once.

A job runs with the rights its key has now, not those it had when submitted: every `recheck_seconds` the jobs
this process knows whose key no longer stands (revoked, removed or narrowed; a widened key stands: `stands`) are
cancelled with a reason (`JobFiles.cancel`), and a running one stops at its next store write (the write gate,
`storage.writer.write_gate`). `erase_workspace` (deleting a workspace) cancels the workspace's jobs and strips
every one of them of its request and result.

An `Idempotency-Key` is remembered per API key for `jobs.keep_hours`: the same key with the same
body gives the same job, with another body a 409. Finished jobs are forgotten after `jobs.keep_hours`, and the
oldest finished ones sooner when more than `jobs.max_finished` of them, or more than `jobs.max_finished_mb` of their
files, are kept.

What a job holds in memory is bounded: a job is kept without its request body (a queued one runs from its file, the
running task holds it), and a finished one without its result too (`_slim`): `GET /jobs/{id}` reads the result
from the job's file. Waiting jobs are bounded in number (`jobs.max_queued`) and in the bytes of their files
(`jobs.max_queued_mb`): 10,000 waiting jobs of 32 MiB bodies were 320 GB. (Kept whole, 16 finished `vector_store
list` jobs of a 100k-memory workspace took the RSS from 982 to 2,886 MiB.)

Several processes (`http.workers`) share the jobs folder: a job runs where its run lock is taken (`JobFiles.claim`),
each process runs the jobs it accepted unless another took them first, one starting up takes the jobs nobody holds,
and a job this process does not run is read from its file when asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from reme_service.auth.caller import Caller
from reme_service.config.models import JobsConfig
from reme_service.errors import ConflictError, ForbiddenError, OverloadedError, ReMeError, error_envelope
from reme_service.jobs.files import Cancellation, key_digest
from reme_service.jobs.record import MAX_ATTEMPTS, Job, JobProgress, now
from reme_service.state.interfaces import JobStore
from reme_service.storage.writer import write_gate

logger = logging.getLogger("reme_service.jobs")

Execute = Callable[[Job], Awaitable[tuple[int, dict[str, Any]]]]
PRUNE_SECONDS = 600.0
MAX_WAIT_SECONDS = 60.0
POLL_SECONDS = 0.25  # how often a long poll reads the file of a job another process runs
ADOPT_SECONDS = 2.0  # how often a queue shared across nodes looks for jobs nobody runs (a dead node's)
PROGRESS_SAVE_SECONDS = 1.0  # a running job's progress is saved for other processes at most this often
_JOB_ID = re.compile(r"job_[0-9a-f]{32}")
REVOKED = "cancelled: the API key that submitted this job was revoked, removed or changed since"
ERASED = "its workspace was deleted: the job's request and result were erased"
#: the job the current task runs (so that a job erasing its own workspace does not cancel itself)
_running_job: ContextVar[str | None] = ContextVar("running_job", default=None)


class JobCancelledError(ConflictError):
    """A running job reached a write after it was cancelled (its workspace erased)."""

    code = "cancelled"


def _revoked() -> Cancellation:
    error = ForbiddenError(REVOKED)
    return Cancellation(reason=REVOKED, http_status=error.status, result=error_envelope(error, ""))


def _erased() -> Cancellation:
    error = JobCancelledError(f"cancelled: {ERASED}")
    return Cancellation(reason=ERASED, http_status=error.status, result=error_envelope(error, ""))


class JobQueue:
    def __init__(
        self,
        config: JobsConfig,
        files: JobStore,
        execute: Execute,
        *,
        on_finished: Callable[[Job], None] | None = None,
        stands: Callable[[Caller], bool] | None = None,
        recheck_seconds: float = 1.0,
    ) -> None:
        """`stands(caller)`: whether the key a job was submitted with still grants what it granted then (default:
        always); asked every `recheck_seconds` of every unfinished job, and before each of a job's writes."""
        self.config = config
        self._stands = stands or (lambda caller: True)
        self.recheck_seconds = recheck_seconds
        self._checker: asyncio.Task[None] | None = None
        self.files = files
        self._execute = execute
        self._on_finished = on_finished
        self._jobs: dict[str, Job] = {}
        self._queue: deque[str] = deque()
        self._running: Counter[str] = Counter()  # workspace -> jobs running
        self._tasks: set[asyncio.Task[None]] = set()
        self._finished: dict[str, asyncio.Event] = {}
        self._by_key: dict[tuple[str | None, str], str] = {}
        self._pruner: asyncio.Task[None] | None = None
        self._adopter: asyncio.Task[None] | None = None
        self._stopping = False
        self._mine: set[str] = set()  # jobs this process is running (holds their run lock)
        self._sizes: dict[str, int] = {}  # bytes of the file of each finished job
        self._waiting: dict[str, int] = {}  # bytes of the file of each queued job
        self._progress_savers: dict[str, tuple[asyncio.Task[None], asyncio.Event]] = {}  # job -> (saver, its end)

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            jobs = await asyncio.to_thread(self.files.load_all)
        except ReMeError as exc:  # a shared store that is down: start anyway, and take the jobs over once it is back
            logger.warning("jobs: cannot read the stored jobs now: %s", exc.message)
            jobs = []
        for job in jobs:
            self._remember(job)
        await self._adopt(jobs)
        if jobs:
            logger.info("jobs: %d stored, %d to run", len(jobs), len(self._queue))
        await self._prune()
        self._pruner = asyncio.create_task(self._prune_every(), name="reme-jobs-prune")
        self._checker = asyncio.create_task(self._recheck_every(), name="reme-jobs-recheck")
        if getattr(self.files, "shared_across_nodes", False):
            self._adopter = asyncio.create_task(self._adopt_every(), name="reme-jobs-adopt")
        self._dispatch()

    async def _adopt(self, jobs: list[Job]) -> None:
        """Queue here the unfinished jobs among `jobs` that nobody runs (their run lock is free)."""
        for job in jobs:
            if job.finished or job.job_id in self._mine or job.job_id in self._queue:
                continue
            fd = await asyncio.to_thread(self.files.claim, job.job_id)
            if fd is None:
                continue  # another process is running it
            try:
                current = await asyncio.to_thread(self.files.load, job.job_id)
                if current is None:
                    continue
                if current.status == "running":  # the process that ran it stopped
                    current = await self._orphaned(current)
                else:
                    self._remember(current)
            finally:
                self.files.release(fd)
            if current.status == "queued":
                self._queue.append(current.job_id)

    async def _adopt_every(self) -> None:
        """Shared across nodes: take over, every `ADOPT_SECONDS`, the jobs a dead node left (its run locks ended
        with its connections)."""
        while True:
            await asyncio.sleep(ADOPT_SECONDS)
            try:
                await self._adopt(await asyncio.to_thread(self.files.load_open))
            except ReMeError as exc:  # the database is away: the next round tries again
                logger.warning("jobs: cannot look for jobs to take over: %s", exc.message)
                continue
            self._dispatch()

    async def _orphaned(self, job: Job) -> Job:
        """A job whose process stopped while it ran: queued again, or failed when that happened twice or after it
        began writing (run again, it would write twice: new memories get new ids)."""
        began = await asyncio.to_thread(self.files.began_writing, job.job_id)
        if job.attempts < MAX_ATTEMPTS and not began:
            return await self._record(job, status="queued")
        message = "the job was interrupted by a restart twice; it was not run again"
        if began:
            message = (
                "the job was interrupted by a restart after it began writing; it was not run again, so that nothing "
                "is written twice: check what it wrote and resubmit what is missing"
            )
        return await self._record(
            job, status="failed", finished_at=now(), http_status=500, result=_failure(job, message)
        )

    async def stop(self) -> None:
        """Stop running jobs (they stay `running` on disk and run again at the next start)."""
        self._stopping = True
        helpers = [task for task in (self._pruner, self._adopter, self._checker) if task is not None]
        tasks = list(self._tasks)
        for task in [*tasks, *helpers]:
            task.cancel()
        await asyncio.gather(*tasks, *helpers, return_exceptions=True)
        self._pruner = self._adopter = self._checker = None

    # -- submitting and reading ---------------------------------------------------------------------------

    async def submit(
        self,
        *,
        flow: str,
        workspace_id: str,
        request: dict[str, Any],
        caller: Caller,
        idempotency_key: str | None,
        body_hash: str,
    ) -> tuple[Job, bool]:
        """The new job, queued and on disk; or, for a known `idempotency_key`, the job it named (True)."""
        if idempotency_key is not None:
            known = await self._job_of_key(caller, idempotency_key)
            if known is not None:
                return self._replay(known, flow, body_hash), True
        queued = sum(1 for job_id in self._queue if job_id in self._jobs)
        if queued >= self.config.max_queued:
            raise OverloadedError(f"{queued} jobs are waiting (jobs.max_queued); retry later")
        job = Job(
            job_id=f"job_{uuid.uuid4().hex}",
            flow=flow,
            workspace_id=workspace_id,
            request=request,
            caller=caller,
            idempotency_key=idempotency_key,
            body_hash=body_hash,
        )
        job, size = await asyncio.to_thread(self.files.save, job)  # on disk before it is acknowledged
        waiting = sum(self._waiting.values())
        if self._waiting and waiting + size > self.config.max_queued_mb * 2**20:
            await asyncio.to_thread(self.files.remove, job)
            raise OverloadedError(f"{waiting / 2**20:.0f} MiB of jobs are waiting (jobs.max_queued_mb); retry later")
        if idempotency_key is not None:
            digest = key_digest(caller.key_id, idempotency_key)
            holder = await asyncio.to_thread(self.files.reserve_key, digest, job.job_id)
            if holder != job.job_id:  # another process took the key meanwhile: its job is the one
                await asyncio.to_thread(self.files.remove, job.model_copy(update={"idempotency_key": None}))
                known = self._jobs.get(holder) or await asyncio.to_thread(self.files.load, holder)
                if known is None:
                    raise ConflictError("this Idempotency-Key is being used by a request in progress; retry shortly")
                return self._replay(known, flow, body_hash), True
        self._remember(job)
        self._queue.append(job.job_id)
        self._dispatch()
        return job, False

    async def _job_of_key(self, caller: Caller, idempotency_key: str) -> Job | None:
        job_id = self._by_key.get((caller.key_id, idempotency_key))
        if job_id is None:
            job_id = await asyncio.to_thread(self.files.key_holder, key_digest(caller.key_id, idempotency_key))
        if job_id is None:
            return None
        return self._jobs.get(job_id) or await asyncio.to_thread(self.files.load, job_id)

    @staticmethod
    def _replay(known: Job, flow: str, body_hash: str) -> Job:
        if known.body_hash != body_hash or known.flow != flow:
            raise ConflictError("this Idempotency-Key was used with another request; use a new key for a new request")
        return known

    def queued_of(self, key_id: str | None) -> int:
        """Jobs of the key `key_id` (None: keyless callers) waiting in this process's queue (a per-key share,
        `auth.per_key.jobs`)."""
        return sum(1 for job_id in self._waiting if (job := self._jobs.get(job_id)) and job.caller.key_id == key_id)

    def known(self, job_id: str) -> Job | None:
        """The job as this process last saw it (no file read)."""
        return self._jobs.get(job_id)

    async def get(self, job_id: str) -> Job | None:
        """The job as it is now: from memory when this process runs it, else from its file (another process may
        run it; a finished job's result is kept only there). None for a job unknown or pruned."""
        job = self._jobs.get(job_id)
        if job is not None and job_id in self._mine:
            return job
        if job is None and not _JOB_ID.fullmatch(job_id):
            return None
        on_disk, size = await asyncio.to_thread(lambda: (self.files.load(job_id), self.files.size(job_id)))
        if on_disk is not None:
            self._remember(on_disk, size)
        elif job is not None and job.finished:  # pruned meanwhile (by another process)
            self._forget(job)
            return None
        return on_disk or job

    def progress(self, job_id: str, done: int, total: int | None) -> None:
        """A running job's progress (`Job.progress`), seen by `get` in this process at once, and saved for the
        other processes and nodes (at most every `PROGRESS_SAVE_SECONDS`; its last value with the job's end). Called
        on the event loop by the running flow."""
        job = self._jobs.get(job_id)
        if job is None or job_id not in self._mine:
            return
        self._jobs[job_id] = job.model_copy(update={"progress": JobProgress(done=done, total=total)})
        saver = self._progress_savers.get(job_id)
        if saver is None or saver[0].done():
            ended = asyncio.Event()
            task = asyncio.get_running_loop().create_task(self._save_progress(job_id, ended))
            self._progress_savers[job_id] = (task, ended)

    async def _save_progress(self, job_id: str, ended: asyncio.Event) -> None:
        """Save the running job's progress, then again every `PROGRESS_SAVE_SECONDS` while it changes, until the
        job ends (`ended`)."""
        saved: JobProgress | None = None
        while (job := self._jobs.get(job_id)) is not None and job.status == "running" and job.progress != saved:
            saved = job.progress
            try:
                await self._record(job)
            except (ReMeError, OSError) as exc:  # progress is a courtesy: the job runs on, its end is saved as ever
                logger.warning("job %s: could not save its progress: %s", job_id, exc)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), PROGRESS_SAVE_SECONDS)
            if ended.is_set():
                return

    async def _progress_saved(self, job_id: str) -> None:
        """End the job's progress saver and wait for its save under way, so that none lands after (and over) the
        job's end."""
        saver = self._progress_savers.pop(job_id, None)
        if saver is not None:
            saver[1].set()
            await asyncio.shield(saver[0])

    async def wait(self, job_id: str, seconds: float) -> Job | None:
        """The job once finished, or as it is after `seconds` (at most `MAX_WAIT_SECONDS`)."""
        job = await self.get(job_id)
        if job is None or job.finished or seconds <= 0:
            return job
        deadline = asyncio.get_running_loop().time() + min(seconds, MAX_WAIT_SECONDS)
        while True:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return await self.get(job_id)
            if job_id in self._mine:  # run here: woken when it finishes
                event = self._finished.setdefault(job_id, asyncio.Event())
                try:
                    await asyncio.wait_for(event.wait(), remaining)
                except TimeoutError:
                    pass
            else:  # run by another process (or about to be): its file says when
                await asyncio.sleep(min(POLL_SECONDS, remaining))
            job = await self.get(job_id)
            if job is None or job.finished:
                return job

    # -- running ------------------------------------------------------------------------------------------

    def _remember(self, job: Job, size: int | None = None) -> None:
        self._jobs[job.job_id] = _slim(job)
        if job.status == "queued":
            self._waiting[job.job_id] = self.files.size(job.job_id) if size is None else size
        else:
            self._waiting.pop(job.job_id, None)
        if job.finished and job.job_id not in self._sizes:
            self._sizes[job.job_id] = self.files.size(job.job_id) if size is None else size
        if job.idempotency_key is not None:
            self._by_key[(job.caller.key_id, job.idempotency_key)] = job.job_id

    def _dispatch(self) -> None:
        """Start queued jobs, oldest first, while there are free workers and their workspace has room."""
        skipped: list[str] = []
        while not self._stopping and self._queue and len(self._tasks) < self.config.workers:
            job_id = self._queue.popleft()
            job = self._jobs.get(job_id)
            if job is None or job.status != "queued":
                continue
            if self._running[job.workspace_id] >= self.config.per_workspace:
                skipped.append(job_id)
                continue
            self._running[job.workspace_id] += 1
            task = asyncio.create_task(self._run(job), name=f"reme-{job_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._queue.extendleft(reversed(skipped))

    async def _record(self, job: Job, **changes: Any) -> Job:
        """The job with `changes`, on disk first, then what readers see (a state is never shown before it is
        durable: a job seen `done` cannot run again after a crash)."""
        changed, size = await asyncio.to_thread(self.files.save, job.model_copy(update=changes))
        self._remember(changed, size)
        if changed.finished and self._over_bounds():
            await self._prune(keep=changed.job_id)
        return changed

    async def _run(self, job: Job) -> None:
        fd = await asyncio.to_thread(self.files.claim, job.job_id)
        if fd is None:  # another process took it first: it runs it
            self._free_slot(job.workspace_id)
            return
        try:
            # With the lock held, the file is the truth: another process may have run it while it waited here.
            current = await asyncio.to_thread(self.files.load, job.job_id)
            if current is not None and current.status == "running":  # its process stopped
                current = await self._orphaned(current)
            if current is not None and current.status == "queued" and not self._stands(current.caller):
                current = await self._cancel(current, _revoked())
            if current is None or current.status != "queued":
                self._remember(current or job)
                return
            self._mine.add(job.job_id)
            job = await self._record(current, status="running", started_at=now(), attempts=current.attempts + 1)
            if job.status == "cancelled":  # cancelled by another process as it started here
                return
            status, payload = await self._execute_gated(job)
            if not self._stands(job.caller):  # revoked while it ran: recorded so (`save` applies it), not failed
                await asyncio.to_thread(self.files.cancel, job.job_id, _revoked())
            outcome = "done" if status == 200 else "failed"
            await self._progress_saved(job.job_id)
            job = job.model_copy(update={"progress": (self._jobs.get(job.job_id) or job).progress})  # its last, kept
            job = await self._record(job, status=outcome, http_status=status, result=payload, finished_at=now())
            if self._on_finished is not None:
                self._on_finished(job)
            event = self._finished.pop(job.job_id, None)
            if event is not None:
                event.set()
        finally:
            await self._progress_saved(job.job_id)  # (the job broke off: still none after its run lock is freed)
            self.files.release(fd)
            self._mine.discard(job.job_id)
            self._free_slot(job.workspace_id)

    async def _execute_gated(self, job: Job) -> tuple[int, dict[str, Any]]:
        """Run the job, each of its store writes first passing `_gate`."""
        writing = False

        async def gate() -> None:
            nonlocal writing
            if not self._stands(job.caller):
                raise ForbiddenError(REVOKED)
            if (reason := await asyncio.to_thread(self.files.cancelled, job.job_id)) is not None:
                raise JobCancelledError(f"cancelled: {reason}")
            if not writing:  # the step marker: interrupted from here on, the job is not run again
                await asyncio.to_thread(self.files.mark_writing, job.job_id)
                writing = True

        gate_token, job_token = write_gate.set(gate), _running_job.set(job.job_id)
        try:
            return await self._execute(job)
        except Exception as exc:  # noqa: BLE001 - a job that breaks is recorded, never lost
            logger.exception("job %s (%s) failed unexpectedly", job.job_id, job.flow)
            return 500, _failure(job, f"internal error ({type(exc).__name__})")
        finally:
            write_gate.reset(gate_token)
            _running_job.reset(job_token)

    # -- cancelling: revoked keys, erased workspaces ---------------------------------------------------------

    async def _cancel(self, job: Job, cancellation: Cancellation) -> Job | None:
        """Cancel `job` (on disk, for every process: `JobFiles.cancel`); a running one stops at its next write."""
        cancelled = await asyncio.to_thread(self.files.cancel, job.job_id, cancellation)
        if cancelled is not None:
            self._remember(cancelled)
            if job.status == "queued" and cancelled.finished and self._on_finished is not None:
                self._on_finished(cancelled)
        return cancelled

    async def _recheck_every(self) -> None:
        while True:
            await asyncio.sleep(self.recheck_seconds)
            try:
                await self.recheck()
            except OSError as exc:  # a full or failing disk: tried again at the next round
                logger.error("jobs: could not cancel the jobs of revoked keys: %s", exc)

    async def recheck(self) -> int:
        """Cancel the unfinished jobs this process knows whose key no longer stands; returns how many."""
        revoked = [job for job in self._jobs.values() if not job.finished and not self._stands(job.caller)]
        for job in revoked:
            await self._cancel(job, _revoked())
        return len(revoked)

    async def erase_workspace(self, workspace_id: str) -> int:
        """Cancel the jobs of `workspace_id` and strip all of them, finished ones too, of their request and result
        (in every process's view: the files are the truth); the job calling this (a `delete` run as a job) is
        left alone. Returns how many jobs were erased."""
        erased = await asyncio.to_thread(self.files.erase_workspace, workspace_id, _erased(), skip=_running_job.get())
        for job in erased:
            self._remember(job)
        return len(erased)

    def _free_slot(self, workspace_id: str) -> None:
        """A run of this task is over (or never began): its worker and its workspace's place go to the next."""
        self._running[workspace_id] -= 1
        if self._running[workspace_id] <= 0:
            del self._running[workspace_id]
        self._forget_task()
        self._dispatch()

    def _forget_task(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.discard(task)

    # -- forgetting ---------------------------------------------------------------------------------------

    async def _prune_every(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_SECONDS)
            await self._prune()

    def _over_bounds(self) -> bool:
        return (
            len(self._sizes) > self.config.max_finished
            or sum(self._sizes.values()) > self.config.max_finished_mb * 1024 * 1024
        )

    async def _prune(self, keep: str | None = None) -> None:
        """Delete the finished jobs older than `keep_hours`, then the oldest finished ones while more than
        `max_finished` of them, or more than `max_finished_mb` of their files, are kept — never `keep`, the job
        that just finished (its result, however large, can be read until the next job finishes)."""
        cutoff = now() - timedelta(hours=self.config.keep_hours)
        finished = sorted(
            (j for j in self._jobs.values() if j.finished),
            key=lambda j: (j.finished_at is not None, j.finished_at or j.queued_at),
        )
        count, total = len(self._sizes), sum(self._sizes.values())
        limit_bytes = self.config.max_finished_mb * 1024 * 1024
        for job in finished:
            expired = job.finished_at is None or job.finished_at < cutoff
            if not expired and count <= self.config.max_finished and total <= limit_bytes:
                break
            if job.job_id == keep:
                continue
            await asyncio.to_thread(self.files.remove, job)
            count -= 1
            total -= self._sizes.get(job.job_id, 0)
            self._forget(job)

    def _forget(self, job: Job) -> None:
        self._jobs.pop(job.job_id, None)
        self._sizes.pop(job.job_id, None)
        self._waiting.pop(job.job_id, None)
        if job.idempotency_key is not None:
            self._by_key.pop((job.caller.key_id, job.idempotency_key), None)


def _slim(job: Job) -> Job:
    """What memory keeps of a job: a queued one without its request (`_run` reads the job from its file), a running
    one without it (the running task holds it), a finished one without request and result (read from its file when
    asked for)."""
    if not job.request and job.result is None:
        return job
    return job.model_copy(update={"request": {}, "result": None})


def _failure(job: Job, message: str) -> dict[str, Any]:
    return error_envelope(ReMeError(message), job.job_id)
