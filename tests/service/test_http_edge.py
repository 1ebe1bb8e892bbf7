"""The HTTP edge under hostile clients (loopback only): idle and half-sent sockets are closed after
`http.header_timeout` and never starve others, a full server evicts its longest-idle connection, overload is a JSON
503 with Retry-After, bodies are bounded (413 from Content-Length or while a chunked body streams, 408 when it
stalls), every failure is the envelope (400 malformed JSON, 404, 405, 431), a 422 echoes only excerpts, and SIGTERM
lets an in-flight write finish, flushes and exits 0."""

from __future__ import annotations

import json
import select
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from reme_service.testing.serve import serve_in_thread
from tests.conditions import until_sync
from tests.fakes.service_process import service_process
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

HEAD = "POST /retrieve_task_memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


# -- raw sockets ---------------------------------------------------------------------------------------------------


def connect(base_url: str) -> socket.socket:
    url = urlsplit(base_url)
    return socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=10)


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response with a Content-Length (as every edge answer has), read within the socket timeout."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip() for name, value in (line.split(":", 1) for line in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the response body"
        body += chunk
    return int(status_line.split()[1]), headers, body


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server closed its end (the socket reads EOF or was reset); never blocks."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def assert_envelope(body: bytes | dict[str, Any], code: str) -> dict[str, Any]:
    envelope = httpx.Response(200, content=body).json() if isinstance(body, bytes) else body
    assert envelope["answer"] == "" and envelope["success"] is False, envelope
    assert envelope["metadata"]["error"]["code"] == code, envelope
    return envelope


# -- an embedding provider the test can hold -----------------------------------------------------------------------


class GatedEmbeddings:
    """An OpenAI-compatible `/v1/embeddings` that answers only while `gate` is set; `arrived` is set by each call."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.arrived = threading.Event()
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embeddings, methods=["POST"])])

    async def _embeddings(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.arrived.set()
        await anyio.to_thread.run_sync(self.gate.wait, 30)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        size = int(body.get("dimensions") or 1024)
        data = [
            {"object": "embedding", "index": i, "embedding": [1.0 + (hash(t) % 7) * (k == 0) for k in range(size)]}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})

    def overrides(self, base_url: str) -> list[str]:
        return [
            "embedding_model.default.backend=openai_compatible",
            f"embedding_model.default.base_url={base_url}/v1",
            "embedding_model.default.api_key=test-key",
        ]


@pytest.fixture
def gated() -> Iterator[tuple[GatedEmbeddings, list[str]]]:
    fake = GatedEmbeddings()
    with serve_in_thread(fake.app) as base_url:
        yield fake, fake.overrides(base_url)
    fake.gate.set()


MEMORY = {"memory_id": "m1", "when_to_use": "update the profile settings", "content": "open settings"}


def insert_body(memory_id: str = "m1") -> dict[str, Any]:
    return {"workspace_id": "ws", "action": "insert", "memory_dicts": [{**MEMORY, "memory_id": memory_id}]}


# -- 1. connection hygiene -----------------------------------------------------------------------------------------


def test_idle_and_half_sent_sockets_neither_starve_others_nor_stay_open(tmp_path: Path) -> None:
    with service_process(
        tmp_path, "embedding_model.default.backend=hash", "http.header_timeout=5", "http.max_connections=1000"
    ) as service:
        sockets = [connect(service.base_url) for _ in range(300)]
        try:
            for sock in sockets[::2]:  # half of them send half a request head, the others nothing at all
                sock.sendall(HEAD.encode()[:40])
            health = httpx.get(f"{service.base_url}/health", timeout=5)
            assert health.status_code == 200 and health.json()["status"] == "healthy"
            assert not all(closed_by_server(sock) for sock in sockets), "answered only after the sockets were closed"
            until_sync(lambda: all(closed_by_server(sock) for sock in sockets), limit=30)
        finally:
            for sock in sockets:
                sock.close()


def test_a_full_server_evicts_its_longest_idle_connection(tmp_path: Path) -> None:
    with service_process(
        tmp_path, "embedding_model.default.backend=hash", "http.header_timeout=600", "http.max_connections=20"
    ) as service:
        oldest = connect(service.base_url)
        until_sync(lambda: not closed_by_server(oldest), limit=5)
        others = [connect(service.base_url) for _ in range(19)]
        try:
            assert httpx.get(f"{service.base_url}/health", timeout=5).status_code == 200
            until_sync(lambda: closed_by_server(oldest), limit=10)
        finally:
            for sock in [oldest, *others]:
                sock.close()


def test_an_oversized_request_head_gets_431_in_the_envelope(tmp_path: Path) -> None:
    with service_process(tmp_path, "embedding_model.default.backend=hash", "http.max_header_bytes=4096") as service:
        with connect(service.base_url) as sock:
            sock.sendall(HEAD.encode() + b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 100) for i in range(60)))
            status, headers, body = read_response(sock)
        assert status == 431 and headers["connection"] == "close"
        assert_envelope(body, "header_too_large")


def test_a_whole_oversized_head_gets_431_and_one_within_the_limit_is_served(tmp_path: Path) -> None:
    """A head over the limit sent complete, with its body, in one write (the parser would finish it in one step)
    still gets 431; a head within the limit with a body that takes the request past it is served. (How the head is
    counted when it arrives split across reads: tests/unit/test_head_limit.py.)"""
    body = json.dumps({"workspace_id": "ws", "query": "settings " * 200}).encode()  # ~1.8 KB

    def request(filler_lines: int) -> bytes:
        filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 100) for i in range(filler_lines))
        return HEAD.encode() + filler + b"Content-Length: %d\r\n\r\n" % len(body) + body

    oversized, within = request(60), request(34)  # ~6.5 KB and ~3.9 KB of head, against 4,096 bytes
    assert len(within) - len(body) < 4096 < len(oversized) - len(body) and len(within) > 4096
    with service_process(tmp_path, "embedding_model.default.backend=hash", "http.max_header_bytes=4096") as service:
        with connect(service.base_url) as sock:
            sock.sendall(oversized)
            status, headers, answer = read_response(sock)
        assert status == 431 and headers["connection"] == "close"
        assert_envelope(answer, "header_too_large")
        with connect(service.base_url) as sock:
            sock.sendall(within)
            status, _, answer = read_response(sock)
        assert status == 200 and json.loads(answer)["success"] is True


def read_until_closed(sock: socket.socket) -> list[tuple[int, bytes]]:
    """Every response the server writes before it closes the connection: (status, body), in order."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    responses = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
        responses.append((int(lines[0].split()[1]), rest[:length]))
        data = rest[length:]
    return responses


