"""The `files` backend of the working-memory files: folders of this machine's disk under the configured root.

Every working-memory file lives under the configured root (`AppConfig.working_memory_root`, resolved once when
the config is built); a caller with an API key works in its workspace's folder, `<root>/workspaces/<file name of
the id>` (`workspace_working_root`). Client paths (`store_dir`, `file_path`) are read relative to the caller's
root; an absolute path is accepted only when it already points inside it. A path is judged by where it *resolves*
— `..` components and symlinks are followed first — so `../x`, `/etc/passwd`, `~/x` or a symlink leading out of
the root are all refused with `PathNotAllowedError` (HTTP 403), and the message never reveals the server's
directory layout. A path the file system cannot take (a NUL, a part over 255 bytes: `schema.paths.path_problem`)
is a 400 (`check_client_path`, shared with the table backend). Paths handed back to clients are POSIX paths
relative to the root.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from reme_service.audit.trail import AuditTrail
from reme_service.durable import fsync_path, remove_tree_synced
from reme_service.errors import ConflictError, InvalidRequestError, NotFoundError, PathNotAllowedError, StoreError
from reme_service.schema.paths import path_problem
from reme_service.schema.workspace_ids import WorkspaceId, file_name

#: a name that is a file where the request needs a folder, or the reverse: 409, not the store's 503
NAME_CLASHES = (IsADirectoryError, NotADirectoryError, FileExistsError)


def workspace_working_root(root: Path, workspace_id: WorkspaceId) -> Path:
    """The working-memory folder of one workspace (callers with an API key work in it; a workspace delete purges
    it)."""
    return root / "workspaces" / file_name(workspace_id)


def check_client_path(path: str, field: str) -> None:
    """400 for a path the file system could not take, 403 for a `~` path: the checks every backend makes before it
    judges where the path leads."""
    problem = path_problem(path)  # paths from an agent's tool calls do not pass the request model's check
    if problem is not None:
        raise InvalidRequestError(f"{field} {problem}", details={"field": field})
    if path.startswith("~"):
        raise PathNotAllowedError(f"{field} {path!r} is outside the working-memory root (no '~' paths)")


def outside(path: str, field: str) -> PathNotAllowedError:
    return PathNotAllowedError(f"{field} {path!r} resolves outside the working-memory root; use a path relative to it")


def missing(file_path: str) -> NotFoundError:
    return NotFoundError(f"file {file_path!r} does not exist in the working-memory root")


def not_a_file(file_path: str) -> InvalidRequestError:
    return InvalidRequestError(f"{file_path!r} is not a file")


class WorkingRoot:
    """A working-memory root directory as `WorkingFiles`; turns client paths into checked absolute paths and back."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, path: str, *, field: str = "path") -> Path:
        """The absolute path `path` stands for (relative to the root); 403 when it resolves outside."""
        check_client_path(path, field)
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        resolved = candidate.resolve()
        if resolved != self.root and not resolved.is_relative_to(self.root):
            raise outside(path, field)
        return resolved

    def relative(self, path: Path) -> str:
        """`path` (inside the root) as a POSIX path relative to the root; "" for the root itself."""
        rel = path.relative_to(self.root)
        return "" if rel == Path(".") else rel.as_posix()

    def normalise_dir(self, store_dir: str) -> str:
        return self.relative(self.resolve(store_dir or "", field="store_dir"))

    def write(self, files: Mapping[str, str], trail: AuditTrail | None = None) -> list[str]:
        return write_files_atomically(self, files, trail)

    def is_free(self, rel: str, text: str) -> bool:
        path = self.resolve(rel, field="file path")
        if not path.exists():
            return True
        if not path.is_file():
            return False
        data = text.encode("utf-8")
        return path.stat().st_size == len(data) and path.read_bytes() == data

    def archive_indices(self, store_dir: str, prefix: str, suffix: str) -> set[int]:
        return existing_indices(self.resolve(store_dir, field="store_dir"), prefix, suffix)

    @contextmanager
    def lines(self, file_path: str) -> Iterator[tuple[str, Iterator[str]]]:
        """The file opened for reading, line by line (a large file is streamed, never read whole)."""
        if not file_path:
            raise InvalidRequestError("file_path must not be empty")
        path = self.resolve(file_path, field="file_path")
        shown = self.relative(path)
        if not path.exists():
            raise missing(file_path)
        if not path.is_file():
            raise not_a_file(file_path)
        with path.open(encoding="utf-8", errors="replace", newline=None) as handle:
            yield shown, handle


