"""The validated parameters of each store backend (`vector_store.<name>.params` in the config), spelled once.

`storage/factory.py` validates a backend's params with these models before the app serves; each store's constructor
takes its model as it is, so a parameter is named here and read by the store, nowhere else. No backend SDK is
imported here: parsing a configuration needs neither chromadb nor elasticsearch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class AnnParams(BaseModel):
    """The approximate index of the in-process stores (`stores/inproc/ann.py`): an HNSW graph over quantised vectors for
    workspaces of at least `min_rows` memories; the top hits are re-scored exactly from the float32 rows."""

    model_config = ConfigDict(extra="forbid")

    # workspaces with at least this many rows get the index (built in the background); None: never (exact only)
    min_rows: int | None = Field(default=200_000, ge=1)
    dtype: Literal["i8", "f16", "f32"] = "i8"  # the graph's copy of the vectors (i8: 1 byte per dimension)
    connectivity: int = Field(default=16, ge=2, le=256)  # HNSW M: neighbours per node
    expansion_add: int = Field(default=128, ge=1, le=4096)  # ef at insertion
    expansion_search: int = Field(default=128, ge=1, le=4096)  # ef at search (raised to the candidate count)
    # candidates asked of the graph per hit wanted (at least 40), re-scored exactly; filters widen it (docs/scaling.md)
    candidates: int = Field(default=4, ge=1, le=1000)
    build_threads: int = Field(default=2, ge=1, le=64)  # threads of a background build (nice +10: inproc/ann.py)


class MemoryStoreParams(BaseModel):
    """The "memory" backend keeps everything in RAM. It accepts ReMe's `store_dir` (ReMe 0.1's default dump folder;
    ReMe's vector-store guide sets it), so those configurations start, and ignores it, saying so in the log."""

    model_config = ConfigDict(extra="forbid")

    store_dir: Path | None = None
    ann: AnnParams = Field(default_factory=AnnParams)


class LocalStoreParams(BaseModel):
    """Parameters of the "local" backend."""

    model_config = ConfigDict(extra="forbid")

    store_dir: Path | None = None  # default: <data_dir>/vector_store; a relative path is relative to the CWD
    compact_after_records: int = Field(default=1_000, ge=1)
    compact_after_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    # write-ahead logs kept open between writes, whatever the number of workspaces (least recently used closed)
    max_open_files: int = Field(default=128, ge=1)
    # workspaces held in RAM past this many MiB (estimated) leave it, least recently used first, when idle; they
    # load again on their next use. None: all stay (the budget is per store)
    max_resident_mb: float | None = Field(default=1024, gt=0)
    ann: AnnParams = Field(default_factory=AnnParams)


class ChromaStoreParams(BaseModel):
    """Parameters of the "chroma" backend: `host` (and `port`) for a Chroma server, else an embedded store in
    `store_dir` (default: <data_dir>/chroma)."""

    model_config = ConfigDict(extra="forbid")

    host: str | None = None
    port: int = Field(default=8000, ge=1, le=65535)
    ssl: bool = False
    headers: dict[str, str] | None = None
    tenant: str = "default_tenant"
    database: str = "default_database"
    store_dir: Path | None = None
    collection_prefix: str = "reme-"
    timeout: float = Field(default=30.0, gt=0)
    hnsw: dict[str, Any] = Field(default_factory=dict)  # e.g. {"ef_search": 200}; "space" is ours
    # Workspace locks shared by every service process on this server (default: on in server mode); a lease
    # expires `lock_ttl` s after its holder stops renewing it; a waiter gives up (503) after `lock_wait` s.
    shared_lock: bool | None = None
    lock_ttl: float = Field(default=15.0, gt=0)
    lock_wait: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _one_mode(self) -> ChromaStoreParams:
        if self.host and self.store_dir is not None:
            raise ValueError("give host (a Chroma server) or store_dir (embedded), not both")
        if self.shared_lock and not self.host:
            raise ValueError("shared_lock needs a Chroma server (host): an embedded Chroma belongs to one process")
        if "space" in self.hnsw:
            raise ValueError("hnsw.space is fixed by the store (inner product over unit vectors = cosine)")
        return self


