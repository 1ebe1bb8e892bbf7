"""Which state backend a configuration selects (`state.backend`), and the PostgreSQL it names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reme_service.config.models import AppConfig
from reme_service.errors import ConfigError
from reme_service.stores.params import PgvectorStoreParams


@dataclass(frozen=True)
class StateTarget:
    """`files` (no `dsn`), or `postgres` with libpq's DSN and the separate connection parameters."""

    backend: Literal["files", "postgres"]
    dsn: str = ""
    conn_kwargs: dict[str, Any] = field(default_factory=dict)
    prefix: str = "reme_state_"
    reload_seconds: float = 1.0


def state_target(config: AppConfig) -> StateTarget:
    """`auto` is `postgres` when `state.dsn` is set or the default vector store is pgvector (its connection), else
    `files`; `postgres` needs one of the two (ConfigError otherwise)."""
    state = config.state
    if state.backend == "files":
        return StateTarget("files")
    store = config.vector_store.get("default")
    pg_store = store is not None and store.backend == "pgvector"
    if state.dsn:
        dsn, kwargs = state.dsn, dict[str, Any]()
    elif pg_store and store is not None:
        dsn, kwargs = PgvectorStoreParams.model_validate(store.params).conninfo_parts()
    elif state.backend == "postgres":
        raise ConfigError("state.backend=postgres needs state.dsn (or a pgvector default vector_store)")
    else:
        return StateTarget("files")
    return StateTarget("postgres", dsn, kwargs, state.table_prefix, state.reload_seconds)


def files_folder(configured: str, data_dir: Path, name: str) -> Path:
    """Where the `files` backend keeps `name` (audit, history, jobs): the configured folder (`audit.dir`, …), else
    `<data_dir>/<name>`."""
    return Path(configured).expanduser().resolve() if configured else data_dir / name
