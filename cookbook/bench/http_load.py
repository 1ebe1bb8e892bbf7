"""A lean HTTP/1.1 load generator for run_all.py: keep-alive connections over asyncio streams, nothing else.

Why not httpx (which retrieval_speed.py uses): on the 2-core benchmark machine its AsyncClient costs about 2 ms of
client CPU per request once 16 requests are in flight, so it saturates long before the server does. Measured
against the bare echo floor (echo_floor.py), 3 s per figure, load average ~4:

    clients   httpx.AsyncClient                 this client
    1         698 req/s (client 0.60 cores)     2,833 req/s (client 0.31 cores)
    16        284 req/s (server 0.12 cores)     3,773 req/s (server 0.43 cores)
    64         93 req/s, p50 494 ms             4,041 req/s

So a throughput figure taken with httpx measures httpx. This client writes each request as one pre-built byte
string, reads the status line and headers up to the blank line, then exactly `content-length` bytes (or the
chunks of a chunked body), and checks every answer with retrieval_speed.check_response's rules. One connection
per simulated client; `clients = 1` is a sequential run over one connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson

Check = Callable[[int, bytes], "str | None"]


@dataclass
class LoadResult:
    clients: int
    samples: list[float] = field(default_factory=list)  # seconds per request, sorted
    elapsed: float = 0.0
    server_cpu: float = float("nan")  # cores busy in the server process during the run
    client_cpu: float = float("nan")  # cores busy in this process
    failures: list[str] = field(default_factory=list)

    @property
    def req_per_s(self) -> float:
        return len(self.samples) / self.elapsed if self.elapsed else 0.0


def request_bytes(path: str, payload: object, host: str) -> bytes:
    body = orjson.dumps(payload)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """(status, body) of one HTTP/1.1 response."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readuntil(b"\r\n")  # the blank line after the last chunk (no trailers expected)
        return status, b"".join(parts)
    return status, await reader.readexactly(length or 0)


class Connection:
    """One keep-alive connection; `call` sends a pre-built request and returns (seconds, status, body)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def call(self, request: bytes) -> tuple[float, int, bytes]:
        start = time.perf_counter()
        self.writer.write(request)
        status, body = await read_response(self.reader)
        return time.perf_counter() - start, status, body

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


async def run_load(
    host: str,
    port: int,
    requests: Sequence[bytes],
    *,
    clients: int,
    check: Check,
    warmup: int,
    count: int | None = None,
    duration: float | None = None,
    cpu_seconds: Callable[[], float] | None = None,
) -> LoadResult:
    """`clients` connections, each sending requests round-robin from `requests` after `warmup` each; stops after
    `count` timed requests in all (sequential runs) or after `duration` seconds."""
    result = LoadResult(clients)
    connections = [await Connection.open(host, port) for _ in range(clients)]
    try:
        for i, connection in enumerate(connections):
            for j in range(warmup):
                _, status, body = await connection.call(requests[(i + j * clients) % len(requests)])
                _record(result, check(status, body))
        deadline = time.perf_counter() + duration if duration is not None else float("inf")
        budget = [count if count is not None else -1]

        async def worker(connection: Connection, index: int) -> None:
            while time.perf_counter() < deadline and budget[0] != 0:
                budget[0] -= 1
                seconds, status, body = await connection.call(requests[index % len(requests)])
                result.samples.append(seconds)
                _record(result, check(status, body))
                index += clients

        server_cpu = cpu_seconds() if cpu_seconds else 0.0
        client_cpu = time.process_time()
        start = time.perf_counter()
        await asyncio.gather(*(worker(c, i) for i, c in enumerate(connections)))
        result.elapsed = time.perf_counter() - start
        if cpu_seconds:
            result.server_cpu = (cpu_seconds() - server_cpu) / result.elapsed
        result.client_cpu = (time.process_time() - client_cpu) / result.elapsed
    finally:
        for connection in connections:
            await connection.close()
    result.samples.sort()
    return result


def _record(result: LoadResult, problem: str | None) -> None:
    if problem and len(result.failures) < 20:
        result.failures.append(problem)