class ElasticsearchStoreParams(BaseModel):
    """Parameters of the "elasticsearch" backend (ReMe's `hosts`, `basic_auth`, `batch_size`, and more)."""

    model_config = ConfigDict(extra="forbid")

    hosts: str | list[str] = "http://localhost:9200"
    basic_auth: str | list[str] | None = None  # "user:password" or [user, password]
    api_key: str | list[str] | None = None
    bearer_auth: str | None = None
    verify_certs: bool = True
    ca_certs: str | None = None
    request_timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    index_prefix: str = "reme-"
    refresh: str = Field(default="true", pattern="^(true|wait_for)$")
    batch_size: int = Field(default=500, ge=1, le=10_000)
    list_page_size: int = Field(default=10_000, ge=1, le=10_000)
    num_candidates: int = Field(default=100, ge=1, le=10_000)
    hnsw_m: int = Field(default=16, ge=2)
    hnsw_ef_construction: int = Field(default=100, ge=1)
    index_settings: dict[str, Any] = Field(default_factory=dict)
    hybrid: bool = False
    rrf_window: int = Field(default=50, ge=1, le=10_000)
    # workspace locks shared by every service process on the cluster (see the chroma parameters)
    shared_lock: bool = True
    lock_ttl: float = Field(default=15.0, gt=0)
    lock_wait: float = Field(default=60.0, gt=0)

    def host_list(self) -> list[str]:
        """`hosts` as a list (a single URL may be given as a string)."""
        return [self.hosts] if isinstance(self.hosts, str) else list(self.hosts)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for `AsyncElasticsearch` (auth, TLS, timeouts); ValueError on a malformed `basic_auth`."""
        options: dict[str, Any] = {
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "retry_on_timeout": True,
            "verify_certs": self.verify_certs,
        }
        if self.ca_certs:
            options["ca_certs"] = self.ca_certs
        if self.basic_auth:
            auth = self.basic_auth.split(":", 1) if isinstance(self.basic_auth, str) else self.basic_auth
            if len(auth) != 2:
                raise ValueError("basic_auth is 'user:password' or [user, password]")
            options["basic_auth"] = tuple(auth)
        if self.api_key:
            options["api_key"] = self.api_key if isinstance(self.api_key, str) else tuple(self.api_key)
        if self.bearer_auth:
            options["bearer_auth"] = self.bearer_auth
        return options


class QdrantStoreParams(BaseModel):
    """Parameters of the "qdrant" backend, with ReMe's names: `url` (or `host` and `port`) and `api_key` for a
    server — with none of them the server at localhost:6333, as in ReMe (`FLOW_QDRANT_*` change it:
    `stores/flow_env.py`); Qdrant's local mode only with `path` (ReMe's `store_dir` also works) or
    `location: ":memory:"`. `distance` is accepted as ReMe wrote it; only cosine is served."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    host: str | None = None
    port: int = Field(default=6333, ge=1, le=65535)
    api_key: str | None = None
    prefer_grpc: bool = False
    path: Path | None = None
    store_dir: Path | None = None
    location: str | None = None
    collection_prefix: str = "reme-"
    timeout: float = Field(default=30.0, gt=0)
    batch_size: int = Field(default=256, ge=1, le=10_000)
    distance: str = Field(default="COSINE", pattern="(?i)^cosine$")

    @model_validator(mode="after")
    def _one_mode(self) -> QdrantStoreParams:
        servers = bool(self.url or self.host)
        local = [name for name in ("path", "store_dir", "location") if getattr(self, name) is not None]
        if servers and local:
            raise ValueError(f"give a server (url or host) or a local store ({', '.join(local)}), not both")
        if len(local) > 1:
            raise ValueError(f"give one of path, store_dir and location, not {', '.join(local)}")
        return self


class PgvectorStoreParams(BaseModel):
    """Parameters of the "pgvector" backend (PostgreSQL with the pgvector extension): `dsn` (a libpq URI or
    key=value string), or `host`/`port`/`user`/`password`/`dbname`. Tables are named `<table_prefix>...`;
    `index` is `hnsw` (approximate unfiltered searches, pgvector's HNSW) or `exact` (every search scans).
    `pool_size` connections at most; `timeout` bounds connecting and waiting for a pooled connection."""

    model_config = ConfigDict(extra="forbid")

    dsn: str | None = None
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    password: str | None = None
    dbname: str | None = None
    table_prefix: str = Field(default="reme_", pattern=r"^[a-z_][a-z0-9_]{0,19}$")
    index: Literal["hnsw", "exact"] = "hnsw"
    hnsw_m: int = Field(default=16, ge=2, le=100)
    hnsw_ef_construction: int = Field(default=64, ge=4, le=1000)
    ef_search: int = Field(default=100, ge=1, le=1000)  # raised to top_k for larger top_k (up to 1000)
    pool_size: int = Field(default=10, ge=1, le=1000)
    timeout: float = Field(default=10.0, gt=0)
    batch_size: int = Field(default=1_000, ge=1, le=100_000)
    # memory for building a workspace's HNSW index after a load (PostgreSQL's maintenance_work_mem, for that
    # statement only): a graph that does not fit is built far more slowly
    index_build_mb: int = Field(default=512, ge=64, le=65_536)
    # a write that fills a new table with more rows than this (a library load) commits them without the HNSW
    # index, which is then built in the background (CREATE INDEX CONCURRENTLY); searches are exact until it is
    index_background_rows: int = Field(default=10_000, ge=0)
    # workspace locks shared by every service process on this database (PostgreSQL advisory locks); a waiter
    # gives up (503) after `lock_wait` s
    shared_lock: bool = True
    lock_wait: float = Field(default=60.0, gt=0)
    # a workspace of at most this many rows is searched in each service process, in a copy of its rows brought up
    # to date from PostgreSQL before every search (stores/pg/replica.py); larger ones, and all with 0, in PostgreSQL
    replica_rows: int = Field(default=100_000, ge=0)
    # the copies of one process hold at most about this many MiB (the least recently searched go first)
    replica_mb: int = Field(default=1_024, ge=1)

    @model_validator(mode="after")
    def _one_way(self) -> PgvectorStoreParams:
        parts = [name for name in ("host", "port", "user", "password", "dbname") if getattr(self, name) is not None]
        if self.dsn and parts:
            raise ValueError(f"give dsn or {', '.join(parts)}, not both")
        return self

    def conninfo_parts(self) -> tuple[str, dict[str, Any]]:
        """The DSN and the separate connection parameters (libpq merges them), without a password shown."""
        if self.dsn:
            return self.dsn, {}
        parts = {"host": self.host or "localhost", "port": self.port or 5432, "user": self.user,
                 "password": self.password, "dbname": self.dbname}  # fmt: skip
        return "", {key: value for key, value in parts.items() if value is not None}
