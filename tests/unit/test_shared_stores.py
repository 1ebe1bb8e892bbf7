"""`http.workers > 1` is allowed only over stores that hold workspaces outside the process and lock a workspace
across processes (`server/workers.py`); Qdrant's locks hold within one process, so it is refused even as a server."""

from __future__ import annotations

import pytest

from reme_service.config.loader import load_config
from reme_service.errors import ConfigError
from reme_service.server.workers import require_shared_stores, shared_store_problem

SHARED = [
    ["vector_store.default.backend=pgvector"],
    ["vector_store.default.backend=elasticsearch"],
    ["vector_store.default.backend=chroma", "vector_store.default.params.host=127.0.0.1"],
]
NOT_SHARED = [
    (["vector_store.default.backend=local"], "'local'"),
    (["vector_store.default.backend=memory"], "'memory'"),
    (["vector_store.default.backend=chroma"], "'chroma' (embedded)"),
    (["vector_store.default.backend=qdrant", "vector_store.default.params.path=q"], "'qdrant' (embedded)"),
    (["vector_store.default.backend=qdrant", "vector_store.default.params.url=http://127.0.0.1:6333"],
     "'qdrant', whose workspace locks hold within one process only"),
    (["vector_store.default.backend=qdrant"], "'qdrant', whose workspace locks hold within one process only"),
]  # fmt: skip


@pytest.mark.parametrize("overrides", SHARED)
def test_stores_with_cross_process_locks_serve_several_workers(overrides: list[str]) -> None:
    config = load_config([*overrides, "http.workers=2"])
    assert shared_store_problem(config) is None
    require_shared_stores(config)


@pytest.mark.parametrize(("overrides", "reason"), NOT_SHARED)
def test_other_stores_are_refused_naming_why(overrides: list[str], reason: str) -> None:
    config = load_config([*overrides, "http.workers=2"])
    assert shared_store_problem(config) == f"vector_store.default is {reason}"
    with pytest.raises(ConfigError, match="http.workers=2 needs a store several processes can share"):
        require_shared_stores(config)
    require_shared_stores(load_config(overrides))  # one worker: any store