def test_a_malformed_request_is_400_in_the_envelope_after_the_answers_owed(tmp_path: Path) -> None:
    """The parser's 400 is the JSON envelope; sent after a request it follows in the same write, it comes after
    that request's answer, which is not lost (the request ran: its memory is stored)."""
    insert = json.dumps(insert_body("m-before-garbage")).encode()
    request = b"POST /vector_store HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n%s" % (len(insert), insert)
    with service_process(tmp_path, "embedding_model.default.backend=hash") as service:
        with connect(service.base_url) as sock:
            sock.sendall(b"GARBAGE\r\n\r\n")
            ((status, body),) = read_until_closed(sock)
        assert (
            status == 400
            and "malformed HTTP request" in assert_envelope(body, "invalid_request")["metadata"]["error"]["message"]
        )
        with connect(service.base_url) as sock:
            sock.sendall(request + b"GARBAGE\r\n\r\n")
            (first, answered), (second, refused) = read_until_closed(sock)
        assert first == 200 and json.loads(answered)["success"] is True
        assert second == 400 and assert_envelope(refused, "invalid_request")


def test_pipelined_heads_and_trailers_are_held_to_the_head_limit(tmp_path: Path) -> None:
    """A pipelined head over the limit, complete in the same write as the request before it, gets 431 after that
    request's answer; trailers past the limit get 431; small chunks and small trailers are served."""
    big = b"X-Big: " + b"y" * 6000 + b"\r\n"
    health = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    query = json.dumps({"workspace_id": "ws", "query": "profile"}).encode()
    chunked = b"POST /retrieve_task_memory HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = b"".join(b"%x\r\n%s\r\n" % (1, query[i : i + 1]) for i in range(len(query)))  # a byte a chunk
    with service_process(tmp_path, "embedding_model.default.backend=hash", "http.max_header_bytes=4096") as service:
        with connect(service.base_url) as sock:
            sock.sendall(health + b"\r\n" + health + big + b"\r\n")
            (first, _), (second, refused) = read_until_closed(sock)
        assert first == 200 and second == 431 and assert_envelope(refused, "header_too_large")
        with connect(service.base_url) as sock:
            sock.sendall(chunked + chunks + b"0\r\n" + b"X-Trailer: t\r\n" * 3 + b"\r\n")
            status, _, body = read_response(sock)
        assert status == 200 and json.loads(body)["success"] is True
        with connect(service.base_url) as sock:
            sock.sendall(chunked + b"%x\r\n%s\r\n0\r\n" % (len(query), query) + big + b"\r\n")
            status, headers, body = read_response(sock)
        assert status == 431 and headers["connection"] == "close" and assert_envelope(body, "header_too_large")
        with connect(service.base_url) as sock:  # one trailer line that never ends, read by read
            sock.sendall(chunked + b"%x\r\n%s\r\n0\r\nX-Endless: " % (len(query), query))
            try:
                for _ in range(4096):  # 256 MB at most
                    sock.sendall(b"a" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server closed the connection after its answer
            status, headers, body = read_response(sock)
        assert status == 431 and headers["connection"] == "close" and assert_envelope(body, "header_too_large")
        assert httpx.get(f"{service.base_url}/health", timeout=5).status_code == 200


def test_a_head_sent_behind_an_open_event_stream_is_not_read_without_bound(tmp_path: Path) -> None:
    """Behind a request under way (an event stream never ends), a second head that never ends stops being read
    once over the limit: the client's writes back up instead of the server's memory growing."""
    overrides = ("embedding_model.default.backend=hash", "http.max_header_bytes=4096")
    with service_process(tmp_path, *overrides) as service:
        with connect(service.base_url) as sock:
            sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:100]
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            sock.setblocking(False)
            piece, sent, limit = b"a" * 65536, 0, 256 * 1024 * 1024
            while sent < limit:
                try:
                    sent += sock.send(piece)
                except BlockingIOError:
                    _, writable, _ = select.select([], [sock], [], 3)
                    if not writable:
                        break  # nothing was read for 3 s: the server stopped reading this connection
            assert sent < limit, f"the server read {sent} bytes of one request head"
            assert not closed_by_server(sock), "the stream under way was cut: its refusal should wait for it"
        assert httpx.get(f"{service.base_url}/health", timeout=5).status_code == 200


