"""The TypeScript client of `clients/typescript` for the tests that run it: npm and node located (or the test
skipped, saying why), the package installed from its lock file once (a stamp in node_modules names the lock file
it came from, so the passes and xdist workers of one run do not install it again) and built once per test session,
and used under a lock that every pytest session of the machine takes: `scripts/test.sh` runs several passes at
once, and one session's `npm ci` (which empties `node_modules`) or build (which rewrites `dist/`) must not run
under another's (npm failed with ENOTEMPTY when they met)."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reme_service.durable import exclusive_lock
from tests.conftest import REPO_ROOT

CLIENT_DIR = REPO_ROOT / "clients" / "typescript"
MIN_NODE = (20, 3)  # AbortSignal.any, the node:test runner of the tests


def npm() -> str:
    """The `npm` executable, after checking node's version; skips the test when either is missing or too old."""
    node, npm_path = shutil.which("node"), shutil.which("npm")
    if node is None or npm_path is None:
        pytest.skip("node and npm are not installed: the TypeScript client needs Node.js >= 20.3 to build and test")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    found = re.match(r"v(\d+)\.(\d+)", version)
    if found is None or (int(found[1]), int(found[2])) < MIN_NODE:
        pytest.skip(f"node {version} is too old: the TypeScript client needs Node.js >= 20.3")
    return npm_path


def run_npm(*args: str, env: dict[str, str] | None = None, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """`npm ARGS` in clients/typescript; fails the test with npm's output when it fails."""
    result = subprocess.run(
        [npm(), *args],
        cwd=CLIENT_DIR,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"npm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _lock_digest() -> str:
    """The digest of what `npm ci` installs from: package.json and package-lock.json."""
    files = (CLIENT_DIR / "package.json", CLIENT_DIR / "package-lock.json")
    return hashlib.sha256(b"\0".join(path.read_bytes() for path in files)).hexdigest()


@functools.cache
def _build() -> Path:
    """`npm ci` unless node_modules was installed by it from this very lock file (its stamp, written after the
    install, says so: the sessions and xdist workers of one run install once), then the build."""
    stamp = CLIENT_DIR / "node_modules" / ".reme-installed-from"
    digest = _lock_digest()
    if not stamp.is_file() or stamp.read_text(encoding="utf-8") != digest:
        run_npm("ci", "--no-audit", "--no-fund")  # empties node_modules first, the stamp with it
        stamp.write_text(digest, encoding="utf-8")
    run_npm("run", "build")
    return CLIENT_DIR / "dist"


@contextmanager
def built_client() -> Iterator[Path]:
    """clients/typescript installed (`npm ci`: the lock file's versions) and built (`dist/`) once per session, held
    for the `with` block under the machine-wide lock of this checkout's client (see the module docstring)."""
    npm()  # skip before waiting for a lock when node is missing
    digest = hashlib.sha256(str(CLIENT_DIR).encode()).hexdigest()[:16]
    with exclusive_lock(Path(tempfile.gettempdir()) / f"reme-ts-client-{digest}.lock"):
        yield _build()
