"""One contract, two backends: the working-memory files (ReMe's offload store) behave the same in folders of one
machine's disk (`state/working_folder.py`) and in PostgreSQL's `working_files` table (`state/pg/working.py`), as the
ops use them: all-or-nothing writes, confinement to the caller's root, archive numbering, grep and read with their
errors and the regex time budget, and a workspace's erase.

Each PostgreSQL case has tables of its own (a random `state.table_prefix`) on the tests' real server.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from reme_service.config.models import AppConfig
from reme_service.errors import ConflictError, InvalidRequestError, NotFoundError, PathNotAllowedError, StoreError
from reme_service.ops.working.file_tools import grep_file, read_file
from reme_service.ops.working.offload import DiskView
from reme_service.schema.workspace_ids import WorkspaceId, file_name
from reme_service.state.interfaces import WorkingFiles, WorkingStore
from reme_service.state.layer import StateLayer
from reme_service.state.pg.working import lock_folders
from tests.conditions import until_sync
from tests.fakes.pg_server import pg_dsn, waits_on_lock  # noqa: F401 - fixture used by name

WS = WorkspaceId("team-1")
OTHER = WorkspaceId("alice@example.com")  # a folder name unlike its id: `alice%40example.com`
MARKER = "zq-working-marker-77c1"


@pytest.fixture(params=["files", "postgres"])
def layer(request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str) -> Iterator[StateLayer]:  # noqa: F811
    state: dict[str, object] = {"backend": request.param}
    if request.param == "postgres":
        state.update(dsn=pg_dsn, table_prefix=f"t{secrets.token_hex(4)}_")
    config = AppConfig(data_dir=str(tmp_path / "data"), state=state)  # type: ignore[arg-type]
    built = StateLayer.build(config, Path(config.data_dir))
    yield built
    asyncio.run(built.stop())


@pytest.fixture
def store(layer: StateLayer) -> WorkingStore:
    return layer.working


def lines_of(files: WorkingFiles, path: str) -> list[str]:
    return read_file(files, path).text.splitlines()


def test_files_written_are_read_and_grepped_with_line_numbers(store: WorkingStore) -> None:
    files = store.files(WS)
    written = files.write({"s/log.txt": "INFO start\nERROR payment 4711\r\nerror retry\rend", "c.json": "[1]"})
    assert written == ["s/log.txt", "c.json"]
    assert lines_of(files, "s/log.txt") == ["INFO start", "ERROR payment 4711", "error retry", "end"]  # \r\n, \r
    result = grep_file(files, "./s/../s/log.txt", r"error \w+", limit=1)
    assert (result.text, result.matches, result.truncated, result.path) == (
        "s/log.txt:2:ERROR payment 4711", 1, True, "s/log.txt")  # fmt: skip
    read = read_file(files, "s/log.txt", offset=1, limit=2)
    assert (read.text, read.start_line, read.has_more) == ("ERROR payment 4711\nerror retry", 2, True)
    files.write({"c.json": "[2]"})  # rewritten in place
    assert lines_of(files, "c.json") == ["[2]"]
    assert grep_file(files, "c.json", "nothing").text == 'No matches found for pattern "nothing" in file_path "c.json".'


def test_a_trusted_caller_reaches_every_workspace_folder_and_a_key_only_its_own(store: WorkingStore) -> None:
    store.files(WS).write({"notes.txt": "team note"})
    store.files(OTHER).write({"notes.txt": "alice note"})
    root = store.files(None)
    assert lines_of(root, "workspaces/team-1/notes.txt") == ["team note"]
    assert lines_of(root, "workspaces/alice%40example.com/notes.txt") == ["alice note"]
    root.write({"workspaces/team-1/from-root.txt": "put there by the operator", "top.txt": "root file"})
    assert lines_of(store.files(WS), "from-root.txt") == ["put there by the operator"]
    for reach in ("../alice%40example.com/notes.txt", "../../top.txt"):
        with pytest.raises(PathNotAllowedError):
            read_file(store.files(WS), reach)


@pytest.mark.parametrize("path", ["../x.txt", "a/../../x.txt", "/etc/passwd", "~/x.txt", "~root/x", ".."])
def test_paths_leading_outside_the_root_are_refused_everywhere(store: WorkingStore, path: str) -> None:
    files = store.files(WS)
    calls = {
        "write": lambda: files.write({"ok.txt": "x", path: "y"}),
        "read": lambda: read_file(files, path),
        "grep": lambda: grep_file(files, path, "x"),
        "is_free": lambda: files.is_free(path, "x"),
        "archives": lambda: files.archive_indices(path, "c_", ".json"),
        "store_dir": lambda: files.normalise_dir(path),
    }
    for name, call in calls.items():
        with pytest.raises(PathNotAllowedError) as caught:
            call()
        assert caught.value.status == 403, name
        assert "working-memory root" in caught.value.message and str(Path.home()) not in caught.value.message
    with pytest.raises(NotFoundError):  # the refused batch wrote nothing, not even its good file
        read_file(files, "ok.txt")


@pytest.mark.parametrize(("path", "reason"), [("a\x00b.txt", "NUL"), ("s/" + "n" * 300 + ".txt", "part of 304 bytes")])
def test_paths_the_file_system_could_not_take_are_a_400(store: WorkingStore, path: str, reason: str) -> None:
    files = store.files(WS)
    for call in (lambda: files.write({path: "x"}), lambda: read_file(files, path), lambda: files.is_free(path, "")):
        with pytest.raises(InvalidRequestError, match=reason):
            call()


def test_an_absolute_path_inside_the_root_is_accepted_and_shown_relative(store: WorkingStore, tmp_path: Path) -> None:
    root = store.files(None)
    root.write({"s/a.txt": "alpha"})
    absolute = str((tmp_path / "data" / "working_memory" / "s" / "a.txt").resolve())
    assert grep_file(root, absolute, "alpha").text == "s/a.txt:1:alpha"
    assert root.normalise_dir(str((tmp_path / "data" / "working_memory" / "s").resolve())) == "s"
    assert root.normalise_dir("s/./deep/..") == "s" and root.normalise_dir("") == ""


def test_read_and_grep_errors(store: WorkingStore) -> None:
    files = store.files(WS)
    files.write({"s/a.txt": "one\ntwo\n"})
    with pytest.raises(NotFoundError, match="does not exist"):
        read_file(files, "s/missing.txt")
    with pytest.raises(InvalidRequestError, match="is not a file"):
        grep_file(files, "s", "x")
    with pytest.raises(InvalidRequestError, match="must not be empty"):
        read_file(files, "")
    with pytest.raises(InvalidRequestError, match="offset 5 is past the end of 's/a.txt', which has 2 lines"):
        read_file(files, "s/a.txt", offset=5)
    with pytest.raises(InvalidRequestError, match="invalid regular expression"):
        grep_file(files, "s/a.txt", "(")


def test_a_backtracking_pattern_is_stopped_by_its_budget(store: WorkingStore) -> None:
    files = store.files(WS)
    files.write({"bomb.txt": "fine\n" + "a" * 26 + "!\n"})
    with pytest.raises(InvalidRequestError, match=r"took longer than 0.2 s to search 'bomb.txt' \(stopped at line 2\)"):
        grep_file(files, "bomb.txt", r"(a|a)+$", timeout=0.2)


def test_a_name_is_free_when_missing_or_holding_exactly_the_text(store: WorkingStore) -> None:
    files = store.files(WS)
    files.write({"s/a.txt": "alpha"})
    assert files.is_free("s/new.txt", "anything")
    assert files.is_free("s/a.txt", "alpha") and not files.is_free("s/a.txt", "alphabet")
    assert not files.is_free("s", "")  # a folder
    files.write({"t/aXb%/x.txt": "under a folder whose name a LIKE wildcard would match"})
    assert files.is_free("t/a_b%", "x") and not files.is_free("t/aXb%", "x")
    with pytest.raises(NotFoundError):
        read_file(files, "t/a_b%")


def test_archives_are_numbered_from_the_files_in_one_folder(store: WorkingStore) -> None:
    files = store.files(WS)
    assert files.archive_indices("s", "c_", ".json") == set()
    names = ["c_0.json", "c_3.json", "c_x.json", "cc_1.json", "c_2.json.tmp", "deep/c_9.json"]
    files.write({f"s/{name}": "[]" for name in names} | {"c_7.json": "[]"})
    assert files.archive_indices("s", "c_", ".json") == {0, 3}
    assert files.archive_indices("", "c_", ".json") == {7}
    assert files.archive_indices("s/deep", "c_", ".json") == {9}
    assert DiskView(files).first_archive_index("s", "c") == 4
    assert DiskView(store.files(OTHER)).first_archive_index("s", "c") == 0  # another workspace's folder


def test_a_failed_write_leaves_none_of_its_files(layer: StateLayer) -> None:
    """A failure part-way through a batch (a file where a folder is needed on disk; the database refusing the
    second row of the transaction) leaves none of the batch's files, and the earlier ones as they were."""
    files = layer.working.files(WS)
    files.write({"kept.txt": "old"})
    refusal: type[Exception] = ConflictError  # the request's paths clash with the disk's names: 409
    if layer.db is None:
        files.write({"blocker": "a file where a folder is needed"})
        failing = "blocker/x.txt"
    else:
        db, failing, refusal = layer.db, "refused.txt", StoreError  # the database refuses the row: 503
        db.run(lambda conn: conn.execute(
            f"CREATE FUNCTION {db.prefix}refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "  # noqa: S608
            "IF NEW.path = 'refused.txt' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$; "
            f"CREATE TRIGGER refuse BEFORE INSERT ON {db.table('working_files')} "
            f"FOR EACH ROW EXECUTE FUNCTION {db.prefix}refuse()".encode()))  # fmt: skip
    with pytest.raises(refusal):
        files.write({"kept.txt": "new", "first.txt": "1", failing: "2"})
    assert lines_of(files, "kept.txt") == ["old"]
    with pytest.raises(NotFoundError):
        read_file(files, "first.txt")


