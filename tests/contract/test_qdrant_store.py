"""The Qdrant backend against the store contract, plus its remote-store checks.

Which Qdrant: a real server when `REME_TEST_QDRANT_URL` is set (e.g. http://127.0.0.1:6333); otherwise Qdrant's
local mode (the client's own in-process engine, on disk under the test's directory). `test_which_qdrant` says
which (it is skipped, with the reason, when local mode was used).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from reme_service.errors import ConfigError
from reme_service.storage.factory import create_store
from reme_service.stores.params import QdrantStoreParams
from reme_service.stores.qdrant.store import QdrantVectorStore
from reme_service.testing.contract import ContractTests
from reme_service.testing.contract.support import CountingEmbedder
from tests.contract.test_chroma_store import RemoteStoreChecks

pytestmark = pytest.mark.anyio

REAL_URL = os.environ.get("REME_TEST_QDRANT_URL", "").strip()


def make_store(
    embedder: CountingEmbedder, tmp_path: Path, *, on_disk: bool = True, **options: Any
) -> QdrantVectorStore:
    """A store on the real server, else in Qdrant's local mode: on disk under `tmp_path`, or in memory (`on_disk`
    false: the same engine without the client's SQLite copy, which commits every point written)."""
    prefix = f"t{secrets.token_hex(4)}-"
    where: dict[str, Any] = {"url": REAL_URL} if REAL_URL else {"path": tmp_path / "qdrant"}
    if not REAL_URL and not on_disk:
        where = {"location": ":memory:"}
    return QdrantVectorStore(QdrantStoreParams(collection_prefix=prefix, **where, **options), embedder=embedder)


async def _drop_all(store: QdrantVectorStore) -> None:
    for workspace in await store.list_workspaces():
        await store.delete_workspace(workspace)


class TestQdrantStore(ContractTests):
    """The contract in local mode runs in memory: its large-workspace tests spent most of their 90 s in the local
    client's SQLite commits, which are Qdrant's, not the store's (the extras below use the on-disk local mode)."""

    MID_WRITE = ("_write", False)  # inside the commit, under the write lock, before the points are sent

    @pytest.fixture
    async def store(self, embedder: CountingEmbedder, tmp_path: Path) -> AsyncIterator[QdrantVectorStore]:
        store = make_store(embedder, tmp_path, on_disk=False)
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


class TestQdrantExtras(RemoteStoreChecks):
    pytestmark = [pytest.mark.anyio]

    @pytest.fixture
    async def store(self, tmp_path: Path) -> AsyncIterator[QdrantVectorStore]:
        store = make_store(CountingEmbedder(), tmp_path)
        await store.start()
        yield store
        await _drop_all(store)
        await store.close()


def test_which_qdrant() -> None:
    if not REAL_URL:
        pytest.skip(
            "the Qdrant tests ran in Qdrant's local mode (the client's in-process engine), not against a server: set "
            "REME_TEST_QDRANT_URL=http://host:6333 to run them against one"
        )


def test_remes_parameter_names_configure_it(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    local = create_store("qdrant", {"store_dir": str(tmp_path / "q"), "distance": "COSINE"}, embedder=embedder,
                         data_dir=tmp_path)  # fmt: skip
    assert isinstance(local, QdrantVectorStore) and local._options() == {"path": str(tmp_path / "q")}
    server = create_store("qdrant", {"url": "http://127.0.0.1:6333", "api_key": "k"}, embedder=embedder,
                          data_dir=tmp_path)  # fmt: skip
    assert isinstance(server, QdrantVectorStore) and server._options()["url"] == "http://127.0.0.1:6333"
    default = create_store("qdrant", {}, embedder=embedder, data_dir=tmp_path)  # ReMe's: the server on this machine
    assert isinstance(default, QdrantVectorStore)
    assert (default._options()["host"], default._options()["port"]) == ("localhost", 6333)
    with pytest.raises(ConfigError, match="not both"):
        create_store("qdrant", {"url": "http://x:6333", "path": "y"}, embedder=embedder, data_dir=tmp_path)
    with pytest.raises(ConfigError, match="distance"):
        create_store("qdrant", {"distance": "EUCLID"}, embedder=embedder, data_dir=tmp_path)
