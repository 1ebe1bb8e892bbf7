"""Build the configured vector store: pick the backend, validate its parameters, construct it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reme_service.errors import ConfigError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.stores.base import VectorStore
from reme_service.stores.local import LocalVectorStore
from reme_service.stores.memory import MemoryVectorStore

BACKENDS = ("memory", "local", "chroma", "elasticsearch")


class MemoryStoreParams(BaseModel):
    """The "memory" backend takes no parameters."""

    model_config = ConfigDict(extra="forbid")


class LocalStoreParams(BaseModel):
    """Parameters of the "local" backend."""

    model_config = ConfigDict(extra="forbid")

    store_dir: Path | None = None  # default: <data_dir>/vector_store; a relative path is relative to the CWD
    compact_after_records: int = Field(default=1_000, ge=1)
    compact_after_bytes: int = Field(default=64 * 1024 * 1024, ge=1)


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

    def client_options(self) -> dict[str, Any]:
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


_PARAMS: dict[str, type[BaseModel]] = {
    "memory": MemoryStoreParams,
    "local": LocalStoreParams,
    "chroma": ChromaStoreParams,
    "elasticsearch": ElasticsearchStoreParams,
}


def _parse(backend: str, model: type[BaseModel], params: Mapping[str, Any]) -> Any:
    valid = ", ".join(model.model_fields) or "none"
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "<params>"
            if error["type"] == "extra_forbidden":
                problems.append(f"unknown parameter {key!r}")
            else:
                problems.append(f"{key}: {error['msg']}")
        raise ConfigError(
            f"vector store backend {backend!r}: {'; '.join(problems)} (valid parameters: {valid})",
            details={"backend": backend},
        ) from exc


def parse_store_params(backend: str, params: Mapping[str, Any]) -> tuple[str, BaseModel]:
    """The backend's normalised name and its validated parameters; ConfigError when either is invalid. Cheap and
    without I/O, so the app checks every store's configuration before it starts serving."""
    name = backend.strip().lower()
    if name not in _PARAMS:
        raise ConfigError(
            f"unknown vector store backend {backend!r} (valid backends: {', '.join(BACKENDS)})",
            details={"backend": backend},
        )
    return name, _parse(name, _PARAMS[name], params)


def create_store(backend: str, params: Mapping[str, Any], *, embedder: EmbeddingClient, data_dir: Path) -> VectorStore:
    """The vector store named by `backend`, built from its `params`; ConfigError when either is invalid."""
    name, parsed = parse_store_params(backend, params)
    if isinstance(parsed, ChromaStoreParams | ElasticsearchStoreParams):
        return _create_server_store(name, parsed, embedder=embedder, data_dir=data_dir)
    if isinstance(parsed, LocalStoreParams):
        store_dir = (parsed.store_dir or Path(data_dir) / "vector_store").expanduser().absolute()
        return LocalVectorStore(
            embedder=embedder,
            store_dir=store_dir,
            compact_after_records=parsed.compact_after_records,
            compact_after_bytes=parsed.compact_after_bytes,
        )
    return MemoryVectorStore(embedder=embedder)


def _create_server_store(
    name: str, parsed: ChromaStoreParams | ElasticsearchStoreParams, *, embedder: EmbeddingClient, data_dir: Path
) -> VectorStore:
    """Chroma or Elasticsearch; their SDKs (optional extras) are imported only here."""
    extra = "chroma" if name == "chroma" else "elasticsearch"
    try:
        if isinstance(parsed, ChromaStoreParams):
            import chromadb  # noqa: F401 - fail early, with the install hint below

            from reme_service.stores.chroma import ChromaVectorStore

            store_dir = None
            if not parsed.host:
                store_dir = (parsed.store_dir or Path(data_dir) / "chroma").expanduser().absolute()
            return ChromaVectorStore(
                embedder=embedder,
                host=parsed.host or None,
                port=parsed.port,
                ssl=parsed.ssl,
                headers=parsed.headers,
                tenant=parsed.tenant,
                database=parsed.database,
                store_dir=store_dir,
                collection_prefix=parsed.collection_prefix,
                timeout=parsed.timeout,
                hnsw=parsed.hnsw,
                shared_lock=parsed.shared_lock,
                lock_ttl=parsed.lock_ttl,
                lock_wait=parsed.lock_wait,
            )
        from reme_service.stores.elasticsearch import ElasticsearchVectorStore

        return ElasticsearchVectorStore(
            embedder=embedder,
            hosts=[parsed.hosts] if isinstance(parsed.hosts, str) else list(parsed.hosts),
            client_options=parsed.client_options(),
            index_prefix=parsed.index_prefix,
            refresh=parsed.refresh,
            batch_size=parsed.batch_size,
            list_page_size=parsed.list_page_size,
            num_candidates=parsed.num_candidates,
            hnsw_m=parsed.hnsw_m,
            hnsw_ef_construction=parsed.hnsw_ef_construction,
            index_settings=parsed.index_settings,
            hybrid=parsed.hybrid,
            rrf_window=parsed.rrf_window,
            shared_lock=parsed.shared_lock,
            lock_ttl=parsed.lock_ttl,
            lock_wait=parsed.lock_wait,
        )
    except ImportError as exc:
        raise ConfigError(
            f"vector store backend {name!r} needs the {extra!r} extra: pip install 'reme-service[{extra}]' ({exc})",
            details={"backend": name},
        ) from exc
    except ValueError as exc:
        raise ConfigError(f"vector store backend {name!r}: {exc}", details={"backend": name}) from exc
