"""`JobFiles`: the jobs folder, shared by every process of the service (`http.workers`).

- `<job_id>.json`: the job, replaced whole and fsynced at every change of state (`durable.atomic_write`), so a job
  is never lost nor half-recorded, whatever stops the process;
- `<job_id>.lock`: held (`flock`) by the process running the job, for as long as it runs: a job runs in one
  process at a time, and a lock nobody holds means nobody runs it (the kernel drops a dead process's locks);
- `<job_id>.cancel`: the job was cancelled (its key revoked, its workspace erased) while it ran or waited: the
  process running it stops at its next write, and every later save of the job, by any process, writes it
  cancelled and scrubbed instead (`save`, under `state.lock`, so a save that began before the cancellation cannot
  put the request or result back);
- `<job_id>.writing`: the job began its first store write (the step marker): a job interrupted after it is not
  run again, so its writes happen once (`began_writing`);
- `keys/<hash>`: which job an Idempotency-Key of an API key named, written whole and then linked to its name (a
  link fails when the name exists), so two processes or threads given the same key agree on one job.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from reme_service.durable import TMP_SUFFIX, atomic_write, exclusive_lock, fsync_path
from reme_service.jobs.record import Job

logger = logging.getLogger("reme_service.jobs")
SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
CANCEL_SUFFIX = ".cancel"
WRITING_SUFFIX = ".writing"
STATE_LOCK = "state.lock"
STALE_TMP_SECONDS = 3600.0


def key_digest(key_id: str | None, idempotency_key: str) -> str:
    return hashlib.sha256(f"{key_id or ''}\0{idempotency_key}".encode()).hexdigest()


class Cancellation(BaseModel):
    """Why a job was cancelled, and the answer its record then holds (an error envelope without request text)."""

    reason: str
    http_status: int | None = None
    result: dict[str, Any] | None = None


class JobFiles:
    shared_across_nodes = False  # one machine: the processes that share the folder see each other's locks at start

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.keys = folder / "keys"

    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}{SUFFIX}"

    def save(self, job: Job) -> tuple[Job, int]:
        """Write the job's file (atomically, fsynced); returns the job as written and its size in bytes. A job
        cancelled meanwhile (`cancel`, by any process) is written cancelled and scrubbed instead."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with exclusive_lock(self.folder / STATE_LOCK):
            cancelled = self._cancellation(job.job_id)
            if cancelled is not None and job.status != "cancelled":
                job = job.cancelled(cancelled.reason, http_status=cancelled.http_status, result=cancelled.result)
            return job, self._write(job)

    def _write(self, job: Job) -> int:
        data = job.model_dump_json().encode()
        atomic_write(self._path(job.job_id), [data])
        return len(data)

    def _cancellation(self, job_id: str) -> Cancellation | None:
        try:
            return Cancellation.model_validate_json(self.folder.joinpath(f"{job_id}{CANCEL_SUFFIX}").read_bytes())
        except (FileNotFoundError, ValidationError, ValueError):
            return None

    def cancelled(self, job_id: str) -> str | None:
        """Why the job was cancelled (one `stat` when it was not): a running job asks before each write."""
        if not self.folder.joinpath(f"{job_id}{CANCEL_SUFFIX}").exists():
            return None
        found = self._cancellation(job_id)
        return found.reason if found is not None else None

    def cancel(self, job_id: str, cancellation: Cancellation, *, scrub_finished: bool = False) -> Job | None:
        """Cancel the job unless it finished: its file is rewritten cancelled, without request nor result, and the
        cancellation recorded so that whoever runs it stops at its next write and saves it so. With
        `scrub_finished`, a finished job loses its request and result too (erasing its workspace). Returns the job
        as it now is on disk (None when there is no such job)."""
        with exclusive_lock(self.folder / STATE_LOCK):
            job = self.load(job_id)
            if job is None or (job.finished and not scrub_finished):
                return job
            if job.finished:
                job = job.scrubbed(cancellation.reason)
            else:
                atomic_write(self.folder / f"{job_id}{CANCEL_SUFFIX}", [cancellation.model_dump_json().encode()])
                job = job.cancelled(
                    cancellation.reason, http_status=cancellation.http_status, result=cancellation.result
                )
            self._write(job)
            return job

    def erase_workspace(self, workspace_id: str, cancellation: Cancellation, *, skip: str | None = None) -> list[Job]:
        """Every job of `workspace_id` but `skip`, cancelled or, when finished, scrubbed (`cancel`), and any
        temporary file left of one by a crash removed: none of the workspace's text stays in the jobs folder.
        Returns the jobs as they now are on disk."""
        if not self.folder.is_dir():
            return []
        with exclusive_lock(self.folder / STATE_LOCK):  # no save is writing one now: a temporary file is a crash's
            for entry in os.scandir(self.folder):
                if entry.name.endswith(SUFFIX + TMP_SUFFIX) and _holds_workspace(Path(entry.path), workspace_id):
                    Path(entry.path).unlink(missing_ok=True)
        erased = []
        for entry in os.scandir(self.folder):
            job_id = entry.name.removesuffix(SUFFIX)
            if not entry.name.endswith(SUFFIX) or job_id == skip:
                continue
            job = self.load(job_id)
            if job is None or job.workspace_id != workspace_id or (job.reason is not None and not job.request):
                continue
            done = self.cancel(job_id, cancellation, scrub_finished=True)
            if done is not None:
                erased.append(done)
        return erased

    def mark_writing(self, job_id: str) -> None:
        """Record, durably, that the job begins its first write (`began_writing`)."""
        atomic_write(self.folder / f"{job_id}{WRITING_SUFFIX}", [b""])

    def began_writing(self, job_id: str) -> bool:
        return self.folder.joinpath(f"{job_id}{WRITING_SUFFIX}").exists()

    def size(self, job_id: str) -> int:
        try:
            return self._path(job_id).stat().st_size
        except FileNotFoundError:
            return 0

    def load(self, job_id: str) -> Job | None:
        try:
            return Job.model_validate_json(self._path(job_id).read_bytes())
        except (FileNotFoundError, ValidationError, ValueError):
            return None

    def remove(self, job: Job) -> None:
        self._path(job.job_id).unlink(missing_ok=True)
        for suffix in (LOCK_SUFFIX, CANCEL_SUFFIX, WRITING_SUFFIX):
            self.folder.joinpath(f"{job.job_id}{suffix}").unlink(missing_ok=True)
        if job.idempotency_key is not None:
            (self.keys / key_digest(job.caller.key_id, job.idempotency_key)).unlink(missing_ok=True)

    def claim(self, job_id: str) -> int | None:
        """Hold the job's run lock (a descriptor to close when done), or None when another process holds it."""
        fd = os.open(self.folder / f"{job_id}{LOCK_SUFFIX}", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @staticmethod
    def release(fd: int) -> None:
        os.close(fd)

    def reserve_key(self, digest: str, job_id: str) -> str:
        """The job that holds the Idempotency-Key `digest`: `job_id` when this call took it, else the earlier one.

        The key file is written whole (a fsynced temporary file) and then linked to its name, which fails when the
        name exists: a reader never sees it empty. (Created with `O_EXCL` and then written, a second reservation
        could read it between the two, find no job, and take the key too: two jobs ran for one key.)"""
        self.keys.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.keys / digest
        tmp = self.keys / f".{digest}.{job_id}{TMP_SUFFIX}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                os.write(fd, job_id.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, path)
        except FileExistsError:
            return path.read_text().strip()
        finally:
            tmp.unlink(missing_ok=True)
        fsync_path(self.keys)
        return job_id

    def key_holder(self, digest: str) -> str | None:
        """The job the Idempotency-Key `digest` named, if any."""
        try:
            return (self.keys / digest).read_text().strip() or None
        except FileNotFoundError:
            return None

    def load_open(self) -> list[Job]:
        """The jobs queued or running, oldest first."""
        return [job for job in self.load_all() if not job.finished]

    def load_all(self) -> list[Job]:
        """Every job on disk, oldest first; an unreadable file is logged and set aside (`.bad`), never fatal."""
        if not self.folder.is_dir():
            return []
        jobs = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(SUFFIX + TMP_SUFFIX):
                # a write that never reached its rename — unless another process is writing it right now
                if time.time() - entry.stat().st_mtime > STALE_TMP_SECONDS:
                    Path(entry.path).unlink(missing_ok=True)
            elif entry.name.endswith(SUFFIX):
                try:
                    jobs.append(Job.model_validate_json(Path(entry.path).read_bytes()))
                except (OSError, ValidationError, ValueError) as exc:
                    logger.error("job file %s is unreadable, set aside: %s", entry.name, exc)
                    os.replace(entry.path, entry.path + ".bad")
        return sorted(jobs, key=lambda job: job.queued_at)


def _holds_workspace(path: Path, workspace_id: str) -> bool:
    """Whether the (temporary) job file `path` is of `workspace_id`; an unreadable one is assumed to be."""
    try:
        return Job.model_validate_json(path.read_bytes()).workspace_id == workspace_id
    except (OSError, ValidationError, ValueError):
        return True
