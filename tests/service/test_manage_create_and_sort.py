"""`POST /workspaces/{id}/memories` (create one memory) and the listing's `sort` and `total` (`server/manage.py`,
`server/pages.py`), against the real app served on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.audit.log import read_records
from reme_service.auth.keyfile import create_key
from tests.service.conftest import ServeFn
from tests.service.test_manage_api import bearer, error_of, insert, keys_file

pytestmark = pytest.mark.service

LIST = "/workspaces/alpha/memories"


def dated(i: int) -> dict[str, Any]:
    """Memory `i`, created and modified at times that repeat (ties are ordered by id) and disagree in order."""
    return {
        "memory_id": f"m{i:02d}",
        "memory_type": "task",
        "when_to_use": f"when deploying service number {i}",
        "content": f"run the checks of step {i}",
        "time_created": f"2026-10-{1 + (i * 7) % 9:02d} 08:00:00",
        "time_modified": f"2026-11-{1 + (i * 5) % 11:02d} 09:30:00",
    }


def pages(client: httpx.Client, **params: Any) -> tuple[list[str], set[int]]:
    """Every memory id of the listing, page by page, and the totals the pages reported."""
    ids: list[str] = []
    totals: set[int] = set()
    cursor = None
    while True:
        response = client.get(LIST, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        ids += [m["memory_id"] for m in page["memories"]]
        totals.add(page["total"])
        cursor = page["next_cursor"]
        if cursor is None:
            return ids, totals


def test_every_sort_pages_in_order_with_the_total(serve: ServeFn) -> None:
    memories = [dated(i) for i in range(23)]
    with serve() as client:
        insert(client, "alpha", memories)
        for sort in ("memory_id", "-memory_id", "time_created", "-time_created", "time_modified", "-time_modified"):
            field = sort.lstrip("-")
            expected = sorted(memories, key=lambda m: (m[field], m["memory_id"]), reverse=sort.startswith("-"))
            for limit in (4, 23, 500):
                ids, totals = pages(client, sort=sort, limit=limit)
                assert ids == [m["memory_id"] for m in expected], (sort, limit)
                assert totals == {23}
        # filtered: the total counts the matches, not the workspace
        ids, totals = pages(client, sort="-time_created", q="number 1", limit=3)
        assert totals == {len(ids)} and sorted(ids) == ["m01"] + [f"m{i}" for i in range(10, 20)]
        assert client.get(LIST).json()["total"] == 23  # the default order (memory id) reports it too


def test_sort_and_its_cursor_are_checked(serve: ServeFn) -> None:
    with serve() as client:
        insert(client, "alpha", [dated(i) for i in range(6)])
        for bad in ("time", "+time_created", "-", "score"):
            response = client.get(LIST, params={"sort": bad})
            assert response.status_code == 400 and error_of(response)["message"].startswith("sort must be one of")
        cursor = client.get(LIST, params={"sort": "-time_created", "limit": 2}).json()["next_cursor"]
        # a cursor resumes only the order it was issued for
        for params in ({"sort": "time_created"}, {"sort": "-time_modified"}, {}):
            response = client.get(LIST, params={**params, "cursor": cursor})
            assert response.status_code == 400 and "cursor" in error_of(response)["message"]
        resumed = client.get(LIST, params={"sort": "-time_created", "limit": 2, "cursor": cursor})
        assert resumed.status_code == 200 and len(resumed.json()["memories"]) == 2


def test_create_a_memory(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        created = client.post(
            "/workspaces/fresh/memories",
            json={"memory_type": "personal", "when_to_use": "the user's tea", "content": "likes green tea"},
        )
        assert created.status_code == 201, created.text
        memory = created.json()
        assert memory["workspace_id"] == "fresh" and memory["memory_type"] == "personal"
        assert memory["memory_id"] and memory["time_created"] and memory["content"] == "likes green tea"
        # it is stored (in a workspace created with it), listed, searchable, and has its ADD in the history
        assert client.get(f"/workspaces/fresh/memories/{memory['memory_id']}").json() == memory
        assert client.get("/workspaces/fresh/memories").json()["total"] == 1
        history = client.get(f"/workspaces/fresh/memories/{memory['memory_id']}/history").json()
        assert [entry["event"] for entry in history] == ["ADD"]

        given = client.post("/workspaces/fresh/memories", json={**dated(1), "workspace_id": "fresh"})
        assert given.status_code == 201 and given.json()["memory_id"] == "m01"
        again = client.post("/workspaces/fresh/memories", json={**dated(1), "content": "other"})
        assert again.status_code == 409 and error_of(again)["details"]["memory_id"] == "m01"
        assert client.get("/workspaces/fresh/memories/m01").json()["content"] == dated(1)["content"]

        for body in (
            {},
            [dated(2)],
            {**dated(2), "colour": "red"},
            {**dated(2), "memory_type": "dream"},
            {**dated(2), "workspace_id": "other"},
            {**dated(2), "score": "high"},
            {**dated(2), "metadata": {"n": 2**70}},
        ):
            response = client.post("/workspaces/fresh/memories", json=body)
            assert response.status_code == 400, (body, response.text)
            assert error_of(response)["code"] == "invalid_request"
        assert client.post("/workspaces/fresh/memories", content=b"{not json").status_code == 400
        assert client.get("/workspaces/fresh/memories").json()["total"] == 2  # nothing refused was written
    records = [r for r in read_records(tmp_path / "data" / "audit") if r.action == "create_memory"]
    assert [(r.status, r.ids_added) for r in records if r.status == "ok"] == [
        ("ok", [memory["memory_id"]]),
        ("ok", ["m01"]),
    ]
    # refusals are audited too, a body that is not JSON among them (it was recorded as "ok" before)
    assert [r.error_code for r in records if r.status == "error"] == ["conflict"] + ["invalid_request"] * 8


def test_creating_needs_a_write_key_for_the_workspace(serve: ServeFn, tmp_path: Path) -> None:
    _, writer = create_key(keys_file(tmp_path), workspaces=["alpha"], scope="write", name="alpha-writer")
    _, reader = create_key(keys_file(tmp_path), workspaces=["alpha"], scope="read")
    with serve() as client:
        body = dated(1)
        assert client.post(LIST, json=body).status_code == 401
        for key, path in ((reader, LIST), (writer, "/workspaces/beta/memories")):
            response = client.post(path, json=body, headers=bearer(key))
            assert response.status_code == 403 and error_of(response)["code"] == "forbidden"
        created = client.post(LIST, json=body, headers=bearer(writer))
        assert created.status_code == 201 and created.json()["memory_id"] == "m01"
        assert client.get(LIST, headers=bearer(reader)).json()["total"] == 1
