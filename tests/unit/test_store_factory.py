"""create_store: backend selection, parameter validation, defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.errors import ConfigError
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.storage.factory import create_store
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore

EMBEDDER = HashEmbeddingClient(dimensions=16)


def test_memory_backend(tmp_path: Path) -> None:
    store = create_store("memory", {}, embedder=EMBEDDER, data_dir=tmp_path)
    assert isinstance(store, MemoryVectorStore) and store.backend == "memory"
    assert store.embedder is EMBEDDER


def test_local_backend_defaults_under_data_dir(tmp_path: Path) -> None:
    store = create_store("local", {}, embedder=EMBEDDER, data_dir=tmp_path)
    assert isinstance(store, LocalVectorStore)
    assert store.store_dir == tmp_path / "vector_store"
    assert (store.files.compact_after_records, store.files.compact_after_bytes) == (1_000, 64 * 1024 * 1024)


def test_local_backend_params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    params = {"store_dir": "relative/vs", "compact_after_records": 10, "compact_after_bytes": 4096}
    store = create_store("local", params, embedder=EMBEDDER, data_dir=Path("/elsewhere"))
    assert isinstance(store, LocalVectorStore)
    assert store.store_dir == tmp_path / "relative" / "vs"  # relative to the CWD, pinned at creation
    assert (store.files.compact_after_records, store.files.compact_after_bytes) == (10, 4096)


def test_unknown_backend_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown vector store backend 'redis'.*memory, local"):
        create_store("redis", {}, embedder=EMBEDDER, data_dir=tmp_path)


def test_chroma_backend_modes(tmp_path: Path) -> None:
    from reme_service.stores.chroma.store import ChromaVectorStore

    embedded = create_store("chroma", {}, embedder=EMBEDDER, data_dir=tmp_path)
    assert isinstance(embedded, ChromaVectorStore) and embedded.conn.store_dir == tmp_path / "chroma"
    server = create_store("chroma", {"host": "127.0.0.1", "port": 8111}, embedder=EMBEDDER, data_dir=tmp_path)
    assert isinstance(server, ChromaVectorStore) and not server.conn.embedded and server.conn.port == 8111
    with pytest.raises(ConfigError, match="not both"):
        create_store("chroma", {"host": "h", "store_dir": "x"}, embedder=EMBEDDER, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="collection_prefix"):
        create_store("chroma", {"collection_prefix": "-bad"}, embedder=EMBEDDER, data_dir=tmp_path)


@pytest.mark.anyio
async def test_elasticsearch_backend_params(tmp_path: Path) -> None:
    from reme_service.stores.es.store import ElasticsearchVectorStore

    params = {"hosts": "http://127.0.0.1:9", "basic_auth": "u:p", "batch_size": 64, "hybrid": True}
    store = create_store("elasticsearch", params, embedder=EMBEDDER, data_dir=tmp_path)
    assert isinstance(store, ElasticsearchVectorStore)
    assert (store.hosts, store.batch_size, store.hybrid) == (["http://127.0.0.1:9"], 64, True)
    await store.close()
    with pytest.raises(ConfigError, match="index_prefix"):
        create_store("elasticsearch", {"index_prefix": "Upper"}, embedder=EMBEDDER, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="refresh"):
        create_store("elasticsearch", {"refresh": "false"}, embedder=EMBEDDER, data_dir=tmp_path)


def test_unknown_param_names_the_key_and_the_valid_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown parameter 'store_path'") as caught:
        create_store("local", {"store_path": "x"}, embedder=EMBEDDER, data_dir=tmp_path)
    assert "store_dir, compact_after_records, compact_after_bytes" in caught.value.message
    with pytest.raises(ConfigError, match=r"unknown parameter 'hosts'.*valid parameters: store_dir"):
        create_store("memory", {"hosts": ["x"]}, embedder=EMBEDDER, data_dir=tmp_path)


def test_invalid_param_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="compact_after_records"):
        create_store("local", {"compact_after_records": 0}, embedder=EMBEDDER, data_dir=tmp_path)