def test_a_graceful_stop_closes_the_event_streams_instead_of_waiting_for_them(tmp_path: Path) -> None:
    """SIGTERM with an event stream open: the stream is closed at once (as if its reader had gone) and the process
    exits, instead of the stop waiting `http.shutdown_timeout` (set far past the wait here) for a reader that stays."""
    overrides = ("embedding_model.default.backend=hash", "http.shutdown_timeout=600")
    with service_process(tmp_path, *overrides) as service, connect(service.base_url) as sock:
        sock.sendall(b"GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = b""
        while b"retry:" not in head:  # subscribed: the stream is under way
            head += sock.recv(4096)
        assert head.startswith(b"HTTP/1.1 200"), head[:100]
        service.process.send_signal(signal.SIGTERM)
        until_sync(lambda: service.process.poll() is not None, limit=60)
        assert service.process.returncode == 0, service.log()[-2000:]
        assert closed_by_server(sock)


def test_overload_answers_a_json_503_with_retry_after(serve: ServeFn, gated: tuple[GatedEmbeddings, list[str]]) -> None:
    fake, overrides = gated
    with serve(*overrides, "http.limit_concurrency=1", "http.retry_after=2") as client:
        fake.gate.clear()
        held: list[httpx.Response] = []
        writer = threading.Thread(target=lambda: held.append(client.post("/vector_store", json=insert_body())))
        writer.start()
        try:
            assert fake.arrived.wait(10), "the write never reached the embedding provider"
            busy = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "profile"})
            assert busy.status_code == 503 and busy.headers["retry-after"] == "2"
            assert busy.headers["content-type"] == "application/json"
            assert_envelope(busy.json(), "overloaded")
            # probes and scrapes are not requests of the service's work: answered while it is full
            for probe in ("/health/live", "/health/ready", "/health", "/metrics"):
                assert client.get(probe).status_code == 200, probe
        finally:
            fake.gate.set()
            writer.join(30)
        assert held[0].status_code == 200, held[0].text
        assert client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "profile"}).status_code == 200


# -- 4. body limits ------------------------------------------------------------------------------------------------


def test_a_declared_body_over_the_limit_gets_413_before_it_is_sent(serve: ServeFn) -> None:
    with serve("http.max_body_bytes=1000") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f"{HEAD}Content-Length: 100000000\r\n\r\n".encode())
            status, headers, body = read_response(sock)
        assert status == 413 and headers["connection"] == "close"
        assert_envelope(body, "payload_too_large")
        fits = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "q" * 900})
        assert fits.status_code == 200, fits.text


