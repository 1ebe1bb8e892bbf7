"""The `postgres` backend of the working-memory files: rows of `<prefix>working_files`, so every node reads and greps
what another wrote (message offload, `batch_write_file`, `agentic_retrieve`'s archives).

A row is one file: `(folder, path, content, size, updated_at)`, keyed by `(folder, path)`. The table mirrors the
files backend's layout under the root: `folder` is a workspace's folder name (`workspaces/<file_name(id)>`, where
a caller with an API key works; `schema.workspace_ids.file_name`, which is the id itself for ids made of
`[A-Za-z0-9._-]`), or "" for the files outside every workspace's folder; `path` is the file's POSIX path inside
that folder. So a trusted caller reaching `workspaces/<name>/x.txt` reads the row a keyed caller of that workspace
wrote as `x.txt`, as on disk, and a workspace's erase is one `DELETE` by its folder. The content is the text's
UTF-8 bytes (`bytea`: PostgreSQL's `text` cannot hold the NUL characters a JSON message may carry), read back as
the files backend reads a file (undecodable bytes replaced, universal newlines).

Confinement is as strict as on disk, judged lexically (there are no symlinks in a table): a client path is read
relative to the caller's root (the configured `working_memory_root`, or the workspace's folder under it), `..`
components are resolved (`posixpath.normpath`), and what ends up outside the root is 403 with the files backend's
message; `~` paths are 403, a NUL or an over-long part 400 (`working_folder.check_client_path`, shared). As on a
disk, a name is a file or a folder, never both: a write whose file would stand where a folder is (files under its
name), or under a name that is a file, fails whole, like the files backend's (409 `ConflictError`, "Is a directory" /
"Not a directory"); the check and the write hold a transaction lock on the folder, so two writes at once cannot
make both. A name that is the folder of a workspace (or the caller's root) cannot be written.

A write of several files is one transaction (all or nothing); every call blocks on the database (a worker
thread's). PostgreSQL down: `StoreError`, 503 `store_unavailable`.
"""

from __future__ import annotations

import io
import itertools
import posixpath
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from reme_service.audit.trail import AuditTrail
from reme_service.errors import ConflictError, InvalidRequestError
from reme_service.schema.workspace_ids import WorkspaceId, file_name
from reme_service.state.pg.db import Conn, StateDb
from reme_service.state.working_folder import check_client_path, index_pattern, missing, not_a_file, outside

WORKSPACES = "workspaces"  # the folder of the workspaces' folders under the root, as on disk


def row_key(parts: Sequence[str]) -> tuple[str, str]:
    """The `(folder, path)` of the row of the file at `parts` under the root (as on disk: `workspaces/<folder>/...`
    is a workspace's folder)."""
    if len(parts) >= 2 and parts[0] == WORKSPACES:
        return parts[1], "/".join(parts[2:])
    return "", "/".join(parts)


