"""ReMe's store environment variables (`FLOW_*`), read as ReMe reads them: defaults for the parameters a
configuration leaves out, never over a parameter it gives.

- `FLOW_QDRANT_HOST`, `FLOW_QDRANT_PORT`, `FLOW_QDRANT_API_KEY` (qdrant): `host`, `port`, `api_key` of the
  server, when no `url` is given;
- `FLOW_ES_HOSTS` (elasticsearch): `hosts` (several URLs separated by commas);
- `FLOW_PGVECTOR_CONNECTION_STRING`, else `FLOW_PGVECTOR_ASYNC_CONNECTION_STRING` with its `+driver` dropped
  (pgvector): `dsn`, when no connection parameter is given.

Qdrant as ReMe does it: without `path`, `store_dir` or `location` (local mode) and without `url`, the store is the
server at `FLOW_QDRANT_HOST` (default `localhost`) and `FLOW_QDRANT_PORT` (default 6333); if it is down,
requests answer 503 and readiness says why — data never lands in a local store instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_QDRANT_LOCAL = ("path", "store_dir", "location")
_PG_PARTS = ("dsn", "host", "port", "user", "password", "dbname")
_DRIVER = re.compile(r"^(postgres(?:ql)?)\+[A-Za-z0-9_]+://")


def with_flow_env(backend: str, params: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """`params` of `backend` (its normalised name) with the defaults ReMe's `FLOW_*` variables in `env` give."""
    out = dict(params)
    if backend == "qdrant":
        if any(out.get(name) is not None for name in _QDRANT_LOCAL) or out.get("url"):
            return out
        if not out.get("host"):
            out["host"] = env.get("FLOW_QDRANT_HOST", "").strip() or "localhost"
        if "port" not in out and env.get("FLOW_QDRANT_PORT", "").strip():
            out["port"] = env["FLOW_QDRANT_PORT"].strip()
        if out.get("api_key") is None and env.get("FLOW_QDRANT_API_KEY", "").strip():
            out["api_key"] = env["FLOW_QDRANT_API_KEY"].strip()
    elif backend == "elasticsearch":
        hosts = [host.strip() for host in env.get("FLOW_ES_HOSTS", "").split(",") if host.strip()]
        if not out.get("hosts") and hosts:
            out["hosts"] = hosts[0] if len(hosts) == 1 else hosts
    elif backend == "pgvector":
        dsn = env.get("FLOW_PGVECTOR_CONNECTION_STRING", "").strip()
        dsn = dsn or _DRIVER.sub(r"\1://", env.get("FLOW_PGVECTOR_ASYNC_CONNECTION_STRING", "").strip())
        if dsn and all(out.get(name) is None for name in _PG_PARTS):
            out["dsn"] = dsn
    return out
