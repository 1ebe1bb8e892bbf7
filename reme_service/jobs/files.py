"""`JobFiles`: the jobs folder, shared by every process of the service (`http.workers`).

- `<job_id>.json`: the job, replaced whole and fsynced at every change of state (`durable.atomic_write`), so a job
  is never lost nor half-recorded, whatever stops the process;
- `<job_id>.lock`: held (`flock`) by the process running the job, for as long as it runs: a job runs in one
  process at a time, and a lock nobody holds means nobody runs it (the kernel drops a dead process's locks);
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

from pydantic import ValidationError

from reme_service.durable import TMP_SUFFIX, atomic_write, fsync_path
from reme_service.jobs.record import Job

logger = logging.getLogger("reme_service.jobs")
SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
STALE_TMP_SECONDS = 3600.0


def key_digest(key_id: str | None, idempotency_key: str) -> str:
    return hashlib.sha256(f"{key_id or ''}\0{idempotency_key}".encode()).hexdigest()


class JobFiles:
    shared_across_nodes = False  # one machine: the processes that share the folder see each other's locks at start

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.keys = folder / "keys"

    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}{SUFFIX}"

    def save(self, job: Job) -> int:
        """Write the job's file (atomically, fsynced); returns its size in bytes."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = job.model_dump_json().encode()
        atomic_write(self._path(job.job_id), [data])
        return len(data)

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
        self.folder.joinpath(f"{job.job_id}{LOCK_SUFFIX}").unlink(missing_ok=True)
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
