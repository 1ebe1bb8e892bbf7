"""`GET /workspaces/{id}/export` is a point-in-time snapshot of the workspace (`server/export.py`): an import that
replaces the workspace while the export streams leaves the export all-old, one queued ahead of it makes it all-new,
never a mix; a workspace deleted while the export waits for its lock is a 404; and the spooled snapshot is closed
however the stream ends, a client that goes away included.

The export is driven straight through the ASGI app (`PausedExport`) so that its stream can be held after its first
chunk: httpx's ASGITransport reads a response whole before answering, and a real socket would let the server run
ahead into its buffers. Every wait is on a condition, none on a duration."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import ClientDisconnect

from reme_service.app import ReMeApp
from reme_service.errors import StoreError
from reme_service.schema.vector_node import VectorNode
from reme_service.server import export as export_module
from reme_service.server.http import create_http_app
from reme_service.stores.base import VectorStore
from tests.conditions import until
from tests.service.conftest import _store_overrides

pytestmark = [pytest.mark.service, pytest.mark.anyio]

#: the in-process stores in the first pass of scripts/test.sh, the server it names in the Chroma and pgvector passes
BACKENDS = ["memory", "local"] if os.environ.get("REME_TEST_STORE", "local") == "local" else ["shared"]
SIZE = 2000  # two batches of the old export (1,000 memories each) and several chunks of the new one
Message = dict[str, Any]


class PausedExport:
    """One GET of an export, sent to the ASGI app by hand: `first_chunk` is set when the first body chunk arrives,
    and the stream then waits for `resume` (or, with `disconnect_after_first`, the client goes away there: by a
    disconnect message under ASGI spec 2.3, by a send that fails under 2.4, as uvicorn does)."""

    def __init__(self, path: str, *, spec_version: str = "2.3", disconnect_after_first: bool = False) -> None:
        self.path = path
        self.spec_version = spec_version
        self.disconnect_after_first = disconnect_after_first
        self.first_chunk = asyncio.Event()
        self.resume = asyncio.Event()
        self._gone = asyncio.Event()
        self._requested = False
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": self.spec_version},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(b"host", b"localhost")],
            "client": ("127.0.0.1", 50000),
            "server": ("localhost", 80),
        }

    async def receive(self) -> Message:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
            return
        chunk = bytes(message.get("body", b""))
        if not chunk:
            return
        self.chunks.append(chunk)
        if len(self.chunks) == 1:
            self.first_chunk.set()
            if self.disconnect_after_first:
                self._gone.set()
                if self.spec_version >= "2.4":
                    raise OSError("the client went away")
            await self.resume.wait()

    async def run(self, api: Any) -> None:
        await api(self.scope(), self.receive, self.send)


def line(memory_id: str, content: str) -> bytes:
    memory = {
        "memory_id": memory_id,
        "memory_type": "task",
        "when_to_use": f"when {content} applies",
        "content": content,
    }
    return json.dumps(memory).encode() + b"\n"


def contents(body: bytes) -> list[str]:
    return sorted(json.loads(row)["content"] for row in body.splitlines())


def overrides_for(backend: str, request: pytest.FixtureRequest) -> list[str]:
    """`shared`: the store REME_TEST_STORE names (`tests/service/conftest.py`); else the backend named."""
    return _store_overrides(request) if backend == "shared" else [f"vector_store.default.backend={backend}"]


@asynccontextmanager
async def service(tmp_path: Path, *overrides: str) -> AsyncIterator[tuple[Any, VectorStore, httpx.AsyncClient]]:
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", *overrides, env={})
    async with app:
        assert app.services is not None
        api = create_http_app(app, manage_lifecycle=False)
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield api, app.services.store().inner, client  # the backend: what the test patches is what the routes reach


async def create(client: httpx.AsyncClient, workspace: str, body: bytes) -> None:
    """The workspace holding the memories of `body` (an import replaces a workspace that exists)."""
    placeholder = {"memory_id": "placeholder", "when_to_use": "never", "content": "replaced"}
    insert = {"workspace_id": workspace, "action": "insert", "memory_dicts": [placeholder]}
    assert (await client.post("/vector_store", json=insert)).status_code == 200
    await import_library(client, workspace, body)


async def import_library(client: httpx.AsyncClient, workspace: str, body: bytes) -> None:
    response = await client.post(f"/workspaces/{workspace}/import", content=body)
    assert response.status_code == 200 and response.json() == {"size": SIZE}, response.text


def library(prefix: str, *, same_ids: bool) -> bytes:
    return b"".join(line(f"m{i:04d}" if same_ids else f"{prefix}-{i:04d}", f"{prefix}-{i}") for i in range(SIZE))


@pytest.mark.backend_matrix  # `shared`: the store REME_TEST_STORE names
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("same_ids", [True, False], ids=["same-ids", "new-ids"])
async def test_an_import_while_the_export_streams_leaves_it_all_old(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, same_ids: bool
) -> None:
    """The import runs to its end after the export's first chunk has arrived and before the rest is read. The
    export is the workspace before the import, whole. (It was the first 1,000 old memories, then the import's
    version of the next 1,000 ids: a mix, or a truncated export when the ids changed.)"""
    old, new = library("old", same_ids=same_ids), library("new", same_ids=same_ids)
    async with service(tmp_path, *overrides_for(backend, request)) as (api, _, client):
        await create(client, "alpha", old)
        export = PausedExport("/workspaces/alpha/export")
        streaming = asyncio.create_task(export.run(api))
        await asyncio.wait_for(export.first_chunk.wait(), 30)
        await import_library(client, "alpha", new)
        export.resume.set()
        await asyncio.wait_for(streaming, 30)
        assert export.status == 200
        assert contents(export.body) == contents(old)
        assert len(export.chunks) > 1  # the import did land while the export was streaming
        assert contents((await client.get("/workspaces/alpha/export")).content) == contents(new)


@pytest.mark.own_backend  # watches the queue of the process's asyncio lock
@pytest.mark.parametrize("backend", ["memory", "local"])
async def test_an_import_queued_ahead_of_the_export_makes_it_all_new(tmp_path: Path, backend: str) -> None:
    """An import that holds the workspace's lock when the export asks for it: the export waits and is all-new."""
    old, new = library("old", same_ids=True), library("new", same_ids=True)
    async with service(tmp_path, f"vector_store.default.backend={backend}") as (api, store, client):
        await create(client, "alpha", old)
        lock = store.lock("alpha")
        waiting = lambda: len(getattr(lock, "_waiters", None) or ())  # noqa: E731 - asyncio.Lock's queue
        export = PausedExport("/workspaces/alpha/export")
        async with lock:
            importing = asyncio.create_task(import_library(client, "alpha", new))
            await until(lambda: waiting() == 1)
            streaming = asyncio.create_task(export.run(api))
            await until(lambda: waiting() == 2)
        export.resume.set()
        await asyncio.wait_for(asyncio.gather(importing, streaming), 30)
        assert export.status == 200 and contents(export.body) == contents(new)


