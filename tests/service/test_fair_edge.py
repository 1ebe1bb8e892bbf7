"""Fair under hostile load (#37 items 1-3): nothing is read before it is authorised (route and key from the head,
open paths take no body), bodies share a memory budget, trickled uploads are evicted when the server is full, and
each key holds at most its share of requests, streams and the regex lane, so another key is still served."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from reme_service.auth.caller import Caller, current_caller
from reme_service.auth.keyfile import create_key
from reme_service.auth.shares import FairLane
from reme_service.config.models import PerKeyConfig
from reme_service.errors import RateLimitedError
from reme_service.server.guard import request_kind
from tests.conditions import until, until_sync
from tests.fakes.service_process import service_process
from tests.service.conftest import ServeFn
from tests.service.test_http_edge import assert_envelope, closed_by_server, connect, read_response

pytestmark = pytest.mark.service

QUERY = {"workspace_id": "ws", "query": "q"}


def keyed(tmp_path: Path, *names: str) -> list[dict[str, str]]:
    """Headers of a new write key per name (the service then requires keys)."""
    path = tmp_path / "data" / "auth" / "keys.json"
    return [
        {"Authorization": f"Bearer {create_key(path, workspaces=['ws'], scope='write', name=name)[1]}"}
        for name in names
    ]


def head(path: str, length: int, extra: str = "", method: str = "POST") -> bytes:
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {length}\r\n\r\n".encode()


@contextlib.contextmanager
def uploads(base_url: str, count: int, extra: str = "", sent: bytes = b'{"q') -> Iterator[list[socket.socket]]:
    """`count` requests whose head is complete and whose (100 kB) body has only begun: each is under way."""
    sockets = [connect(base_url) for _ in range(count)]
    try:
        for sock in sockets:
            sock.sendall(head("/retrieve_task_memory", 100_000, extra) + sent)
        yield list(sockets)
    finally:
        for sock in sockets:
            sock.close()


# -- 1. nothing read before it is authorised -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/no_such_flow", 404, "not_found"),
        ("POST", "/no/such/page", 404, "not_found"),
        ("PUT", "/retrieve_task_memory", 405, "method_not_allowed"),
        ("POST", "/health", 405, "method_not_allowed"),
        ("GET", "/health", 413, "payload_too_large"),
        ("GET", "/docs", 413, "payload_too_large"),
    ],
)
def test_a_refusal_from_the_head_is_answered_at_once_and_the_body_never_read(
    serve: ServeFn, method: str, path: str, status: int, code: str
) -> None:
    """30 MB announced, none sent: only an answer from the head can come before body_timeout (60 s) runs out."""
    with serve("http.body_timeout=60") as client, connect(str(client.base_url)) as sock:
        sock.sendall(head(path, 30_000_000, method=method))
        answer, headers, body = read_response(sock)
        assert (answer, headers["connection"]) == (status, "close")
        assert_envelope(body, code)
        until_sync(lambda: closed_by_server(sock), limit=10)


def test_a_request_without_a_valid_key_is_answered_401_without_its_body(serve: ServeFn, tmp_path: Path) -> None:
    (good,) = keyed(tmp_path, "alice")
    with serve("http.body_timeout=60") as client, connect(str(client.base_url)) as sock:
        sock.sendall(head("/retrieve_task_memory", 30_000_000, "Authorization: Bearer rk_nope\r\n"))
        answer, headers, body = read_response(sock)
        assert (answer, headers["connection"]) == (401, "close")
        assert_envelope(body, "unauthorized")
        until_sync(lambda: closed_by_server(sock), limit=10)
        assert client.post("/retrieve_task_memory", json=QUERY, headers=good).status_code == 200


def test_an_answer_sent_before_its_body_was_read_closes_the_connection(tmp_path: Path) -> None:
    """A middleware that answers without reading the body and sends no `connection: close` of its own (Starlette's
    CORS preflight, here given 10 of 1,000 announced bytes): the edge protocol closes the connection, rather than
    read the rest of the body to find where the next request would begin (nor leave it to the keep-alive timer or
    `body_timeout`, both set past the wait here)."""
    origin = "https://app.example"
    with (
        service_process(
            tmp_path,
            "embedding_model.default.backend=hash",
            f'http.cors_origins=["{origin}"]',
            "http.body_timeout=60",
            "http.timeout_keep_alive=60",
        ) as service,
        connect(service.base_url) as sock,
    ):
        extra = f"Origin: {origin}\r\nAccess-Control-Request-Method: POST\r\n"
        sock.sendall(head("/retrieve_task_memory", 1000, extra, method="OPTIONS") + b"x" * 10)
        answer, headers, _ = read_response(sock)
        assert answer == 200 and headers["access-control-allow-origin"] == origin
        assert headers.get("connection") != "close"  # the close is the protocol's, not the answer's
        until_sync(lambda: closed_by_server(sock), limit=10)


def test_bodies_in_flight_share_a_memory_budget(serve: ServeFn) -> None:
    """Two uploads of 1,500 bytes (of 2,000 announced) hold 3,000 of a 4,000-byte budget: a third body of 2,000 is
    503 with Retry-After at once, and served once the others are gone."""
    overrides = ("http.max_body_bytes=2000", "http.body_budget_bytes=4000", "http.body_timeout=60")
    with serve(*overrides, "http.retry_after=3") as client:
        held = [connect(str(client.base_url)) for _ in range(2)]
        try:
            for sock in held:
                sock.sendall(head("/retrieve_task_memory", 2000) + b" " * 1500)
            with connect(str(client.base_url)) as sock:
                until_sync(lambda: _refused_for_budget(sock), limit=10)
        finally:
            for sock in held:
                sock.close()
        body = b'{"workspace_id": "ws", "query": "q"}'.ljust(2000)
        assert client.post("/retrieve_task_memory", content=body).status_code == 200


def _refused_for_budget(sock: socket.socket) -> bool:
    sock.sendall(head("/retrieve_task_memory", 2000))
    answer, headers, body = read_response(sock)
    assert (answer, headers["retry-after"], headers["connection"]) == (503, "3", "close"), body
    assert_envelope(body, "overloaded")
    return True


# -- 2. trickled uploads evicted when the server is full -----------------------------------------------------------


def test_a_full_server_evicts_its_slowest_upload_for_a_new_client(tmp_path: Path) -> None:
    """20 connections, every one a request whose body trickles: a new client gets in (the slowest upload is
    answered 408 and closed) instead of a 503."""
    with (
        service_process(
            tmp_path,
            "embedding_model.default.backend=hash",
            "http.max_connections=20",
            "http.body_timeout=600",
            "auth.per_key.requests=100",
            "http.shutdown_timeout=1",
        ) as service,
        uploads(service.base_url, 20) as sockets,
    ):
        for _ in range(3):
            assert httpx.get(f"{service.base_url}/health", timeout=10).status_code == 200
        evicted = [sock for sock in sockets if _answered(sock)]
        assert evicted, "no upload was evicted"
        status, headers, body = read_response(evicted[0])
        assert (status, headers["connection"]) == (408, "close")
        assert "http.max_connections" in assert_envelope(body, "request_timeout")["metadata"]["error"]["message"]


def _answered(sock: socket.socket) -> bool:
    """Whether the server has written to `sock` (or closed it); never blocks."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


