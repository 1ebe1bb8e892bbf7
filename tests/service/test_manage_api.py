"""The management REST API (`server/manage.py`) against the real app served on loopback: listing, paging, filters,
one memory's GET/PATCH/DELETE, export and import, and the same auth as the flows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.app import ReMeApp
from reme_service.audit.log import read_records
from reme_service.auth.keyfile import create_key
from reme_service.server.http import create_http_app
from tests.conditions import until
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def keys_file(tmp_path: Path) -> Path:
    return tmp_path / "data" / "auth" / "keys.json"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert body["success"] is False and body["answer"] == ""
    return dict(body["metadata"]["error"])


def memory(i: int, **fields: Any) -> dict[str, Any]:
    return {
        "memory_id": f"m{i:03d}",
        "memory_type": "task",
        "when_to_use": f"when deploying service number {i}",
        "content": f"run the checks of step {i}",
        "time_modified": f"2026-11-{1 + i % 20:02d} 10:00:00",
        **fields,
    }


def insert(client: httpx.Client, workspace: str, memories: list[dict[str, Any]], **kw: Any) -> None:
    body = {"workspace_id": workspace, "action": "insert", "memory_dicts": memories}
    response = client.post("/vector_store", json=body, **kw)
    assert response.status_code == 200, response.text


def list_all(client: httpx.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    memories: list[dict[str, Any]] = []
    cursor = None
    while True:
        response = client.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        memories += page["memories"]
        cursor = page["next_cursor"]
        if cursor is None:
            return memories


def test_workspaces_pages_and_filters(serve: ServeFn) -> None:
    with serve() as client:
        insert(client, "alpha", [memory(i) for i in range(120)])
        insert(client, "alpha", [memory(500, memory_type="personal", when_to_use="likes green tea", content="tea")])
        insert(client, "beta", [memory(1)])

        workspaces = {w["workspace_id"]: w for w in client.get("/workspaces").json()["workspaces"]}
        assert set(workspaces) >= {"alpha", "beta"}
        assert workspaces["alpha"]["size"] == 121
        assert workspaces["alpha"]["counts"] == {"task": 120, "personal": 1, "tool": 0}
        assert workspaces["alpha"]["last_modified"] == "2026-11-20 10:00:00"

        first = client.get("/workspaces/alpha/memories").json()
        assert len(first["memories"]) == 50 and first["next_cursor"]
        everything = list_all(client, "/workspaces/alpha/memories", limit=7)
        ids = [m["memory_id"] for m in everything]
        assert ids == sorted(ids) and len(ids) == len(set(ids)) == 121  # stable order, nothing twice or lost
        assert everything[0] == {**memory(0), "workspace_id": "alpha", **_generated(everything[0])}

        personal = client.get("/workspaces/alpha/memories", params={"memory_type": "personal"}).json()
        assert [m["memory_id"] for m in personal["memories"]] == ["m500"] and personal["next_cursor"] is None
        assert personal["memories"][0]["content"] == "tea"
        found = list_all(client, "/workspaces/alpha/memories", q="NUMBER 11", limit=2)
        assert sorted(m["memory_id"] for m in found) == [
            "m011",
            "m110",
            "m111",
            "m112",
            "m113",
            "m114",
            "m115",
            "m116",
            "m117",
            "m118",
            "m119",
        ]
        window = list_all(client, "/workspaces/alpha/memories", since="2026-11-19", until="2026-11-20T10:00", limit=3)
        assert {m["time_modified"][:10] for m in window} == {"2026-11-19", "2026-11-20"} and len(window) == 12


def _generated(got: dict[str, Any]) -> dict[str, Any]:
    """The fields the service fills in when a memory is stored without them."""
    return {key: got[key] for key in ("time_created", "score", "author", "metadata")}


def test_limits_and_cursors_are_checked(serve: ServeFn) -> None:
    with serve() as client:
        insert(client, "alpha", [memory(i) for i in range(5)])
        insert(client, "beta", [memory(i) for i in range(5)])
        for bad in ("0", "501", "many"):
            response = client.get("/workspaces/alpha/memories", params={"limit": bad})
            assert response.status_code == 400 and error_of(response)["code"] == "invalid_request"
        assert client.get("/workspaces/alpha/memories", params={"limit": 500}).status_code == 200
        cursor = client.get("/workspaces/alpha/memories", params={"limit": 2}).json()["next_cursor"]
        assert client.get("/workspaces/alpha/memories", params={"limit": 2, "cursor": cursor}).status_code == 200
        # another workspace's cursor, other filters, a forged or garbled one: 400, never a page
        for workspace, params in [
            ("beta", {"cursor": cursor}),
            ("alpha", {"cursor": cursor, "q": "deploying"}),
            ("alpha", {"cursor": "bTAwNA." + cursor.split(".")[1]}),
            ("alpha", {"cursor": cursor[:-2] + "xx"}),
            ("alpha", {"cursor": "%%%"}),
            ("alpha", {"cursor": cursor.split(".")[0] + ".é"}),  # a non-ASCII signature (was a 500)
        ]:
            response = client.get(f"/workspaces/{workspace}/memories", params=params)
            assert response.status_code == 400, (workspace, params, response.text)
            assert "cursor" in error_of(response)["message"]
        assert client.get("/workspaces/alpha/memories", params={"since": "yesterday"}).status_code == 400
        assert client.get("/workspaces/alpha/memories", params={"memory_type": "dream"}).status_code == 400
        missing = client.get("/workspaces/nobody/memories")
        assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"
        assert client.get("/workspaces/nobody/export").status_code == 404


def test_get_patch_delete_one_memory(serve: ServeFn) -> None:
    with serve() as client:
        insert(client, "alpha", [memory(i) for i in range(3)])
        got = client.get("/workspaces/alpha/memories/m001").json()
        assert got["when_to_use"] == "when deploying service number 1" and got["memory_id"] == "m001"

        def search(query: str) -> list[str]:
            body = {"workspace_id": "alpha", "query": query, "top_k": 1}
            response = client.post("/retrieve_task_memory_simple", json=body)
            assert response.status_code == 200, response.text
            return [m["memory_id"] for m in response.json()["metadata"]["memory_list"]]

        # content only: the indexed text (when_to_use) is unchanged, the embedding kept
        patched = client.patch("/workspaces/alpha/memories/m001", json={"content": "new steps", "score": 0.5})
        assert patched.status_code == 200, patched.text
        assert patched.json()["content"] == "new steps" and patched.json()["time_modified"] != got["time_modified"]
        again = client.get("/workspaces/alpha/memories/m001").json()
        assert again["content"] == "new steps" and again["score"] == 0.5 and again["when_to_use"] == got["when_to_use"]
        # the indexed text changes: re-embedded, so a search for the new text finds it
        assert search("rotating the kitchen sponge weekly") != ["m002"]
        response = client.patch("/workspaces/alpha/memories/m002", json={"when_to_use": "rotating the kitchen sponge"})
        assert response.status_code == 200
        assert search("rotating the kitchen sponge") == ["m002"]

        for body in ({"memory_id": "other"}, {"workspace_id": "beta"}, {"colour": "red"}, {"score": "high"}, [1]):
            response = client.patch("/workspaces/alpha/memories/m000", json=body)
            assert response.status_code == 400, (body, response.text)
        # values no flow would take are refused here too, and the memory is left as it was
        before = client.get("/workspaces/alpha/memories/m000").json()
        deep: object = 1
        for _ in range(70):
            deep = [deep]
        for raw in (
            '{"metadata": {"n": 9223372036854775808}}',  # past signed 64 bits
            '{"metadata": {"n": 18446744073709551616}}',  # past 64 bits (orjson read it as a float)
            '{"metadata": {"n": NaN}}',
            '{"metadata": {"n": 1e400}}',
            json.dumps({"metadata": {"deep": deep}}),
        ):
            response = client.patch("/workspaces/alpha/memories/m000", content=raw)
            assert response.status_code == 400, (raw[:60], response.text)
            assert response.json()["metadata"]["error"]["code"] == "invalid_request"
        assert client.get("/workspaces/alpha/memories/m000").json() == before
        assert client.patch("/workspaces/alpha/memories/m000", json={"memory_id": "m000"}).status_code == 200
        assert client.patch("/workspaces/alpha/memories/nope", json={"content": "x"}).status_code == 404
        assert client.get("/workspaces/alpha/memories/nope").status_code == 404

        assert client.delete("/workspaces/alpha/memories/m000").json() == {"deleted": True, "memory_id": "m000"}
        assert client.get("/workspaces/alpha/memories/m000").status_code == 404
        assert client.delete("/workspaces/alpha/memories/m000").status_code == 404
        assert [m["memory_id"] for m in list_all(client, "/workspaces/alpha/memories")] == ["m001", "m002"]


def test_export_is_the_dump_format_and_import_swaps_atomically(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        insert(client, "alpha", [memory(i) for i in range(2500)])
        insert(client, "alpha", [memory(9000, memory_type="personal", target="user", content="likes tea")])
        response = client.get("/workspaces/alpha/export")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        assert "alpha.jsonl" in response.headers["content-disposition"]
        exported = response.content
        dump = client.post("/vector_store", json={"workspace_id": "alpha", "action": "dump", "path": "libraries/a"})
        assert dump.status_code == 200, dump.text
        dumped = (tmp_path / "data" / "libraries" / "a" / "alpha.jsonl").read_bytes()
        assert sorted(exported.splitlines()) == sorted(dumped.splitlines())  # the vector_store dump's format
        assert len(exported.splitlines()) == 2501

        # import into beta: replaces what it held
        insert(client, "beta", [memory(7777)])
        imported = client.post("/workspaces/beta/import", content=exported)
        assert imported.status_code == 200 and imported.json() == {"size": 2501}
        beta = list_all(client, "/workspaces/beta/memories", limit=500)
        assert len(beta) == 2501 and "m7777" not in {m["memory_id"] for m in beta}
        assert all(m["workspace_id"] == "beta" for m in beta)
        assert next(m for m in beta if m["memory_id"] == "m9000")["target"] == "user"

        # a malformed line: 400 naming it, nothing changed
        lines = exported.splitlines()
        for bad, why in ((b"{not json", "line 3"), (b'{"score": "high"}', "line 3"), (b"[1, 2]", "line 3")):
            body = b"\n".join([*lines[:2], bad, *lines[2:10]]) + b"\n"
            response = client.post("/workspaces/beta/import", content=body)
            assert response.status_code == 400, response.text
            assert why in error_of(response)["message"]
        assert len(list_all(client, "/workspaces/beta/memories", limit=500)) == 2501
        assert client.post("/workspaces/ghost/import", content=lines[0]).status_code == 404


def test_import_holds_lines_to_the_limits_of_an_insert(serve: ServeFn) -> None:
    """A library line is refused where `vector_store insert` refuses the same memory (`schema/json_limits.py`):
    nesting past 64 levels (one 250 deep was imported, then every `list` of the workspace answered 500) and integers
    past 64 bits (one was stored rounded to a float). What fits is kept exactly, 64-bit extremes included."""
    with serve() as client:
        insert(client, "alpha", [memory(1)])
        deep = b'{"memory_id": "deep", "metadata": ' + b'{"a": ' * 250 + b"1" + b"}" * 251
        huge = b'{"memory_id": "huge", "metadata": {"n": 123456789012345678901234567890}}'
        for bad, why in ((deep, "nested deeper than 64 levels"), (huge, "integer outside the 64-bit range")):
            response = client.post("/workspaces/alpha/import", content=b"\n".join([b'{"memory_id": "ok"}', bad]))
            assert response.status_code == 400, response.text
            message = error_of(response)["message"]
            assert "line 2" in message and why in message, message
        assert [m["memory_id"] for m in list_all(client, "/workspaces/alpha/memories")] == ["m001"]
        listed = client.post("/vector_store", json={"workspace_id": "alpha", "action": "list"})
        assert listed.status_code == 200, listed.text

        exact = (
            b'{"memory_id": "ints", "metadata": '
            b'{"max": 9223372036854775807, "min": -9223372036854775808, "id": "1234567890123456789012"}}'
        )
        infinite = exact.replace(b"9223372036854775807,", b"1e400,")  # read by the stdlib parser too (19 digits)
        response = client.post("/workspaces/alpha/import", content=infinite)
        assert response.status_code == 400 and "infinity" in error_of(response)["message"], response.text
        response = client.post("/workspaces/alpha/import", content=exact)
        assert response.status_code == 200, response.text
        metadata = client.get("/workspaces/alpha/memories/ints").json()["metadata"]
        assert metadata == {"max": 2**63 - 1, "min": -(2**63), "id": "1234567890123456789012"}


@pytest.mark.anyio
@pytest.mark.own_backend  # the local store, whatever REME_TEST_STORE says
async def test_an_import_does_not_bring_back_a_workspace_deleted_meanwhile(tmp_path: Path) -> None:
    """A workspace deleted after an import found it, before the import took the workspace's lock: the import is a
    404 and the workspace stays deleted, as if the delete had come first. (It answered 200 and recreated the
    workspace, an outcome of no order of the two requests.)"""
    app = ReMeApp(f"data_dir={tmp_path / 'data'}", "embedding_model.default.backend=hash", env={})
    async with app:
        assert app.services is not None
        store = app.services.store()
        api = create_http_app(app, manage_lifecycle=False)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://localhost") as client:
            body = {"workspace_id": "alpha", "action": "insert", "memory_dicts": [memory(1)]}
            assert (await client.post("/vector_store", json=body)).status_code == 200
            lock = store.lock("alpha")
            waiting = lambda: len(getattr(lock, "_waiters", None) or ())  # noqa: E731 - asyncio.Lock's queue
            async with lock:  # the delete, then the import, queue behind it in that order
                delete = asyncio.create_task(
                    client.post("/vector_store", json={"workspace_id": "alpha", "action": "delete"})
                )
                await until(lambda: waiting() == 1)
                imported = asyncio.create_task(client.post("/workspaces/alpha/import", content=b'{"memory_id": "new"}'))
                await until(lambda: waiting() == 2)
            assert (await delete).json()["metadata"]["action_result"]["deleted"] is True
            response = await imported
            assert response.status_code == 404 and error_of(response)["code"] == "not_found", response.text
            assert not await store.exists_workspace("alpha")
            assert (await client.get("/workspaces")).json()["workspaces"] == []


def test_keys_scope_the_management_api(serve: ServeFn, tmp_path: Path) -> None:
    _, writer = create_key(keys_file(tmp_path), workspaces=["alpha"], scope="write", name="alpha-writer")
    _, reader = create_key(keys_file(tmp_path), workspaces=["alpha"], scope="read")
    _, beta = create_key(keys_file(tmp_path), workspaces=["beta"], scope="write")
    with serve() as client:
        insert(client, "alpha", [memory(1)], headers=bearer(writer))
        insert(client, "beta", [memory(2)], headers=bearer(beta))
        assert client.get("/workspaces").status_code == 401
        assert client.get("/workspaces/alpha/memories").status_code == 401

        # a key for alpha sees alpha only: not in the list, 403 (never 404 or an empty 200) on beta, even unknown ones
        listed = client.get("/workspaces", headers=bearer(writer)).json()["workspaces"]
        assert [w["workspace_id"] for w in listed] == ["alpha"]
        for method, path in [
            ("GET", "/workspaces/beta/memories"),
            ("GET", "/workspaces/beta/memories/m002"),
            ("PATCH", "/workspaces/beta/memories/m002"),
            ("DELETE", "/workspaces/beta/memories/m002"),
            ("GET", "/workspaces/beta/export"),
            ("POST", "/workspaces/beta/import"),
            ("GET", "/workspaces/nobody/memories"),
        ]:
            response = client.request(method, path, headers=bearer(writer), json={"content": "x"})
            assert response.status_code == 403, (method, path, response.text)
            assert "beta" not in response.text and "m002" not in response.text

        # a read key reads, and cannot change
        assert client.get("/workspaces/alpha/memories/m001", headers=bearer(reader)).status_code == 200
        assert client.get("/workspaces/alpha/export", headers=bearer(reader)).status_code == 200
        for method, path in [
            ("PATCH", "/workspaces/alpha/memories/m001"),
            ("DELETE", "/workspaces/alpha/memories/m001"),
            ("POST", "/workspaces/alpha/import"),
        ]:
            response = client.request(method, path, headers=bearer(reader), json={"content": "x"})
            assert response.status_code == 403 and error_of(response)["code"] == "forbidden"
        assert client.get("/workspaces/alpha/memories/m001", headers=bearer(reader)).json()["content"] != "x"

        # the writer's changes are audited like the flows' (and the refused ones too)
        patched = client.patch("/workspaces/alpha/memories/m001", headers=bearer(writer), json={"content": "y"})
        assert patched.status_code == 200
        assert client.delete("/workspaces/alpha/memories/m001", headers=bearer(writer)).status_code == 200
    records = [r for r in read_records(tmp_path / "data" / "audit") if r.flow == "manage"]
    done = [(r.action, r.status, r.key_name, r.ids_changed, r.ids_deleted) for r in records if r.status == "ok"]
    assert done == [
        ("patch_memory", "ok", "alpha-writer", ["m001"], []),
        ("delete_memory", "ok", "alpha-writer", [], ["m001"]),
    ]
    assert {r.error_code for r in records if r.status == "error"} == {"forbidden"}


def test_vector_store_list_honours_limit_and_offset(serve: ServeFn) -> None:
    with serve() as client:
        insert(client, "alpha", [memory(i) for i in range(10)])

        def listed(**fields: Any) -> list[str]:
            response = client.post("/vector_store", json={"workspace_id": "alpha", "action": "list", **fields})
            assert response.status_code == 200, response.text
            return [m["memory_id"] for m in response.json()["metadata"]["action_result"]]

        assert listed() == [f"m{i:03d}" for i in range(10)]  # ReMe: everything, insertion order
        assert listed(limit=3) == ["m000", "m001", "m002"]
        assert listed(limit=3, offset=8) == ["m008", "m009"]
        assert listed(offset=7) == ["m007", "m008", "m009"]
        assert listed(offset=20) == []
        response = client.post("/vector_store", json={"workspace_id": "alpha", "action": "list", "limit": 0})
        assert response.status_code == 422
        assert "vector" not in json.dumps(listed(limit=1))


def test_workspaces_are_paged(serve: ServeFn) -> None:
    names = [f"ws{i:03d}" for i in range(120)]
    with serve() as client:
        for name in names:
            insert(client, name, [memory(1)])
        first = client.get("/workspaces").json()
        assert len(first["workspaces"]) == 50 and first["next_cursor"]  # the default page
        seen: list[str] = []
        cursor = None
        while True:
            page = client.get("/workspaces", params={"limit": 7, **({"cursor": cursor} if cursor else {})}).json()
            assert len(page["workspaces"]) <= 7
            seen += [w["workspace_id"] for w in page["workspaces"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert seen == sorted(names)  # in id order, each once
        assert all(w["size"] == 1 for w in client.get("/workspaces", params={"limit": 500}).json()["workspaces"])
        assert client.get("/workspaces", params={"limit": 501}).status_code == 400
        insert(client, "ws000", [memory(2)])
        memory_cursor = client.get("/workspaces/ws000/memories", params={"limit": 1}).json()["next_cursor"]
        # a memory page's cursor is no list's; a non-ASCII signature was a 500
        for bad in ("garbage", first["next_cursor"] + "x", memory_cursor, "YQ.é"):
            response = client.get("/workspaces", params={"cursor": bad})
            assert response.status_code == 400 and error_of(response)["code"] == "invalid_request"


def test_a_wrong_method_on_a_memory_names_every_allowed_one(serve: ServeFn) -> None:
    """OPTIONS (or PUT) on `/workspaces/{id}/memories/{mid}` is a 405 whose `Allow` names GET, PATCH and DELETE:
    all three routes of the path, not only the first (D22)."""
    with serve() as client:
        for method in ("OPTIONS", "PUT"):
            answer = client.request(method, "/workspaces/ws/memories/m1")
            assert answer.status_code == 405, answer.text
            assert set(answer.headers["allow"].split(", ")) == {"DELETE", "GET", "PATCH"}, answer.headers