@pytest.mark.own_backend
async def test_an_export_of_a_workspace_deleted_meanwhile_is_a_404(tmp_path: Path) -> None:
    """A delete queued on the lock ahead of the export: the export answers the error envelope's 404, as an import
    does, rather than a 200 with an empty body."""
    async with service(tmp_path) as (api, store, client):
        await create(client, "alpha", library("old", same_ids=True))
        lock = store.lock("alpha")
        waiting = lambda: len(getattr(lock, "_waiters", None) or ())  # noqa: E731 - asyncio.Lock's queue
        export = PausedExport("/workspaces/alpha/export")
        export.resume.set()  # no holding back: the answer is one chunk
        async with lock:
            delete = asyncio.create_task(
                client.post("/vector_store", json={"workspace_id": "alpha", "action": "delete"})
            )
            await until(lambda: waiting() == 1)
            streaming = asyncio.create_task(export.run(api))
            await until(lambda: waiting() == 2)
        assert (await delete).json()["metadata"]["action_result"]["deleted"] is True
        await asyncio.wait_for(streaming, 30)
        assert export.status == 404
        error = json.loads(export.body)["metadata"]["error"]
        assert error["code"] == "not_found" and error["details"] == {"workspace_id": "alpha"}


class _Recorded(tempfile.SpooledTemporaryFile[bytes]):
    """The export's spool, remembered so the test can tell it went to a file and was closed."""

    made: list[_Recorded] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rolled = False
        _Recorded.made.append(self)

    def rollover(self) -> None:
        super().rollover()
        self.rolled = True