def test_a_chunked_body_is_cut_off_with_413_as_it_streams_past_the_limit(serve: ServeFn) -> None:
    with serve("http.max_body_bytes=1000") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f"{HEAD}Transfer-Encoding: chunked\r\n\r\n".encode())
            # 1,024 bytes and no final chunk: only counting while it streams can answer. Sent at once and no more:
            # the server answers and closes as soon as it has counted past the limit, so a later write would race
            # that close (broken pipe, or a reset that discards the answer).
            sock.sendall((b"200\r\n" + b" " * 512 + b"\r\n") * 2)
            status, _, body = read_response(sock)
        assert status == 413
        assert_envelope(body, "payload_too_large")


def test_a_stalled_body_gets_408(serve: ServeFn) -> None:
    with serve("http.body_timeout=1") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f'{HEAD}Content-Length: 100\r\n\r\n{{"query":'.encode())
            status, headers, body = read_response(sock)
        assert status == 408 and headers["connection"] == "close"
        assert_envelope(body, "request_timeout")
        assert client.get("/health").status_code == 200


def test_a_trickled_body_gets_408_once_it_falls_below_the_minimum_rate(serve: ServeFn) -> None:
    """A byte every 0.1 s never stalls for body_timeout (1 s), so only the rate floor (100 bytes/s past the first
    second) can end it; without the floor the connection is held as long as the client keeps trickling."""
    with serve("http.body_timeout=1", "http.body_min_rate=100") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f"{HEAD}Content-Length: 100000\r\n\r\n".encode())
            for _ in range(200):  # 20 s of trickling at most; the floor ends it after ~1.1 s
                answered, _, _ = select.select([sock], [], [], 0.1)
                if answered:
                    break
                sock.send(b" ")
            status, headers, body = read_response(sock)
        assert status == 408 and headers["connection"] == "close"
        envelope = assert_envelope(body, "request_timeout")
        assert "http.body_min_rate" in envelope["metadata"]["error"]["message"]
        assert client.get("/health").status_code == 200


def test_the_default_minimum_rate_evicts_a_trickle_of_1200_bytes_a_second(serve: ServeFn) -> None:
    """Issue 37's attacker announced 30 MB and sent 120 bytes every 100 ms; the default floor (8 KiB/s past the
    first body_timeout) ends it soon after body_timeout. The old default, 1 KiB/s, let it trickle on forever."""
    with serve("http.body_timeout=1") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f"{HEAD}Content-Length: 30000000\r\n\r\n".encode())
            answered: list[socket.socket] = []
            for _ in range(100):  # 10 s of trickling at most; the floor ends it after ~1.2 s
                answered, _, _ = select.select([sock], [], [], 0.1)
                if answered:
                    break
                sock.send(b" " * 120)
            assert answered, "the trickle was still being read after 10 s"
            status, headers, body = read_response(sock)
        assert status == 408 and headers["connection"] == "close"
        envelope = assert_envelope(body, "request_timeout")
        assert "http.body_min_rate" in envelope["metadata"]["error"]["message"]


def test_a_slow_body_above_the_minimum_rate_is_served_past_body_timeout(serve: ServeFn) -> None:
    """The floor is an average, after a grace of body_timeout: a body sent at ~300 bytes/s for ~1.5 s (longer than
    body_timeout, 1 s) is read and answered."""
    payload = json.dumps({"workspace_id": "ws", "query": "q" * 400}).encode()
    with serve("http.body_timeout=1", "http.body_min_rate=100") as client:
        with connect(str(client.base_url)) as sock:
            sock.sendall(f"{HEAD}Content-Length: {len(payload)}\r\n\r\n".encode())
            for start in range(0, len(payload), 30):
                answered, _, _ = select.select([sock], [], [], 0.1)
                assert not answered, "the server answered before the body was complete"
                sock.send(payload[start : start + 30])
            status, _, body = read_response(sock)
        assert status == 200, body
        assert json.loads(body)["success"] is True


def test_a_422_echoes_only_an_excerpt_of_the_input(serve: ServeFn) -> None:
    with serve() as client:
        response = client.post(
            "/retrieve_task_memory", json={"workspace_id": "ws", "query": "q", "top_k": "x" * 100_000}
        )
        assert response.status_code == 422
        (item,) = response.json()["detail"]
        assert item["loc"] == ["body", "top_k"] and item["type"] == "int_type"
        assert item["input"].startswith("xxx") and len(item["input"]) <= 201
        small = client.post("/retrieve_task_memory", json={"workspace_id": "ws", "query": "q", "top_k": "many"})
        assert small.json()["detail"][0]["input"] == "many"
        assert len(response.content) < 1000


