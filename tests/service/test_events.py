"""Change events (#21 item 4): `GET /events` as server-sent events and signed webhooks with retries."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import standardwebhooks
from fastapi import FastAPI, Request
from fastapi.responses import Response

from reme_service.auth.keyfile import create_key, revoke_key
from reme_service.testing.ports import free_port
from reme_service.testing.serve import serve_in_thread
from tests.conditions import until_sync
from tests.service.conftest import ServeFn
from tests.sse import next_event

pytestmark = [pytest.mark.service, pytest.mark.own_backend]


def memories(*names: str) -> list[dict[str, Any]]:
    return [{"memory_id": name, "when_to_use": f"when {name}", "content": f"do {name}"} for name in names]


class Stream:
    """An open `GET /events` stream, read block by block."""

    def __init__(self, lines: Iterator[str]) -> None:
        self.lines = lines
        assert next(self.lines) == "retry: 3000"  # subscribed: nothing published from now on is missed

    def next_event(self) -> tuple[str, dict[str, Any]]:
        kind, data = next_event(self.lines)
        return kind, json.loads(data)


def open_stream(client: httpx.Client, **params: str) -> Any:
    return client.stream("GET", "/events", params=params, timeout=30)


def test_subscribers_see_their_workspace_change(serve: ServeFn) -> None:
    with serve() as client, open_stream(client, workspace="ws") as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = Stream(response.iter_lines())
        with httpx.Client(base_url=str(client.base_url), timeout=30) as writer:
            writer.post(
                "/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": memories("a", "b")}
            )
            kind, event = events.next_event()
            assert kind == "ADD" and event["workspace_id"] == "ws" and event["memory_ids"] == ["a", "b"]
            assert event["flow"] == "vector_store" and event["request_id"]
            writer.post(
                "/vector_store", json={"workspace_id": "other", "action": "insert", "memory_dicts": memories("x")}
            )
            writer.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": memories("a")})
            kind, event = events.next_event()  # not "other"'s: the next one is this workspace's
            assert (kind, event["memory_ids"]) == ("UPDATE", ["a"])
            writer.post("/vector_store", json={"workspace_id": "ws", "action": "delete_ids", "memory_ids": ["b"]})
            assert events.next_event()[0] == "DELETE"
            assert writer.delete("/workspaces/ws/memories/a").status_code == 200  # the management API too
            kind, event = events.next_event()
            assert (kind, event["memory_ids"], event["flow"]) == ("DELETE", ["a"], "manage")
            job = writer.post(
                "/summary_task_memory_simple",
                json={"workspace_id": "ws", "trajectories": [{"task_id": "t", "messages": []}], "async": True},
            ).json()["job_id"]
            kind, event = events.next_event()
            assert kind == "JOB" and event["job"]["job_id"] == job and event["job"]["status"] in ("done", "failed")


def test_a_key_hears_only_its_workspaces(serve: ServeFn, tmp_path: Path) -> None:
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, alice = create_key(keys, workspaces=["alice"], scope="write")
    _, admin = create_key(keys, workspaces=["*"], scope="admin")
    with serve() as client:
        as_alice = {"Authorization": f"Bearer {alice}"}
        assert client.get("/events", params={"workspace": "bob"}, headers=as_alice).status_code == 403
        assert client.get("/events").status_code == 401
        with client.stream("GET", "/events", headers=as_alice, timeout=30) as response:
            events = Stream(response.iter_lines())
            with httpx.Client(base_url=str(client.base_url), headers={"Authorization": f"Bearer {admin}"}) as writer:
                writer.post(
                    "/vector_store", json={"workspace_id": "bob", "action": "insert", "memory_dicts": memories("b")}
                )
                writer.post(
                    "/vector_store", json={"workspace_id": "alice", "action": "insert", "memory_dicts": memories("a")}
                )
            kind, event = events.next_event()
            assert (kind, event["workspace_id"]) == ("ADD", "alice")  # bob's came first, and was not for alice


def rest_of(events: Stream) -> list[str]:
    """Every line left until the stream ends (the test's read timeout fails a stream that never does)."""
    return list(events.lines)


def test_revoking_a_key_ends_its_open_stream(serve: ServeFn, tmp_path: Path) -> None:
    """Revocation reaches open streams too: once the service refuses the key (401), the key's stream delivers no
    later event and ends with `event: revoked`; another key's stream goes on."""
    keys = tmp_path / "data" / "auth" / "keys.json"
    reader_record, reader = create_key(keys, workspaces=["bob"], scope="read")
    _, writer_key = create_key(keys, workspaces=["bob"], scope="write")
    as_reader = {"Authorization": f"Bearer {reader}"}
    as_writer = {"Authorization": f"Bearer {writer_key}"}
    with (
        serve() as client,
        client.stream("GET", "/events", params={"workspace": "bob"}, headers=as_reader, timeout=10) as revoked,
        client.stream("GET", "/events", params={"workspace": "bob"}, headers=as_writer, timeout=10) as kept,
    ):
        events, others = Stream(revoked.iter_lines()), Stream(kept.iter_lines())
        add = {"workspace_id": "bob", "action": "insert", "memory_dicts": memories("before")}
        assert client.post("/vector_store", json=add, headers=as_writer).json()["success"] is True
        assert events.next_event()[1]["memory_ids"] == ["before"]
        assert others.next_event()[1]["memory_ids"] == ["before"]
        revoke_key(keys, reader_record.id)
        listing = {"workspace_id": "bob", "action": "list"}
        until_sync(lambda: client.post("/vector_store", json=listing, headers=as_reader).status_code == 401)
        add = {"workspace_id": "bob", "action": "insert", "memory_dicts": memories("after")}
        assert client.post("/vector_store", json=add, headers=as_writer).json()["success"] is True
        assert others.next_event()[1]["memory_ids"] == ["after"]  # published, and still heard by a valid key
        left = rest_of(events)  # returns only because the stream ended
        assert "event: revoked" in left and not any('"after"' in line for line in left)


def test_a_key_narrowed_in_the_key_file_ends_its_stream(serve: ServeFn, tmp_path: Path) -> None:
    """An edited key file entry that no longer covers the stream's workspace ends the stream the same way."""
    keys = tmp_path / "data" / "auth" / "keys.json"
    _, key = create_key(keys, workspaces=["bob", "carol"], scope="read")
    _, admin = create_key(keys, workspaces=["*"], scope="admin")
    as_key = {"Authorization": f"Bearer {key}"}
    with serve() as client, client.stream("GET", "/events", headers=as_key, timeout=10) as response:
        events = Stream(response.iter_lines())
        stored = json.loads(keys.read_text())
        stored["keys"][0]["workspaces"] = ["carol-only"]
        keys.write_text(json.dumps(stored))
        listing = {"workspace_id": "bob", "action": "list"}
        until_sync(lambda: client.post("/vector_store", json=listing, headers=as_key).status_code == 403)
        add = {"workspace_id": "bob", "action": "insert", "memory_dicts": memories("after")}
        assert client.post("/vector_store", json=add, headers={"Authorization": f"Bearer {admin}"}).status_code == 200
        left = rest_of(events)
        assert "event: revoked" in left and not any('"after"' in line for line in left)


class Receiver:
    """A webhook endpoint: records every delivery, answers 500 to the first `failures`."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        self.app = FastAPI()

        @self.app.post("/hook")
        async def hook(request: Request) -> Response:
            body = await request.body()
            with self.lock:
                self.received.append((dict(request.headers), body))
                failing = len(self.received) <= self.failures
            return Response(status_code=500 if failing else 204)


def deliveries(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "data" / "events" / "deliveries.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


SECRET = "whsec_" + base64.b64encode(b"sixteen key byte").decode()


def test_webhooks_are_signed_and_retried(serve: ServeFn, tmp_path: Path) -> None:
    receiver = Receiver(failures=2)
    with serve_in_thread(receiver.app) as hook_url:
        hooks = json.dumps([{"url": f"{hook_url}/hook", "secret": SECRET, "events": ["ADD"]}])
        with serve(f"events.webhooks={hooks}", "events.backoff_seconds=0.01") as client:
            client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": memories("a")})
            client.post("/vector_store", json={"workspace_id": "ws", "action": "delete_ids", "memory_ids": ["a"]})
            until_sync(lambda: any(d["outcome"] == "delivered" for d in deliveries(tmp_path)), limit=10)
    headers, body = receiver.received[-1]
    assert len(receiver.received) == 3  # two failures, then delivered; the DELETE was not asked for
    event = standardwebhooks.Webhook(SECRET).verify(body, headers)  # Standard Webhooks, as receivers check it
    assert headers["webhook-id"] == event["event_id"]
    with pytest.raises(standardwebhooks.WebhookVerificationError):  # the signature covers id, timestamp and body
        standardwebhooks.Webhook(SECRET).verify(body.replace(b'"a"', b'"b"'), headers)
    with pytest.raises(standardwebhooks.WebhookVerificationError):
        standardwebhooks.Webhook(SECRET).verify(body, {**headers, "webhook-id": "another"})
    # the first release's headers, sent this release too (docs/events.md)
    expected = hmac.new(SECRET.encode(), headers["x-reme-timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["x-reme-signature"] == f"sha256={expected.hexdigest()}"
    assert headers["x-reme-event"] == "ADD" == event["type"] and event["memory_ids"] == ["a"]
    assert headers["x-reme-delivery"] == event["event_id"]
    log = deliveries(tmp_path)
    assert [(d["attempt"], d["outcome"], d.get("status")) for d in log] == [
        (1, "retrying", 500),
        (2, "retrying", 500),
        (3, "delivered", 204),
    ]


def test_a_dead_webhook_is_logged_as_failed_and_the_service_goes_on(serve: ServeFn, tmp_path: Path) -> None:
    hooks = json.dumps([{"url": f"http://127.0.0.1:{free_port()}/gone", "secret": "x"}])
    with serve(f"events.webhooks={hooks}", "events.backoff_seconds=0.01", "events.max_attempts=3") as client:
        for i in range(5):
            r = client.post(
                "/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": memories(f"m{i}")}
            )
            assert r.json()["success"] is True
        until_sync(lambda: sum(d["outcome"] == "failed" for d in deliveries(tmp_path)) == 5, limit=20)
    log = deliveries(tmp_path)
    assert all("ConnectError" in d["error"] for d in log)
    assert sum(d["outcome"] == "retrying" for d in log) == 10  # 3 tries each


def test_streams_have_their_own_cap_and_take_no_request_slot(serve: ServeFn) -> None:
    """An open stream lasts as long as its reader: it must not hold one of `http.limit_concurrency`'s slots (one
    stream would stop every flow here), and `events.max_streams` bounds how many are open."""
    with (
        serve("http.limit_concurrency=1", "events.max_streams=2", "http.retry_after=3") as client,
        open_stream(client) as first,
        open_stream(client, workspace="ws") as second,
    ):
        readers = [Stream(first.iter_lines()), Stream(second.iter_lines())]  # both subscribed (kept: a dropped
        assert len(readers) == 2  # line iterator closes its stream)
        with httpx.Client(base_url=str(client.base_url), timeout=30) as other:
            third = other.get("/events", timeout=10)
            assert third.status_code == 503 and third.headers["retry-after"] == "3"
            assert third.json()["metadata"]["error"]["code"] == "overloaded"
            assert "events.max_streams" in third.json()["metadata"]["error"]["message"]
            done = other.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "anything"})
            assert done.status_code == 200 and done.json()["success"] is True


def test_a_plain_secret_signs_with_its_bytes(serve: ServeFn, tmp_path: Path) -> None:
    receiver = Receiver(failures=0)
    with serve_in_thread(receiver.app) as hook_url:
        hooks = json.dumps([{"url": f"{hook_url}/hook", "secret": "a-long-random-string"}])
        with serve(f"events.webhooks={hooks}") as client:
            client.post("/vector_store", json={"workspace_id": "ws", "action": "insert", "memory_dicts": memories("a")})
            until_sync(lambda: any(d["outcome"] == "delivered" for d in deliveries(tmp_path)), limit=10)
    headers, body = receiver.received[-1]
    assert standardwebhooks.Webhook(b"a-long-random-string").verify(body, headers)["memory_ids"] == ["a"]