# -- 3. per-key shares ---------------------------------------------------------------------------------------------


def test_a_key_at_its_request_share_gets_429_and_another_key_is_served(serve: ServeFn, tmp_path: Path) -> None:
    alice, bob = keyed(tmp_path, "alice", "bob")
    auth = f"Authorization: {alice['Authorization']}\r\n"
    with serve("auth.per_key.requests=3", "http.body_timeout=60", "http.retry_after=2") as client:
        with uploads(str(client.base_url), 3, auth):
            with connect(str(client.base_url)) as sock:
                until_sync(lambda: _share_refused(sock, auth), limit=10)
            assert client.post("/retrieve_task_memory", json=QUERY, headers=bob).status_code == 200
        until_sync(lambda: client.post("/retrieve_task_memory", json=QUERY, headers=alice).status_code == 200)


def test_keyless_clients_share_one_request_share(serve: ServeFn) -> None:
    with serve("auth.per_key.requests=3", "http.body_timeout=60") as client, uploads(str(client.base_url), 3):
        refused = client.post("/retrieve_task_memory", json=QUERY)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert_envelope(refused.json(), "rate_limited")
        assert client.get("/health").status_code == 200  # probes are no one's share


def _share_refused(sock: socket.socket, auth: str) -> bool:
    sock.sendall(head("/retrieve_task_memory", 100, auth))
    answer, headers, body = read_response(sock)
    assert (answer, headers["retry-after"], headers["connection"]) == (429, "2", "close"), body
    assert "auth.per_key.requests" in assert_envelope(body, "rate_limited")["metadata"]["error"]["message"]
    return True


