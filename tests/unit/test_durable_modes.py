"""`durable.atomic_write` leaves a file of mode 0600 whatever the umask, also over a temporary file a crash left."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from reme_service.durable import TMP_SUFFIX, atomic_write


def test_an_atomically_written_file_is_private(tmp_path: Path) -> None:
    target = tmp_path / "ws.snap"
    leftover = target.with_name(target.name + TMP_SUFFIX)
    leftover.write_bytes(b"half of an old write")
    leftover.chmod(0o644)  # left by a crash, created under another umask
    previous = os.umask(0o022)
    try:
        atomic_write(target, [b"memories"])
        atomic_write(tmp_path / "new.snap", [b"more"])
    finally:
        os.umask(previous)
    assert target.read_bytes() == b"memories" and not leftover.exists()
    for path in (target, tmp_path / "new.snap"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
