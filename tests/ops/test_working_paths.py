"""Confinement to the working-memory root, file-name sanitising and atomic writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reme_service.config.models import AppConfig
from reme_service.errors import ConflictError, InvalidRequestError, PathNotAllowedError
from reme_service.ops.vector_store.library_io import write_library
from reme_service.ops.working.paths import WorkingRoot, existing_indices, join, safe_stem, write_files_atomically
from reme_service.schema.memory import memory_from_dict
from tests.contract.test_local_store import FsyncRecorder, contents_synced, name_synced


@pytest.fixture
def root(tmp_path: Path) -> WorkingRoot:
    folder = tmp_path / "wm"
    folder.mkdir()
    return WorkingRoot(folder.resolve())


def test_config_root_defaults_under_data_dir_and_is_resolved_once(tmp_path: Path) -> None:
    config = AppConfig(data_dir=str(tmp_path / "data"))
    assert config.working_memory_root == (tmp_path / "data" / "working_memory").resolve()
    explicit = AppConfig(data_dir=str(tmp_path / "data"), working_memory_dir=str(tmp_path / "elsewhere"))
    assert explicit.working_memory_root == (tmp_path / "elsewhere").resolve()
    assert explicit.working_memory_root is explicit.working_memory_root


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("call_abc123", "call_abc123"),
        ("../../etc/passwd", "_.._etc_passwd"),
        ("a/b\\c d", "a_b_c_d"),
        ("..", ""),
        ("...hidden", "hidden"),
        ("", ""),
        ("调用-1", "_-1"),
        ("x" * 300, "x" * 120),
    ],
)
def test_safe_stem(raw: str, expected: str) -> None:
    assert safe_stem(raw) == expected
    assert "/" not in safe_stem(raw) and not safe_stem(raw).startswith(".")


def test_relative_paths_resolve_inside(root: WorkingRoot) -> None:
    assert root.resolve("") == root.root
    assert root.resolve("a/b.txt") == root.root / "a" / "b.txt"
    assert root.resolve("a/../b.txt") == root.root / "b.txt"
    assert root.resolve(str(root.root / "c.txt")) == root.root / "c.txt"  # absolute but inside
    assert root.normalise_dir("./x/y/") == "x/y"
    assert root.normalise_dir("") == ""


@pytest.mark.parametrize("path", ["..", "../x", "a/../../x", "/etc/passwd", "/", "~/x", "~"])
def test_paths_outside_are_refused(root: WorkingRoot, path: str) -> None:
    with pytest.raises(PathNotAllowedError) as info:
        root.resolve(path, field="store_dir")
    assert str(root.root) not in info.value.message  # the server's layout is not revealed


def test_symlinks_are_judged_by_their_target(root: WorkingRoot, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root.root / "link").symlink_to(outside, target_is_directory=True)
    (root.root / "inner").mkdir()
    (root.root / "alias").symlink_to(root.root / "inner", target_is_directory=True)
    with pytest.raises(PathNotAllowedError):
        root.resolve("link/secret.txt")
    with pytest.raises(PathNotAllowedError):
        root.resolve("link")
    assert root.resolve("alias/f.txt") == root.root / "inner" / "f.txt"


def test_nul_is_a_bad_request(root: WorkingRoot) -> None:
    with pytest.raises(InvalidRequestError):
        root.resolve("a\x00b")


def test_join() -> None:
    assert join("", "a.txt") == "a.txt"
    assert join("d/e", "a.txt") == "d/e/a.txt"


def test_atomic_writes_create_folders_and_leave_no_temp_files(root: WorkingRoot) -> None:
    written = write_files_atomically(root, {"s/a.txt": "alpha", "s/deep/b.json": "[1]", "c.txt": "é"})
    assert written == ["s/a.txt", "s/deep/b.json", "c.txt"]
    assert (root.root / "s" / "a.txt").read_text() == "alpha"
    assert (root.root / "c.txt").read_text(encoding="utf-8") == "é"
    write_files_atomically(root, {"s/a.txt": "beta"})
    assert (root.root / "s" / "a.txt").read_text() == "beta"
    leftovers = [p for p in root.root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_failed_batch_writes_nothing(root: WorkingRoot) -> None:
    (root.root / "blocker").write_text("a file where a folder is needed")
    with pytest.raises(ConflictError, match="could not write working-memory file 'blocker/x.txt'"):
        write_files_atomically(root, {"first.txt": "1", "blocker/x.txt": "2"})
    assert sorted(p.name for p in root.root.iterdir()) == ["blocker"]


def test_a_folder_in_a_files_place_is_a_conflict_and_leaves_no_temp_file(root: WorkingRoot) -> None:
    (root.root / "taken").mkdir()  # a folder cannot be replaced by a file
    with pytest.raises(ConflictError, match="Is a directory"):
        write_files_atomically(root, {"taken": "x"})
    assert sorted(os.listdir(root.root)) == ["taken"]


def test_write_refuses_paths_outside(root: WorkingRoot) -> None:
    with pytest.raises(PathNotAllowedError):
        write_files_atomically(root, {"ok.txt": "x", "../evil.txt": "y"})
    assert not (root.root / "ok.txt").exists()
    assert not (root.root.parent / "evil.txt").exists()


def test_existing_indices(root: WorkingRoot) -> None:
    assert existing_indices(root.root / "missing", "c_", ".json") == set()
    for name in ("c_0.json", "c_3.json", "c_x.json", "cc_1.json", "c_2.json.tmp"):
        (root.root / name).write_text("")
    assert existing_indices(root.root, "c_", ".json") == {0, 3}


def test_written_files_and_their_names_are_fsynced(root: WorkingRoot, monkeypatch: pytest.MonkeyPatch) -> None:
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    write_files_atomically(root, {"s/a.txt": "alpha", "c.txt": "gamma"})
    for name in ("s/a.txt", "c.txt"):
        assert contents_synced(fsync.calls, root.root / name) and name_synced(fsync.calls, root.root / name), name


@pytest.mark.anyio
async def test_a_library_dump_is_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsync = FsyncRecorder(os.fsync)
    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "lib" / "ws.jsonl"
    await write_library(target, [memory_from_dict({"when_to_use": "a", "content": "b"})])
    assert contents_synced(fsync.calls, target) and name_synced(fsync.calls, target)