@pytest.mark.parametrize(("path", "setting"), [("/events", "events"), ("/sse", "streams")])
def test_a_key_at_its_stream_share_gets_429_and_another_key_streams(
    serve: ServeFn, tmp_path: Path, path: str, setting: str
) -> None:
    alice, bob = keyed(tmp_path, "alice", "bob")
    with serve(f"auth.per_key.{setting}=2") as client, contextlib.ExitStack() as streams:
        for _ in range(2):
            response = streams.enter_context(client.stream("GET", path, headers=alice, timeout=30))
            assert response.status_code == 200
        refused = client.get(path, headers=alice)
        assert refused.status_code == 429 and refused.headers["retry-after"]
        assert (
            f"auth.per_key.{setting}" in assert_envelope(refused.json(), "rate_limited")["metadata"]["error"]["message"]
        )
        with client.stream("GET", path, headers=bob, timeout=30) as other:
            assert other.status_code == 200
        # streams do not take the request slots: a request is served while they are open
        assert client.post("/retrieve_task_memory", json=QUERY, headers=alice).status_code == 200


def test_requests_are_classified_into_their_shares() -> None:
    assert request_kind("GET", "/health", b"") is None
    assert request_kind("GET", "/metrics", b"") is None
    assert request_kind("GET", "/events", b"workspace=w") == "events"
    assert request_kind("GET", "/sse", b"") == "streams"
    assert request_kind("GET", "/jobs/job_1", b"wait=30") == "long_polls"
    assert request_kind("GET", "/jobs/job_1", b"wait=0") == "requests"
    assert request_kind("GET", "/jobs/job_1", b"wait=x") == "requests"
    assert request_kind("POST", "/health", b"") == "requests"
    assert request_kind("POST", "/retrieve_task_memory", b"") == "requests"


def test_the_regex_lane_is_shared_fairly_between_keys() -> None:
    """Key A's calls block the lane's threads; A holds one of the two, its next two wait in its own queue, a fourth
    is refused (429), and key B's call runs on the other thread meanwhile."""
    asyncio.run(_lane_fairness())


async def _lane_fairness() -> None:
    lane = FairLane("test-regex", 2, PerKeyConfig(regex=1, regex_waiting=2))
    gate = threading.Event()
    started: list[str] = []

    def blocked(name: str) -> str:
        started.append(name)
        gate.wait(30)
        return name

    def quick(name: str) -> str:
        started.append(name)
        return name

    async def as_key(key: str, fn: Callable[[str], str], name: str) -> str:
        token = current_caller.set(Caller(key_id=key))
        try:
            return await lane.run(fn, name)
        finally:
            current_caller.reset(token)

    try:
        bombs = [asyncio.create_task(as_key("a", blocked, f"a{i}")) for i in range(3)]
        await until(lambda: started == ["a0"])
        with pytest.raises(RateLimitedError) as refused:
            await as_key("a", blocked, "a3")
        assert refused.value.status == 429 and refused.value.retry_after >= 1
        assert await asyncio.wait_for(as_key("b", quick, "b0"), 10) == "b0"
        assert started == ["a0", "b0"]
    finally:
        gate.set()
        assert sorted(await asyncio.gather(*bombs)) == ["a0", "a1", "a2"]
        await lane.close()


def test_a_key_at_its_queued_jobs_share_gets_429_and_another_key_queues(serve: ServeFn, tmp_path: Path) -> None:
    """Jobs wait on an LLM that never answers (a socket that accepts and is silent), one worker: key A's second or
    third job finds its one queued job and is refused; key B's is queued."""
    path = tmp_path / "data" / "auth" / "keys.json"
    alice = {"Authorization": f"Bearer {create_key(path, workspaces=['ws'], scope='write', name='a')[1]}"}
    bob = {"Authorization": f"Bearer {create_key(path, workspaces=['ws_b'], scope='write', name='b')[1]}"}
    trajectory = {"messages": [{"role": "user", "content": "open the settings"}], "score": 1.0}
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        llm = (
            "llm.default.backend=openai_compatible",
            f"llm.default.base_url=http://127.0.0.1:{silent.getsockname()[1]}/v1",
            "llm.default.api_key=none",
        )
        with serve(*llm, "jobs.workers=1", "auth.per_key.jobs=1") as client:
            answers = [
                client.post(
                    "/summary_task_memory",
                    json={"workspace_id": "ws", "trajectories": [trajectory], "async": True},
                    headers=alice,
                )
                for _ in range(3)
            ]
            refused = [answer for answer in answers if answer.status_code == 429]
            assert refused and all(answer.status_code in (202, 429) for answer in answers), [a.text for a in answers]
            assert refused[0].headers["retry-after"] == "1"
            assert (
                "auth.per_key.jobs"
                in assert_envelope(refused[0].json(), "rate_limited")["metadata"]["error"]["message"]
            )
            other = client.post(
                "/summary_task_memory",
                json={"workspace_id": "ws_b", "trajectories": [trajectory], "async": True},
                headers=bob,
            )
            assert other.status_code == 202, other.text
