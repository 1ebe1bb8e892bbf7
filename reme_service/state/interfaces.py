"""What each backend of the state provides (`files`: today's files under data_dir; `postgres`: `state/pg/`).

One contract per concept, so the code above (auth, audit recorder, history lookup, job queue, event bus) works
with either; tests/contract/test_state_*.py hold both backends to the same contract.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from reme_service.audit.record import AuditRecord
from reme_service.audit.trail import AuditTrail
from reme_service.auth.caller import Caller
from reme_service.history.entry import HistoryStep
from reme_service.jobs.files import Cancellation
from reme_service.jobs.record import Job
from reme_service.schema.workspace_ids import WorkspaceId


class KeyStore(Protocol):
    """The live view of the API keys a service authenticates against (`auth.keyring.KeyRing`, `pg.keys.PgKeyRing`)."""

    def waits(self, key: str) -> bool:
        """Whether `authenticate(key)` would wait on I/O (then run it off the event loop)."""

    @property
    def where(self) -> str: ...

    def load(self) -> None: ...

    def has_keys(self) -> bool: ...

    def has_active_keys(self) -> bool: ...

    def unavailable(self) -> str | None:
        """Why the keys cannot be read now (None: they can). Then no request can be admitted, keyless ones
        included: whether a key is needed is not known."""

    def authenticate(self, key: str) -> Caller: ...

    def current(self, key_id: str) -> Caller | None: ...

    def flush(self) -> None: ...


class RateLimit(Protocol):
    """A token bucket per API key (`auth.rate_limit.RateLimiter`: this process's; `pg.buckets.PgRateLimiter`: every
    node's). `wait(key_id)` takes a token and returns 0, or the seconds until one is there (nothing taken);
    `blocking` says it waits on I/O (run it off the event loop)."""

    @property
    def blocking(self) -> bool: ...

    def wait(self, key_id: str) -> float: ...


class AuditSink(Protocol):
    """Where audit records are appended, durable when `append` returns (`audit.log.AuditLog`, `pg.records.PgAuditLog`).
    `token` is the request's trail token: the PostgreSQL log keeps, of the rows of one token, the last."""

    async def append(self, record: AuditRecord, *, token: str | None = None) -> None: ...


class RecordsTogether(Protocol):
    """A request's history entries and audit record written in one commit, when both live in one database
    (`pg.records.PgJournal`): one flush instead of two."""

    async def commit(
        self, history: Mapping[str, Sequence[HistoryStep]], record: AuditRecord | None, token: str | None
    ) -> None: ...


class HistoryStore(Protocol):
    """Every memory's history (`history.log.HistoryLog`, `pg.records.PgHistoryLog`)."""

    async def write(self, workspace_id: str, steps: Sequence[HistoryStep]) -> None: ...

    async def read(self, workspace_id: str, memory_id: str) -> list[dict[str, Any]]: ...


class JobStore(Protocol):
    """The jobs and their Idempotency-Keys, shared by every process that runs them (`jobs.files.JobFiles`,
    `pg.jobs.PgJobStore`). `claim` returns a handle while the caller holds the job's run lock (None: another holds
    it); the lock ends with `release` or with the holder's death."""

    def save(self, job: Job) -> tuple[Job, int]: ...

    def cancelled(self, job_id: str) -> str | None: ...

    def cancel(self, job_id: str, cancellation: Cancellation, *, scrub_finished: bool = False) -> Job | None: ...

    def erase_workspace(
        self, workspace_id: str, cancellation: Cancellation, *, skip: str | None = None
    ) -> list[Job]: ...

    def mark_writing(self, job_id: str) -> None: ...

    def began_writing(self, job_id: str) -> bool: ...

    def size(self, job_id: str) -> int: ...

    def load(self, job_id: str) -> Job | None: ...

    def remove(self, job: Job) -> None: ...

    def claim(self, job_id: str) -> int | None: ...

    def release(self, handle: int) -> None: ...

    def reserve_key(self, digest: str, job_id: str) -> str: ...

    def key_holder(self, digest: str) -> str | None: ...

    def load_all(self) -> list[Job]: ...

    def load_open(self) -> list[Job]: ...


class WorkingFiles(Protocol):
    """One caller's working-memory files (ReMe's offload store): a root and the files under it, named by POSIX paths
    relative to it (`state.working_folder.WorkingRoot`: a folder of this machine's disk; `pg.working.PgWorkingFiles`:
    rows of the `working_files` table, shared by every node). Every method blocks: call it off the event loop.

    Paths are confined to the root: `..`, `~` and absolute paths that lead outside it are 403
    (`PathNotAllowedError`), a path the file system could not take (a NUL, an over-long part) 400."""

    def normalise_dir(self, store_dir: str) -> str:
        """`store_dir` checked and rewritten relative to the root ("" = the root itself)."""
        ...

    def write(self, files: Mapping[str, str], trail: AuditTrail | None = None) -> list[str]:
        """Write every `{path: text}`, all or nothing (503 `StoreError` when it cannot: nothing new is left); record
        the paths in `trail` (the request's audit trail) once written; return the paths as given."""
        ...

    def is_free(self, rel: str, text: str) -> bool:
        """True when `rel` holds no file, or a file of exactly `text`: the name may be (over)written with it."""
        ...

    def archive_indices(self, store_dir: str, prefix: str, suffix: str) -> set[int]:
        """The numbers `n` of the files `<prefix><n><suffix>` directly in the folder `store_dir` (empty if none)."""
        ...

    def lines(self, file_path: str) -> AbstractContextManager[tuple[str, Iterator[str]]]:
        """The file's root-relative display path and its lines (UTF-8, undecodable bytes replaced, universal
        newlines, each with its newline): 400 for an empty path or a folder, 404 for a missing file."""
        ...


class WorkingStore(Protocol):
    """Where the working-memory files of a deployment live (`state.working_folder.WorkingFolders`,
    `pg.working.PgWorkingStore`)."""

    def files(self, workspace_id: WorkspaceId | None) -> WorkingFiles:
        """The files one caller reaches: the whole root (None: a trusted caller), or a workspace's own folder
        (`workspaces/<file name of the id>` under it: a caller with an API key)."""
        ...

    def erase_workspace(self, workspace_id: WorkspaceId) -> int:
        """Remove the workspace's folder and every file in it, durably; returns how many files it held (blocks)."""
        ...