# -- 6. every failure in the envelope ------------------------------------------------------------------------------


def test_malformed_json_wrong_methods_and_unknown_paths_answer_the_envelope(serve: ServeFn) -> None:
    with serve() as client:
        bad = client.post("/retrieve_task_memory", content=b'{"query": ', headers={"content-type": "application/json"})
        assert bad.status_code == 400
        assert "malformed JSON" in assert_envelope(bad.json(), "invalid_request")["metadata"]["error"]["message"]
        wrong = client.get("/retrieve_task_memory")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
        assert_envelope(wrong.json(), "method_not_allowed")
        post_health = client.post("/health")
        assert post_health.status_code == 405 and post_health.headers["allow"] == "GET"
        assert_envelope(post_health.json(), "method_not_allowed")
        unknown = client.post("/no_such_flow", json={})
        assert unknown.status_code == 404
        assert (
            "unknown flow 'no_such_flow'"
            in assert_envelope(unknown.json(), "not_found")["metadata"]["error"]["message"]
        )
        assert_envelope(client.get("/no/such/page").json(), "not_found")


def test_a_body_is_read_as_json_whatever_its_content_type(serve: ServeFn) -> None:
    """`curl -d '{...}'` sends application/x-www-form-urlencoded; the JSON it carries is what the client meant."""
    body = b'{"workspace_id": "ws", "query": "how to deploy", "top_k": 2}'
    with serve() as client:
        for content_type in ("application/x-www-form-urlencoded", "text/plain", None):
            headers = {"content-type": content_type} if content_type else {}
            response = client.post("/retrieve_task_memory", content=body, headers=headers)
            assert response.status_code == 200 and response.json()["success"] is True, (content_type, response.text)
        empty = client.post("/retrieve_task_memory", content=b"", headers={"content-type": "application/json"})
        assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body"]
        latin = client.post("/retrieve_task_memory", content=b'{"query": "\xe9t\xe9"}')
        assert latin.status_code == 400 and "UTF-8" in latin.json()["metadata"]["error"]["message"]


def test_openapi_documents_the_error_responses_of_every_flow(serve: ServeFn) -> None:
    with serve() as client:
        paths = client.get("/openapi.json").json()["paths"]
        flows = [path for path, item in paths.items() if "post" in item and not path.startswith("/workspaces/")]
        assert "/retrieve_task_memory" in flows
        for path in flows:
            responses = paths[path]["post"]["responses"]
            for status in ("400", "401", "403", "408", "413", "422", "429", "500", "502", "503"):
                assert status in responses, (path, status)
            assert responses["413"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/FlowResponse"
            }
            assert "Retry-After" in responses["503"]["description"]


# -- 8. graceful shutdown ------------------------------------------------------------------------------------------


def test_sigterm_lets_the_in_flight_write_finish_flushes_and_exits_0(
    tmp_path: Path, gated: tuple[GatedEmbeddings, list[str]]
) -> None:
    fake, overrides = gated
    config = [*overrides, f"data_dir={tmp_path / 'data'}", "http.shutdown_timeout=30"]
    with service_process(tmp_path, *config) as service:
        fake.gate.clear()
        held: list[httpx.Response | BaseException] = []

        def write() -> None:
            try:
                held.append(httpx.post(f"{service.base_url}/vector_store", json=insert_body(), timeout=60))
            except BaseException as exc:  # reported below
                held.append(exc)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            assert fake.arrived.wait(10), "the write never reached the embedding provider"
            service.process.send_signal(signal.SIGTERM)

            def refuses_connections() -> bool:
                try:
                    connect(service.base_url).close()
                except ConnectionRefusedError:
                    return True
                return False

            until_sync(refuses_connections, limit=10)  # stopped accepting while the write is still held
            assert service.process.poll() is None, "exited before the in-flight write finished"
        finally:
            fake.gate.set()
            writer.join(60)
        response = held[0]
        assert isinstance(response, httpx.Response), response
        assert response.status_code == 200 and response.json()["success"] is True, response.text
        assert service.process.wait(timeout=30) == 0, service.log()[-2000:]
    with service_process(tmp_path, *config) as restarted:
        listed = httpx.post(f"{restarted.base_url}/vector_store", json={"workspace_id": "ws", "action": "list"})
        assert [m["memory_id"] for m in listed.json()["metadata"]["action_result"]] == ["m1"]
