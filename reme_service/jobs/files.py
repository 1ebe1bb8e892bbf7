"""`JobFiles`: one JSON file per job in the jobs folder, replaced whole and fsynced at every change of state
(`durable.atomic_write`), so a job is never lost nor half-recorded, whatever stops the process."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import ValidationError

from reme_service.durable import TMP_SUFFIX, atomic_write
from reme_service.jobs.record import Job

logger = logging.getLogger("reme_service.jobs")
SUFFIX = ".json"


class JobFiles:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, job_id: str) -> Path:
        return self.folder / f"{job_id}{SUFFIX}"

    def save(self, job: Job) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(self._path(job.job_id), [job.model_dump_json().encode()])

    def remove(self, job_id: str) -> None:
        self._path(job_id).unlink(missing_ok=True)

    def load_all(self) -> list[Job]:
        """Every job on disk, oldest first; an unreadable file is logged and set aside (`.bad`), never fatal."""
        if not self.folder.is_dir():
            return []
        jobs = []
        for entry in os.scandir(self.folder):
            if entry.name.endswith(TMP_SUFFIX):
                os.unlink(entry.path)  # a write that never reached its rename
            elif entry.name.endswith(SUFFIX):
                try:
                    jobs.append(Job.model_validate_json(Path(entry.path).read_bytes()))
                except (OSError, ValidationError, ValueError) as exc:
                    logger.error("job file %s is unreadable, set aside: %s", entry.name, exc)
                    os.replace(entry.path, entry.path + ".bad")
        return sorted(jobs, key=lambda job: job.queued_at)