class WorkingFolders:
    """The `files` backend's `WorkingStore`: the configured root, and a folder under it per workspace."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def files(self, workspace_id: WorkspaceId | None) -> WorkingRoot:
        if workspace_id is None:
            return WorkingRoot(self.root)
        return WorkingRoot(workspace_working_root(self.root, workspace_id))

    def erase_workspace(self, workspace_id: WorkspaceId) -> int:
        return remove_tree_synced(workspace_working_root(self.root, workspace_id))


def write_files_atomically(root: WorkingRoot, files: Mapping[str, str], trail: AuditTrail | None = None) -> list[str]:
    """Write every `{root-relative path: text}` entry (UTF-8), all or nothing as far as the OS allows.

    Phase one writes each text to a temp file beside its target; phase two fsyncs them (concurrently: parallel
    fsyncs share journal commits, measured 3-8x faster than one after the other for ten files on ext4); only when
    all of them are on disk does phase three `os.replace` them into place, and phase four fsyncs their
    directories. A failure (disk full, permissions)
    leaves no new or half-written file behind. Each target is re-checked against the root right before writing.
    Returns the paths. Runs blocking file I/O: call it through `asyncio.to_thread`.
    """
    targets = [(rel, root.resolve(rel, field="file path")) for rel in files]
    staged: list[tuple[Path, Path]] = []
    current = ""
    try:
        for current, target in targets:
            if target.is_dir():  # found now, before any file is replaced, not by phase three's `os.replace`
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            staged.append((Path(tmp_name), target))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(files[current])
        current = ""
        if len(staged) == 1:
            fsync_path(staged[0][0])
        elif staged:
            with ThreadPoolExecutor(max_workers=min(8, len(staged)), thread_name_prefix="fsync") as pool:
                list(pool.map(fsync_path, [tmp for tmp, _ in staged]))
        for tmp, target in staged:
            current = root.relative(target)
            os.replace(tmp, target)
        current = ""
        for directory in dict.fromkeys(target.parent for _, target in staged):  # the new names survive a crash
            fsync_path(directory)
    except OSError as exc:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        which = f" {current!r}" if current else "s"
        message = f"could not write working-memory file{which}: {exc.strerror or exc}"
        if isinstance(exc, NAME_CLASHES):  # the request's paths, not the disk: a file where a folder is, or the reverse
            raise ConflictError(message) from exc
        raise StoreError(message) from exc
    written = [rel for rel, _ in targets]
    if trail is not None:  # the request's audit trail: it records the files written
        trail.wrote_files(written)
    return written


def existing_indices(directory: Path, prefix: str, suffix: str) -> set[int]:
    """The numbers `n` of the files `<prefix><n><suffix>` in `directory` (empty when it does not exist)."""
    if not directory.is_dir():
        return set()
    pattern = index_pattern(prefix, suffix)
    found: set[int] = set()
    for entry in os.scandir(directory):
        match = pattern.match(entry.name)
        if match:
            found.add(int(match.group(1)))
    return found


def index_pattern(prefix: str, suffix: str) -> re.Pattern[str]:
    """`<prefix><n><suffix>`, `n` captured (both backends number archives by it)."""
    return re.compile(re.escape(prefix) + r"(\d+)" + re.escape(suffix) + r"\Z")
