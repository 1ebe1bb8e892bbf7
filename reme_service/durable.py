"""How the service makes bytes durable: every fsync of the local store, and of working-memory files, is here.

A write counts as done only when its data and, for a new or renamed name, its directory entry are on disk:

* `atomic_write` replaces a file whole: write a temporary sibling, fsync it, rename it over the target, fsync
  the directory (so the rename survives a crash too). Readers see the old or the new file, never a mix. The file
  is the service user's alone (mode 0600, whatever the umask): it holds memories' text.
* `append_synced` appends to an open descriptor and fsyncs it before returning.
* `truncate_synced` cuts a file (by descriptor or path) back to a length and fsyncs it.
* `fsync_path` makes a file's data, or a directory's entries (a rename, an unlink), durable.
* `exclusive_lock` holds an exclusive `flock` on a lock file for a block: one read-modify-write of shared files at a
  time, across processes (the key file, the history files).

tests/contract/test_local_store.py checks, by recording the real `os.fsync` calls, that every acknowledged write
of the local store went through here.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

TMP_SUFFIX = ".tmp"


def fsync_path(path: Path) -> None:
    """fsync the file or directory `path` (for a directory: its entries, names created, renamed or removed)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def exclusive_lock(lock_file: Path) -> Iterator[None]:
    """An exclusive `flock` on `lock_file` (created, with its folder, when missing) for the block; it waits for any
    holder. Each call opens its own descriptor, so threads of one process exclude each other too; closing it at the
    end of the block releases the lock (and a process that dies releases it with its descriptors)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def atomic_write(path: Path, chunks: Iterable[bytes | memoryview], *, tmp: Path | None = None) -> None:
    """Replace `path` by the concatenated `chunks` (any iterable: written as they come), durably: a temporary file
    (`<name>.tmp` beside it, or `tmp`), fsynced, renamed over `path`, then the directory fsynced. On failure the
    temporary file is removed and `path` is untouched. The new file has mode 0600."""
    tmp = tmp or path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a temporary file left by a crash keeps its old mode through O_CREAT
        with os.fdopen(fd, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def append_synced(fd: int, data: bytes) -> None:
    """Write all of `data` at the end of the file open (O_APPEND) as `fd`, then fsync it. OSError on failure,
    possibly after part of `data` was written."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


def truncate_synced(target: int | Path, size: int) -> None:
    """Cut the file (an open descriptor, or a path) to `size` bytes and fsync it."""
    if isinstance(target, int):
        os.ftruncate(target, size)
        os.fsync(target)
        return
    with open(target, "r+b") as file:
        file.truncate(size)
        os.fsync(file.fileno())


def remove_tree_synced(directory: Path) -> int:
    """Remove `directory` and everything in it, durably (its parent fsynced); returns how many files it held."""
    if not directory.is_dir():
        return 0
    files = sum(1 for path in directory.rglob("*") if not path.is_dir())
    shutil.rmtree(directory)
    fsync_path(directory.parent)
    return files
