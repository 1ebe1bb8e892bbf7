"""Debian's `haproxy` in front of service processes, for the multi-node tests and `cookbook/bench/multi_node.py`:
round robin over the nodes, each checked on `/health` every 500 ms (a dead node leaves the rotation after two
failed checks). The configuration is the one docs/scaling.md shows (`haproxy_config`)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from reme_service.testing.ports import free_port
from reme_service.testing.ready import wait_answering


def haproxy_binary() -> str | None:
    return shutil.which("haproxy")


def haproxy_config(port: int, backends: Sequence[tuple[str, str]]) -> str:
    """The config: listen on 127.0.0.1:`port`, balance over `backends` ((name, host:port) each)."""
    servers = "\n".join(f"  server {name} {address}" for name, address in backends)
    return f"""global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 120s
  timeout server 120s
  option redispatch
  retries 2
frontend reme
  bind 127.0.0.1:{port}
  default_backend nodes
backend nodes
  balance roundrobin
  option httpchk GET /health
  default-server check inter 500ms fall 2 rise 1
{servers}
"""


@contextmanager
def running_haproxy(folder: Path, backends: Sequence[tuple[str, str]], *, timeout: float = 30.0) -> Iterator[str]:
    """haproxy in the foreground for the length of the block; yields its base URL once it answers `/health`."""
    binary = haproxy_binary()
    assert binary is not None, "haproxy is not installed (scripts/install_haproxy.sh)"
    port = free_port()
    config = folder / "haproxy.cfg"
    config.write_text(haproxy_config(port, backends))
    log = open(folder / "haproxy.log", "wb")  # noqa: SIM115 - closed when the block ends
    process = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        failure = wait_answering(f"{url}/health", process, limit=timeout)
        if failure is not None:
            raise RuntimeError(f"haproxy {failure}: {(folder / 'haproxy.log').read_text(errors='replace')}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