@pytest.fixture
def spools(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Recorded]]:
    made: list[_Recorded] = []
    monkeypatch.setattr(_Recorded, "made", made)
    monkeypatch.setattr(export_module, "SpooledTemporaryFile", _Recorded)
    monkeypatch.setattr(export_module, "SPOOL_BYTES", 1)  # every snapshot goes to a file on disk
    yield made


@pytest.mark.own_backend
@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_a_client_gone_mid_export_leaves_no_file_open(
    tmp_path: Path, spools: list[_Recorded], spec_version: str
) -> None:
    async with service(tmp_path) as (api, _, client):
        await create(client, "alpha", library("old", same_ids=True))
        export = PausedExport("/workspaces/alpha/export", spec_version=spec_version, disconnect_after_first=True)
        if spec_version == "2.3":  # uvicorn's: the disconnect message ends the stream
            await asyncio.wait_for(export.run(api), 30)
        else:  # Starlette turns the failed send into ClientDisconnect, raised to the server
            with pytest.raises(ClientDisconnect):
                await asyncio.wait_for(export.run(api), 30)
        assert export.status == 200 and len(export.chunks) == 1
        assert len(spools) == 1 and spools[0].rolled and spools[0].closed

        complete = await client.get("/workspaces/alpha/export")  # read to its end: closed as well
        assert contents(complete.content) == contents(library("old", same_ids=True))
        assert len(spools) == 2 and spools[1].closed


@pytest.mark.own_backend
async def test_a_store_failing_mid_snapshot_is_an_error_envelope(
    tmp_path: Path, spools: list[_Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot is taken before the response starts: a store failing on its second batch answers the error
    envelope (not a 200 cut short), and the half-written spool is closed."""
    async with service(tmp_path) as (api, store, client):
        await create(client, "alpha", library("old", same_ids=True))
        fetched = 0
        get = store.get

        async def failing_get(workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
            nonlocal fetched
            fetched += 1
            if fetched == 2:
                raise StoreError("the store went away")
            return await get(workspace_id, ids)

        monkeypatch.setattr(store, "get", failing_get)
        response = await client.get("/workspaces/alpha/export")
        assert response.status_code == StoreError.status
        assert response.json()["metadata"]["error"]["message"] == "the store went away"
        assert len(spools) == 1 and spools[0].rolled and spools[0].closed


@pytest.mark.own_backend
async def test_a_snapshot_cancelled_mid_write_closes_its_spool_after_the_write(
    tmp_path: Path, spools: list[_Recorded], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export cancelled (its request gone) while a batch is written in its worker thread: the spool is closed
    once that write has ended, not under it. (Unshielded, the cancel also cancelled the thread's future, the spool
    was closed at once, and the write still running failed on a closed file.)"""
    started, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []
    write = export_module._write_lines

    def held_write(spool: tempfile.SpooledTemporaryFile[bytes], nodes: Sequence[VectorNode]) -> None:
        started.set()
        release.wait(30)
        try:
            write(spool, nodes)
        except BaseException as exc:
            failures.append(exc)
            raise

    monkeypatch.setattr(export_module, "_write_lines", held_write)
    async with service(tmp_path) as (_, store, client):
        await create(client, "alpha", library("old", same_ids=True))
        snapshot = asyncio.create_task(export_module.snapshot_library(store, "alpha"))
        try:
            await until(started.is_set)
            snapshot.cancel()
            with pytest.raises(asyncio.CancelledError):
                await snapshot
            assert len(spools) == 1 and not spools[0].closed  # its write is still running
        finally:
            release.set()
        await until(lambda: spools[0].closed)
        assert failures == []
