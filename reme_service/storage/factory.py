"""Build the configured vector store: pick the backend, validate its parameters, construct it (`create_store`), and
wrap it for the app (`build_store`: a `GuardedStore` with the store's meter and size bound)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ValidationError

from reme_service.errors import ConfigError, describe_validation_errors
from reme_service.observe.metrics import Meter
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.storage.guarded import GuardedStore
from reme_service.stores.base import VectorStore
from reme_service.stores.flow_env import with_flow_env
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.params import (
    ChromaStoreParams,
    ElasticsearchStoreParams,
    LocalStoreParams,
    MemoryStoreParams,
    PgvectorStoreParams,
    QdrantStoreParams,
)

_NO_ENV: Mapping[str, str] = MappingProxyType({})
BACKENDS = ("memory", "local", "chroma", "elasticsearch", "qdrant", "pgvector")


_PARAMS: dict[str, type[BaseModel]] = {
    "memory": MemoryStoreParams,
    "local": LocalStoreParams,
    "chroma": ChromaStoreParams,
    "elasticsearch": ElasticsearchStoreParams,
    "qdrant": QdrantStoreParams,
    "pgvector": PgvectorStoreParams,
}


def _parse(backend: str, model: type[BaseModel], params: Mapping[str, Any]) -> Any:
    valid = ", ".join(model.model_fields) or "none"
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        problems = describe_validation_errors(exc, no_loc="<params>", explain=_unknown_parameter)
        raise ConfigError(
            f"vector store backend {backend!r}: {problems} (valid parameters: {valid})",
            details={"backend": backend},
        ) from exc


def parse_store_params(
    backend: str, params: Mapping[str, Any], env: Mapping[str, str] = _NO_ENV
) -> tuple[str, BaseModel]:
    """The backend's normalised name and its validated parameters, with the defaults ReMe's `FLOW_*` variables in
    `env` give (`stores/flow_env.py`); ConfigError when either is invalid. Cheap and without I/O, so the app
    checks every store's configuration before it starts serving."""
    name = backend.strip().lower()
    if name not in _PARAMS:
        raise ConfigError(
            f"unknown vector store backend {backend!r} (valid backends: {', '.join(BACKENDS)})",
            details={"backend": backend},
        )
    return name, _parse(name, _PARAMS[name], with_flow_env(name, params, env))


def create_store(
    backend: str,
    params: Mapping[str, Any],
    *,
    embedder: EmbeddingClient,
    data_dir: Path,
    env: Mapping[str, str] = _NO_ENV,
) -> VectorStore:
    """The vector store named by `backend`, built from its `params` and the `FLOW_*` variables of `env`;
    ConfigError when either is invalid. Relative default directories (`store_dir` left out) are placed under
    `data_dir`."""
    name, parsed = parse_store_params(backend, params, env)
    try:
        if isinstance(parsed, LocalStoreParams):
            return LocalVectorStore(parsed, embedder=embedder, data_dir=data_dir)
        if isinstance(parsed, ChromaStoreParams | ElasticsearchStoreParams | QdrantStoreParams | PgvectorStoreParams):
            return _create_server_store(name, parsed, embedder=embedder, data_dir=data_dir)
    except ValueError as exc:
        raise ConfigError(f"vector store backend {name!r}: {exc}", details={"backend": name}) from exc
    assert isinstance(parsed, MemoryStoreParams)
    return MemoryVectorStore(parsed, embedder=embedder)


def build_store(
    backend: str,
    params: Mapping[str, Any],
    *,
    embedder: EmbeddingClient,
    data_dir: Path,
    meter: Meter | None = None,
    max_memory_bytes: int | None,
    env: Mapping[str, str] = _NO_ENV,
) -> GuardedStore:
    """The store the app serves: the backend `create_store` builds, wrapped in a `GuardedStore` that meters its
    operations into `meter`, refuses memories over `max_memory_bytes` and records the writes of the requests it is
    bound to."""
    backend_store = create_store(backend, params, embedder=embedder, data_dir=data_dir, env=env)
    return GuardedStore(backend_store, meter=meter, max_memory_bytes=max_memory_bytes)


def _create_server_store(
    name: str,
    parsed: ChromaStoreParams | ElasticsearchStoreParams | QdrantStoreParams | PgvectorStoreParams,
    *,
    embedder: EmbeddingClient,
    data_dir: Path,
) -> VectorStore:
    """Chroma, Elasticsearch, Qdrant or PostgreSQL; their SDKs (optional extras) are imported only here."""
    try:
        if isinstance(parsed, PgvectorStoreParams):
            from reme_service.stores.pg.store import PgvectorVectorStore

            return PgvectorVectorStore(parsed, embedder=embedder)
        if isinstance(parsed, QdrantStoreParams):
            from reme_service.stores.qdrant.store import QdrantVectorStore

            return QdrantVectorStore(parsed, embedder=embedder)
        if isinstance(parsed, ChromaStoreParams):
            import chromadb  # noqa: F401 - fail early, with the install hint below

            from reme_service.stores.chroma.store import ChromaVectorStore

            return ChromaVectorStore(parsed, embedder=embedder, data_dir=data_dir)
        from reme_service.stores.es.store import ElasticsearchVectorStore

        return ElasticsearchVectorStore(parsed, embedder=embedder)
    except ImportError as exc:
        raise ConfigError(
            f"vector store backend {name!r} needs the {name!r} extra: pip install -e '.[{name}]' in the checkout "
            f"(or the wheel with [{name}]) ({exc})",
            details={"backend": name},
        ) from exc


def _unknown_parameter(error: Mapping[str, Any]) -> str | None:
    if error.get("type") != "extra_forbidden":
        return None
    return f"unknown parameter {'.'.join(str(part) for part in error.get('loc', ()))!r}"
