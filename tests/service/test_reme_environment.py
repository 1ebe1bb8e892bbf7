"""ReMe's store environment variables configure the stores as in ReMe (`stores/flow_env.py`): Qdrant's
`FLOW_QDRANT_*` (and no params: the server at localhost:6333, never a silent local store), `FLOW_ES_HOSTS`,
`FLOW_PGVECTOR_CONNECTION_STRING`."""

from __future__ import annotations

from pathlib import Path

import pytest

from reme_service.storage.factory import create_store, parse_store_params
from reme_service.stores.params import ElasticsearchStoreParams, PgvectorStoreParams, QdrantStoreParams
from reme_service.stores.qdrant.store import QdrantVectorStore
from reme_service.testing.contract.support import CountingEmbedder
from reme_service.testing.ports import free_port
from reme_service.testing.serve import serve_in_thread
from tests.fakes.es_server import FakeElasticsearch
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]


@pytest.mark.parametrize("env", [{}, {"FLOW_QDRANT_HOST": "127.0.0.1"}])
def test_qdrant_without_params_is_the_server_reme_would_use_and_down_is_503(
    serve: ServeFn, tmp_path: Path, env: dict[str, str]
) -> None:
    port = free_port()
    where = f"{env.get('FLOW_QDRANT_HOST', 'localhost')}:{port}"
    with serve("vector_store.default.backend=qdrant", env={**env, "FLOW_QDRANT_PORT": str(port)}) as client:
        store = client.get("/health").json()["vector_store"]["default"]
        assert store["status"] == "down" and store["mode"] == "server" and where in store["reason"]
        ready = client.get("/health/ready")
        assert ready.status_code == 503
        assert any(r.startswith("vector_store.default:") and where in r for r in ready.json()["reasons"])
        answer = client.post("/vector_store", json={"workspace_id": "ws", "action": "insert",
                             "memory_dicts": [{"when_to_use": "w", "content": "c"}]})  # fmt: skip
        assert answer.status_code == 503, answer.text
        assert answer.json()["success"] is False and where in answer.json()["metadata"]["error"]["message"]
    assert not list(tmp_path.rglob("qdrant"))  # nothing landed in a local store


def test_qdrant_env_fills_only_what_the_config_leaves_out(tmp_path: Path) -> None:
    env = {"FLOW_QDRANT_HOST": "qdrant.internal", "FLOW_QDRANT_PORT": "7333", "FLOW_QDRANT_API_KEY": "k1"}
    _, parsed = parse_store_params("qdrant", {}, env)
    assert isinstance(parsed, QdrantStoreParams)
    assert (parsed.host, parsed.port, parsed.api_key) == ("qdrant.internal", 7333, "k1")
    _, given = parse_store_params("qdrant", {"host": "other", "port": 1234, "api_key": "k2"}, env)
    assert isinstance(given, QdrantStoreParams) and (given.host, given.port, given.api_key) == ("other", 1234, "k2")
    _, by_url = parse_store_params("qdrant", {"url": "http://q:6333"}, env)
    assert isinstance(by_url, QdrantStoreParams) and by_url.host is None and by_url.url == "http://q:6333"
    local = create_store("qdrant", {"path": str(tmp_path / "q")}, embedder=CountingEmbedder(), data_dir=tmp_path,
                         env=env)  # fmt: skip
    assert isinstance(local, QdrantVectorStore) and local._options() == {"path": str(tmp_path / "q")}
    server = create_store("qdrant", {}, embedder=CountingEmbedder(), data_dir=tmp_path, env=env)
    assert isinstance(server, QdrantVectorStore)
    assert {k: server._options()[k] for k in ("host", "port", "api_key")} == {
        "host": "qdrant.internal", "port": 7333, "api_key": "k1"}  # fmt: skip


def test_flow_es_hosts_points_elasticsearch_at_the_cluster(serve: ServeFn) -> None:
    fake = FakeElasticsearch()
    with (
        serve_in_thread(fake.app) as url,
        serve("vector_store.default.backend=elasticsearch", env={"FLOW_ES_HOSTS": url}) as client,
    ):
        assert client.get("/health").json()["vector_store"]["default"]["status"] == "ok"
        stored = client.post("/vector_store", json={"workspace_id": "ws", "action": "insert",
                             "memory_dicts": [{"when_to_use": "w", "content": "c"}]})  # fmt: skip
        assert stored.status_code == 200, stored.text
    _, several = parse_store_params("elasticsearch", {}, {"FLOW_ES_HOSTS": "http://a:9200, http://b:9200"})
    assert isinstance(several, ElasticsearchStoreParams) and several.host_list() == ["http://a:9200", "http://b:9200"]
    _, given = parse_store_params("elasticsearch", {"hosts": "http://c:9200"}, {"FLOW_ES_HOSTS": "http://a:9200"})
    assert isinstance(given, ElasticsearchStoreParams) and given.host_list() == ["http://c:9200"]


def test_flow_pgvector_connection_strings_give_the_dsn() -> None:
    env = {"FLOW_PGVECTOR_ASYNC_CONNECTION_STRING": "postgresql+asyncpg://u@db:5432/reme"}
    _, parsed = parse_store_params("pgvector", {}, env)
    assert isinstance(parsed, PgvectorStoreParams) and parsed.dsn == "postgresql://u@db:5432/reme"
    env["FLOW_PGVECTOR_CONNECTION_STRING"] = "postgresql://u@main:5432/reme"
    _, parsed = parse_store_params("pgvector", {}, env)
    assert isinstance(parsed, PgvectorStoreParams) and parsed.dsn == "postgresql://u@main:5432/reme"
    _, given = parse_store_params("pgvector", {"host": "h"}, env)
    assert isinstance(given, PgvectorStoreParams) and given.dsn is None and given.host == "h"