def test_a_name_is_a_file_or_a_folder_never_both(store: WorkingStore) -> None:
    """As on a disk, so in the table: a file cannot stand where files are under its name, nor under a file's name;
    such a write fails whole, and the files that were there stay as they were."""
    files = store.files(WS)
    files.write({"a/b.txt": "under a", "f": "a file"})
    for clash, reason in (("a", "Is a directory"), ("f/x.txt", "Not a directory|File exists")):
        with pytest.raises(ConflictError, match=reason):
            files.write({"ok.txt": "1", clash: "2"})
    with pytest.raises(ConflictError):  # the clash is within the batch itself
        files.write({"n": "1", "n/x.txt": "2"})
    for gone in ("ok.txt", "n/x.txt", "f/x.txt"):
        with pytest.raises(NotFoundError):
            read_file(files, gone)
    assert lines_of(files, "a/b.txt") == ["under a"] and lines_of(files, "f") == ["a file"]
    with pytest.raises(InvalidRequestError, match="is not a file"):
        read_file(files, "a")


@pytest.mark.parametrize("layer", ["postgres"], indirect=True)  # (one disk holds a name as one thing by itself)
def test_two_nodes_writing_a_file_and_a_folder_of_one_name_at_once_make_one_of_them(
    layer: StateLayer,
    pg_dsn: str,  # noqa: F811
) -> None:
    """Another node's transaction writes `c/x.txt` and has not committed: a write of `c` waits for it, then sees
    the folder and fails (without the folder lock, both would commit)."""
    assert layer.db is not None
    layer.working.files(WS).write({"first.txt": "(makes the table)"})
    table = layer.db.table("working_files")
    folder = file_name(WS)
    with psycopg.connect(pg_dsn) as other, psycopg.connect(pg_dsn, autocommit=True) as watcher:
        lock_folders(other, table, [folder])
        other.execute(
            f"INSERT INTO {table} (folder, path, content, size) VALUES (%s, 'c/x.txt', 'x', 1)",  # noqa: S608
            (folder,),
        )
        with ThreadPoolExecutor(1) as pool:
            writing = pool.submit(layer.working.files(WS).write, {"c": "a file"})

            until_sync(lambda: waits_on_lock(watcher, "pg_advisory_xact_lock"))
            other.commit()
            with pytest.raises(ConflictError, match="Is a directory"):
                writing.result(timeout=60)
    assert lines_of(layer.working.files(WS), "c/x.txt") == ["x"]


def test_erasing_a_workspace_removes_its_files_and_only_its_own(layer: StateLayer, tmp_path: Path) -> None:
    store = layer.working
    store.files(WS).write({"a.txt": MARKER, "s/b.txt": f"{MARKER} again"})
    store.files(None).write({"workspaces/team-1/c.txt": MARKER})
    store.files(OTHER).write({"a.txt": "kept"})
    assert store.erase_workspace(WS) == 3
    for path in ("a.txt", "s/b.txt", "c.txt"):
        with pytest.raises(NotFoundError):
            read_file(store.files(WS), path)
    assert lines_of(store.files(OTHER), "a.txt") == ["kept"]
    assert store.erase_workspace(WS) == 0
    if layer.db is None:
        assert not any(MARKER.encode() in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    else:
        db = layer.db
        query = f"SELECT count(*) FROM {db.table('working_files')} WHERE position(%s::bytea in content) > 0"  # noqa: S608
        row = db.run(lambda conn: conn.execute(query.encode(), (MARKER.encode(),)).fetchone())
        assert row == (0,)
