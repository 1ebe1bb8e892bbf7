"""The service as a real separate process: `python -m reme_service` on a free loopback port, for tests (and benchmarks)
that need several processes or the real command line.

`running_service(cwd, *overrides)` starts it with the given config overrides (the `FLOW_*` variables of this
environment are not passed on, so the LLM is `none` unless the overrides say otherwise), waits until `/health`
answers, yields the base URL and terminates the process when the block ends. If it exits or does not answer in
time, the error carries the tail of its stderr. `service_process(...)` is the same with a `ServiceProcess` handle
(base URL, the `Popen`, the log) for tests that signal the process or read its exit code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from reme_service.testing.ports import free_port
from reme_service.testing.ready import wait_answering


@dataclass(frozen=True)
class ServiceProcess:
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@contextmanager
def running_service(cwd: Path, *overrides: str, start_timeout: float = 60.0) -> Iterator[str]:
    with service_process(cwd, *overrides, start_timeout=start_timeout) as service:
        yield service.base_url


@contextmanager
def service_process(cwd: Path, *overrides: str, start_timeout: float = 60.0) -> Iterator[ServiceProcess]:
    port = free_port()
    cwd.mkdir(parents=True, exist_ok=True)
    log_path = cwd / f"service-{port}.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("FLOW_")}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "reme_service", f"http.port={port}", *overrides],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        failure = wait_answering(f"{base_url}/health", process, limit=start_timeout)
        if failure is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the service on port {port} {failure}:\n{tail}")
        yield ServiceProcess(base_url, process, log_path)
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_ready(process: subprocess.Popen[str], base_url: str, *, limit: float = 60.0) -> None:
    """Wait until a service started by the test answers `/health/ready` with 200; fail with its stderr if it exits."""
    failure = wait_answering(f"{base_url}/health/ready", process, limit=limit)
    if failure is not None:
        stderr = process.communicate()[1] if process.poll() is not None else ""
        raise AssertionError(f"the service at {base_url} {failure}: {stderr}")
