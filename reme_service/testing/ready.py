"""`wait_answering`: wait until a process started by a test (the service, a load balancer) answers a health URL."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx

POLL_SECONDS = 0.1


def wait_answering(url: str, process: subprocess.Popen[Any], *, limit: float) -> str | None:
    """Poll `url` until it answers 200 (None), or say why it did not: the process exited (`exited with N`), or it
    did not answer within `limit` seconds. The caller adds what it knows (its log) to the failure."""
    deadline = time.monotonic() + limit
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return None
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            return f"exited with {process.returncode}"
        if time.monotonic() > deadline:
            return f"did not answer within {limit:g} s"
        time.sleep(POLL_SECONDS)  # the polling interval
