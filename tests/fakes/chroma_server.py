"""A real Chroma server for tests: `chroma run` from the installed chromadb package, on a free loopback port.

`running_chroma(path, port=None)` starts `chroma run --host 127.0.0.1 --port <port> --path <path>`, waits until
its heartbeat answers and stops it when the block ends; `chroma_server` is a session fixture around it (import it
into a test module to use it). Nothing is mocked: the stores talk to Chroma's own server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from reme_service.testing.ports import free_port


@dataclass(frozen=True)
class ChromaServer:
    host: str
    port: int
    path: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def chroma_executable() -> str:
    beside = Path(sys.executable).parent / "chroma"
    found = str(beside) if beside.exists() else shutil.which("chroma")
    if not found:
        raise RuntimeError("the `chroma` command of the chromadb package is not installed (pip install chromadb)")
    return found


@contextmanager
def running_chroma(path: Path, port: int | None = None, *, start_timeout: float = 60.0) -> Iterator[ChromaServer]:
    """Run a Chroma server storing its data in `path` for the length of the block."""
    port = port or free_port()
    path.mkdir(parents=True, exist_ok=True)
    log_path = path.parent / f"chroma-{port}.log"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}  # the child's environment only
    command = [chroma_executable(), "run", "--host", "127.0.0.1", "--port", str(port), "--path", str(path)]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + start_timeout
        url = f"http://127.0.0.1:{port}/api/v2/heartbeat"
        with httpx.Client(timeout=2.0) as client:
            while True:
                if process.poll() is not None:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"chroma run exited with {process.returncode}:\n{tail}")
                try:
                    if client.get(url).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not answer on port {port} within {start_timeout:g} s")
                time.sleep(0.1)
        yield ChromaServer("127.0.0.1", port, path)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    with running_chroma(tmp_path_factory.mktemp("chroma-server") / "data") as server:
        yield server
