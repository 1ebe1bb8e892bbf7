"""Build the configured vector store: pick the backend, validate its parameters, construct it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reme_service.errors import ConfigError
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.stores.base import VectorStore
from reme_service.stores.local import LocalVectorStore
from reme_service.stores.memory import MemoryVectorStore

BACKENDS = ("memory", "local")
PLANNED_BACKENDS = ("chroma", "elasticsearch")


class MemoryStoreParams(BaseModel):
    """The "memory" backend takes no parameters."""

    model_config = ConfigDict(extra="forbid")


class LocalStoreParams(BaseModel):
    """Parameters of the "local" backend."""

    model_config = ConfigDict(extra="forbid")

    store_dir: Path | None = None  # default: <data_dir>/vector_store; a relative path is relative to the CWD
    compact_after_records: int = Field(default=1_000, ge=1)
    compact_after_bytes: int = Field(default=64 * 1024 * 1024, ge=1)


_PARAMS: dict[str, type[BaseModel]] = {"memory": MemoryStoreParams, "local": LocalStoreParams}


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


def create_store(
    backend: str, params: Mapping[str, Any], *, embedder: EmbeddingClient, data_dir: Path
) -> VectorStore:
    """The vector store named by `backend`, built from its `params`; ConfigError when either is invalid."""
    name = backend.strip().lower()
    if name in PLANNED_BACKENDS:
        raise ConfigError(
            f"vector store backend {name!r} is not available yet (available: {', '.join(BACKENDS)})",
            details={"backend": name},
        )
    if name not in _PARAMS:
        raise ConfigError(
            f"unknown vector store backend {backend!r} (valid backends: {', '.join(BACKENDS)})",
            details={"backend": backend},
        )
    parsed = _parse(name, _PARAMS[name], params)
    if isinstance(parsed, LocalStoreParams):
        store_dir = (parsed.store_dir or Path(data_dir) / "vector_store").expanduser().absolute()
        return LocalVectorStore(
            embedder=embedder,
            store_dir=store_dir,
            compact_after_records=parsed.compact_after_records,
            compact_after_bytes=parsed.compact_after_bytes,
        )
    return MemoryVectorStore(embedder=embedder)