def starting_with(prefix: str) -> str:
    """A LIKE pattern of the texts that start with `prefix` (its wildcards escaped). The columns are in byte order
    (`COLLATE "C"`), so PostgreSQL reads such a prefix as a range of the primary key's index."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def lock_folders(conn: Conn, table: str, folders: Iterable[str]) -> None:
    """Hold `folders` of `table` until the transaction ends (a writer's name check and rows, one at a time)."""
    for folder in sorted(folders):  # in one order: two writers cannot wait on each other
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{table}/{folder}",))


def _name_clash(conn: Conn, table: str, names: Mapping[tuple[str, str], str]) -> ConflictError | None:
    """Why writing files at `names` (`(folder, path)` of a row: the path the client gave) would make a name both a
    file and a folder, if it would: among the names themselves, or with the table as it is (one query: ranges of
    the primary key's index for the folders, its keys for the files)."""
    wanted: list[tuple[str, str, int]] = []  # (folder, path, index of the name): files under the path
    parents: list[tuple[str, str, int]] = []  # (folder, path, index of the name): a folder the path is under
    for index, ((folder, path), shown) in enumerate(names.items()):
        above = ["/".join(path.split("/")[:end]) for end in range(1, path.count("/") + 1)]
        if any(f == folder and p.startswith(f"{path}/") for f, p in names):
            return _clash(shown, "Is a directory")
        if any((folder, parent) in names for parent in above):
            return _clash(shown, "Not a directory")
        wanted.append((folder, path, index))
        parents.extend((folder, parent, index) for parent in above)
    query = (  # each name probes the primary key's index (LATERAL ... LIMIT 1), never a scan of the table
        "SELECT n.i, true FROM unnest(%s::text[], %s::text[], %s::int[]) AS n(folder, path, i) CROSS JOIN LATERAL ("  # noqa: S608
        f'SELECT 1 FROM {table} t WHERE t.folder = n.folder COLLATE "C" '
        """AND t.path >= n.path || '/' COLLATE "C" AND t.path < n.path || '0' COLLATE "C" LIMIT 1) AS hit """
        "UNION ALL SELECT p.i, false FROM unnest(%s::text[], %s::text[], %s::int[]) AS p(folder, path, i) "
        f'CROSS JOIN LATERAL (SELECT 1 FROM {table} t WHERE t.folder = p.folder COLLATE "C" '
        """AND t.path = p.path COLLATE "C" LIMIT 1) AS hit LIMIT 1"""  # '0' follows '/': the range is `path/...`
    )
    columns = [list(column) for column in zip(*wanted, strict=True)] if wanted else [[], [], []]
    above_columns = [list(column) for column in zip(*parents, strict=True)] if parents else [[], [], []]
    row = conn.execute(query.encode(), (*columns, *above_columns)).fetchone()
    if row is None:
        return None
    shown = list(names.values())[row[0]]
    return _clash(shown, "Is a directory" if row[1] else "Not a directory")


def _clash(shown: str, reason: str) -> ConflictError:
    """The files backend's answer to such a write (`working_folder.NAME_CLASHES`): 409."""
    return ConflictError(f"could not write working-memory file {shown!r}: {reason}")


@dataclass(frozen=True)
class Located:
    """Where a client path leads: the row's `folder` and `path` ("" = the folder itself), and the path as the
    caller is shown it (relative to its root)."""

    folder: str
    path: str
    shown: str


class PgWorkingFiles:
    """One caller's working-memory files in the table (`state.interfaces.WorkingFiles`)."""

    def __init__(self, db: StateDb, root: PurePosixPath, folder: str | None) -> None:
        self._db = db
        self._table = db.table("working_files")
        self._root = root  # the configured root: absolute paths inside it are accepted, as on disk
        self._base = root if folder is None else root / WORKSPACES / folder  # this caller's root

    def _locate(self, path: str, field: str) -> Located:
        check_client_path(path, field)
        candidate = path if posixpath.isabs(path) else f"{self._base}/{path}"
        normal = PurePosixPath(posixpath.normpath(candidate))
        if normal != self._base and not normal.is_relative_to(self._base):
            raise outside(path, field)
        shown = normal.relative_to(self._base).as_posix()
        folder, inside = row_key(normal.relative_to(self._root).parts)
        return Located(folder, inside, "" if shown == "." else shown)

    def normalise_dir(self, store_dir: str) -> str:
        return self._locate(store_dir or "", "store_dir").shown

    def write(self, files: Mapping[str, str], trail: AuditTrail | None = None) -> list[str]:
        rows: list[tuple[str, str, bytes, int]] = []
        names: dict[tuple[str, str], str] = {}
        for rel, text in files.items():
            where = self._locate(rel, "file path")
            if not where.path or (where.folder == "" and where.path == WORKSPACES):
                raise _clash(rel, "Is a directory")
            data = text.encode("utf-8")
            rows.append((where.folder, where.path, data, len(data)))
            names[where.folder, where.path] = rel
        query = (
            f"INSERT INTO {self._table} (folder, path, content, size, updated_at) VALUES (%s, %s, %s, %s, now()) "  # noqa: S608
            "ON CONFLICT (folder, path) DO UPDATE SET content = EXCLUDED.content, size = EXCLUDED.size, "
            "updated_at = EXCLUDED.updated_at"
        )

        def work(conn: Conn) -> None:
            lock_folders(conn, self._table, {row[0] for row in rows})
            clash = _name_clash(conn, self._table, names)
            if clash is not None:
                raise clash
            with conn.cursor() as cursor:
                cursor.executemany(query.encode(), rows)  # the table name is built from the validated prefix

        if rows:
            self._db.run(work)  # one transaction: every file or none
        written = list(files)
        if trail is not None:  # the request's audit trail: it records the files written
            trail.wrote_files(written)
        return written

    def _content(self, where: Located) -> bytes | None:
        query = f"SELECT content FROM {self._table} WHERE folder = %s AND path = %s"  # noqa: S608
        row = self._db.run(lambda conn: conn.execute(query.encode(), (where.folder, where.path)).fetchone())
        return None if row is None else bytes(row[0])

    def _is_folder(self, where: Located) -> bool:
        if not where.path:
            return True
        query = f"SELECT EXISTS (SELECT 1 FROM {self._table} WHERE folder = %s AND path LIKE %s)"  # noqa: S608
        args: tuple[str, ...] = (where.folder, starting_with(f"{where.path}/"))
        if where.folder == "" and where.path == WORKSPACES:  # the folder of the workspaces' folders
            query = f"SELECT EXISTS (SELECT 1 FROM {self._table} WHERE folder <> '')"  # noqa: S608
            args = ()
        row = self._db.run(lambda conn: conn.execute(query.encode(), args).fetchone())
        return bool(row and row[0])

    def is_free(self, rel: str, text: str) -> bool:
        where = self._locate(rel, "file path")
        held = self._content(where)
        if held is None:
            return not self._is_folder(where)
        return held == text.encode("utf-8")

    def archive_indices(self, store_dir: str, prefix: str, suffix: str) -> set[int]:
        where = self._locate(store_dir, "store_dir")
        head = f"{where.path}/{prefix}" if where.path else prefix
        query = f"SELECT path FROM {self._table} WHERE folder = %s AND path LIKE %s"  # noqa: S608
        paths = self._db.run(lambda conn: conn.execute(query.encode(), (where.folder, starting_with(head))).fetchall())
        pattern = index_pattern(head, suffix)
        return {int(match.group(1)) for (path,) in paths if (match := pattern.match(path))}

    @contextmanager
    def lines(self, file_path: str) -> Iterator[tuple[str, Iterator[str]]]:
        """The stored text, line by line (read whole from its row: the files of one request's size)."""
        if not file_path:
            raise InvalidRequestError("file_path must not be empty")
        where = self._locate(file_path, "file_path")
        content = None if not where.path else self._content(where)
        if content is None:
            raise not_a_file(file_path) if self._is_folder(where) else missing(file_path)
        yield where.shown, io.StringIO(content.decode("utf-8", errors="replace"), newline=None)


class PgWorkingStore:
    """The `postgres` backend's `WorkingStore`: one table for every node."""

    def __init__(self, db: StateDb, root: Path) -> None:
        self._db = db
        self._root = PurePosixPath(root.as_posix())

    def files(self, workspace_id: WorkspaceId | None) -> PgWorkingFiles:
        return PgWorkingFiles(self._db, self._root, None if workspace_id is None else file_name(workspace_id))

    def erase_workspace(self, workspace_id: WorkspaceId) -> int:
        query = f"DELETE FROM {self._db.table('working_files')} WHERE folder = %s"  # noqa: S608
        return self._db.run(lambda conn: conn.execute(query.encode(), (file_name(workspace_id),)).rowcount)

    def import_files(self, files: Iterable[tuple[Sequence[str], bytes]], *, batch: int = 200) -> int:
        """Copy files of a disk's root (`reme state migrate`): each `(path parts under the root, bytes)` becomes a
        row unless one is there already (left as it is), `batch` files per transaction. Returns how many were
        copied."""
        query = (
            f"INSERT INTO {self._db.table('working_files')} (folder, path, content, size) "  # noqa: S608
            "VALUES (%s, %s, %s, %s) ON CONFLICT (folder, path) DO NOTHING"
        ).encode()
        rows = ((*row_key(parts), data, len(data)) for parts, data in files)
        copied = 0
        while chunk := list(itertools.islice(rows, batch)):
            kept = [row for row in chunk if row[1]]  # a file in place of a workspace's folder has no row

            def work(conn: Conn, kept: list[tuple[str, str, bytes, int]] = kept) -> int:
                return sum(conn.execute(query, row).rowcount for row in kept)

            copied += self._db.run(work)
        return copied
