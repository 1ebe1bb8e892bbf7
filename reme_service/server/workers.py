"""`http.workers` > 1: one port, several service processes. The parent checks that the port is free (`run.listen`),
starts `workers` children that each run the whole service on a socket of their own bound to that port with
`SO_REUSEPORT` — the kernel spreads new connections evenly over them (one shared socket would let whichever worker
wakes first take a burst of keep-alive connections, and with them the load) — restarts a child that dies, and on
SIGTERM or SIGINT passes the signal on and waits for them.

The supervisor owns its workers: a worker dies with it, however it dies (`kill -9` included), so no orphan keeps
serving the port. Each worker asks the kernel for SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`, Linux),
and also watches a pipe whose other end only the supervisor holds (`die_with_parent`): the pipe reads end-of-file
once the supervisor is gone, whatever the platform; the worker then stops as on SIGTERM, and exits at once if that
takes longer than `ORPHAN_GRACE_SECONDS`. The supervisor checks the port without `SO_REUSEPORT` (`cli.py`), so a
second start on a port still served by anyone, orphans included, is refused with one line.

Several processes need a store they can all reach: `require_shared_stores` refuses the `local` and `memory`
stores and the embedded modes of Chroma and Qdrant, which belong to one process. What else is on disk is safe to
share: the key file is re-read by every process, audit lines are appended whole, and jobs are claimed with a file
lock (`jobs/files.py`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType

from reme_service.config.models import AppConfig
from reme_service.errors import ConfigError

logger = logging.getLogger("reme_service.workers")

#: set for a worker: bind the port with SO_REUSEPORT (not a REME_ variable: never a config key)
WORKER_ENV = "REMESVC_WORKER"
#: set for a worker: "<supervisor pid>:<fd>", the read end of a pipe only the supervisor can write to
PARENT_ENV = "REMESVC_PARENT"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_GRACE_SECONDS = 5.0  # a worker whose supervisor died stops gracefully within this, or exits at once
QUICK_DEATH_SECONDS = 5.0  # a child that dies sooner than this after its start ...
MAX_QUICK_DEATHS = 3  # ... this many times in a row stops the service (it cannot start: say so, do not loop)


def shared_store_problem(config: AppConfig) -> str | None:
    """Why the configured stores cannot serve several processes, or None when they can: the store must hold the
    workspaces outside the process and lock a workspace across processes (`stores/shared_lock.py`, PostgreSQL's
    advisory locks), or two processes' read-modify-write flows (counters, tool histories) lose each other's
    changes."""
    for name, store in config.vector_store.items():
        backend = store.backend.strip().lower()
        params = store.params
        if backend in ("pgvector", "elasticsearch"):
            continue
        if backend == "chroma" and params.get("host"):
            continue
        if backend == "qdrant" and not any(params.get(key) for key in ("path", "store_dir", "location")):
            return f"vector_store.{name} is 'qdrant', whose workspace locks hold within one process only"
        return f"vector_store.{name} is {backend!r}{' (embedded)' if backend in ('chroma', 'qdrant') else ''}"
    return None


def require_shared_stores(config: AppConfig) -> None:
    workers = config.http.workers
    problem = shared_store_problem(config) if workers > 1 else None
    if problem is not None:
        raise ConfigError(
            f"http.workers={workers} needs a store several processes can share, and {problem}: use pgvector, a "
            "Chroma server, or Elasticsearch (docs/scaling.md), or http.workers=1"
        )


def is_worker() -> bool:
    """Whether this process is a worker started by a `Supervisor` (its parent said what it serves)."""
    return os.environ.get(WORKER_ENV) == "1"


def die_with_parent() -> bool:
    """Make this worker stop when its supervisor dies (see the module docstring); False when it is dead already
    (the worker must then not serve). Does nothing in a process no supervisor started."""
    spec = os.environ.get(PARENT_ENV)
    if not spec:
        return True
    pid_text, fd_text = spec.split(":", 1)
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError) as exc:  # the pipe still tells
            logger.warning("workers: prctl(PR_SET_PDEATHSIG) unavailable: %s", exc)
    if os.getppid() != int(pid_text):  # the supervisor died before the kernel was asked
        return False
    threading.Thread(target=_watch_parent, args=(int(fd_text),), name="reme-parent-watch", daemon=True).start()
    return True


def _watch_parent(fd: int) -> None:
    """Block on the supervisor's pipe; at its end (the supervisor is gone) stop this worker."""
    try:
        while os.read(fd, 1):
            pass
    except OSError:
        pass
    logger.warning("workers: the supervisor is gone; stopping")
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE_SECONDS)
    os._exit(1)


class Supervisor:
    def __init__(self, args: Sequence[str], workers: int) -> None:
        self.args = [*args, "http.workers=1"]
        self.workers = workers
        self.children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}  # slot -> (process, started)
        self.pipes: dict[int, int] = {}  # slot -> the write end of its worker's parent pipe (never written)
        self.stopping = False
        self.quick_deaths = 0

    def _spawn(self, slot: int) -> None:
        read_end, write_end = os.pipe()  # both not inheritable: only `pass_fds` hands the read end on
        env = {**os.environ, WORKER_ENV: "1", PARENT_ENV: f"{os.getpid()}:{read_end}"}
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "reme_service", *self.args], env=env, pass_fds=(read_end,)
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._close_pipe(slot)
        self.pipes[slot] = write_end
        self.children[slot] = (process, time.monotonic())

    def _close_pipe(self, slot: int) -> None:
        write_end = self.pipes.pop(slot, None)
        if write_end is not None:
            os.close(write_end)

    def _stop(self, signum: int, _: FrameType | None) -> None:
        self.stopping = True
        for process, _started in self.children.values():
            if process.poll() is None:
                process.send_signal(signum)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        for slot in range(self.workers):
            self._spawn(slot)
        while self.children:
            for slot, (process, started) in list(self.children.items()):
                code = process.poll()
                if code is None:
                    continue
                del self.children[slot]
                self._close_pipe(slot)
                if self.stopping:
                    continue
                quick = time.monotonic() - started < QUICK_DEATH_SECONDS
                self.quick_deaths = self.quick_deaths + 1 if quick else 0
                if self.quick_deaths >= MAX_QUICK_DEATHS:
                    sys.stderr.write(f"reme: worker processes keep exiting (last code {code}); stopping\n")
                    self._stop(signal.SIGTERM, None)
                    continue
                logger.warning("worker %d exited with %s; starting another", slot, code)
                self._spawn(slot)
            time.sleep(0.2)  # the supervisor's poll interval: it only watches its children
        return 1 if self.quick_deaths >= MAX_QUICK_DEATHS else 0
