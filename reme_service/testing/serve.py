"""Serve any ASGI app on a free loopback port in a background thread, for the length of a `with` block.

```python
with serve_in_thread(app) as base_url:  # "http://127.0.0.1:PORT"
    ...
```

The server runs in a daemon thread with its own event loop, so synchronous and asynchronous tests can both
talk to it over real HTTP. On exit the server is asked to stop (`should_exit`) and the thread is joined.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import uvicorn


@contextmanager
def serve_in_thread(
    app: Any,
    *,
    lifespan: Literal["auto", "on", "off"] = "auto",
    start_timeout: float = 10.0,
    stop_timeout: float = 10.0,
    graceful_shutdown: int = 2,
) -> Iterator[str]:
    """Run `app` with uvicorn on 127.0.0.1 (port chosen by the OS) and yield its base URL.

    `graceful_shutdown` (seconds) bounds how long the server waits for in-flight requests when the block ends.
    Raises `RuntimeError` when the server does not start within `start_timeout` seconds.
    """
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_level="warning",
        lifespan=lifespan,
        access_log=False,
        timeout_graceful_shutdown=graceful_shutdown,
    )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run()
        except BaseException as exc:  # reported to the waiting test below
            failure.append(exc)

    thread = threading.Thread(target=run, name="serve-in-thread", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if failure or not thread.is_alive():
            thread.join(stop_timeout)
            raise RuntimeError(f"the test server did not start: {failure[0] if failure else 'thread exited'}")
        if time.monotonic() > deadline:
            server.should_exit = True
            thread.join(stop_timeout)
            raise RuntimeError(f"the test server did not start within {start_timeout} s")
        time.sleep(0.005)
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(stop_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(stop_timeout)
