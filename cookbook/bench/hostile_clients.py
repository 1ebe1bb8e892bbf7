"""The attacks of issue #37 for `abuse.py`: each runs beside probes of `/health` and of another key's
`retrieve_task_memory`, so its figures say what the attack costs everyone else.

- keyless, on an open (loopback, no keys) server: `trickled_bodies` (sockets announcing 30 MB bodies and sending
  120 bytes every 100 ms) and `huge_bodies` (30 MiB bodies sent whole, to `POST /health` and to a flow; the
  server's RSS growth is the figure; the bodies come from a lowest-priority process of their own, so the attacker's
  copying does not take the cores a remote attacker's would not), the huge bodies probed by another keyless
  client's retrieve (the trickles take the keyless clients' own share, which is the design: keyless is one client);
  then both again on the server with keys, where key B's retrieve is the probe;
- by key A, on a server with keys (key B probes): `held_streams` (MCP `GET /sse` streams, `GET /events` streams or
  `GET /jobs/{id}?wait=60` long polls held open) and `regex_bombs` (`grep_working_memory` with `(a|a)+$`).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import retrieval_speed as rs
from abuse import Figure, health, probe

BOMB = {"workspace_id": "ws_a", "file_path": "bomb.txt", "pattern": "(a|a)+$"}


def retrieve(headers: dict[str, str]) -> Callable[[httpx.Client], httpx.Response]:
    position = iter(range(10**9))

    def send(client: httpx.Client) -> httpx.Response:
        body = {"workspace_id": "ws_b", "query": f"profile settings {next(position)}", "top_k": 3}
        return client.post("/retrieve_task_memory", json=body, headers=headers)

    return send


def during(
    server: rs.Server, name: str, seconds: float, other: dict[str, str] | None
) -> tuple[Figure, Figure | None, Callable[[], None]]:
    """Figures for `/health` and (with `other` key headers) another key's retrieve, and the function that probes
    both, in turn, for `seconds`."""
    health_figure = Figure(f"/health, {name}")
    who = "key B retrieve" if other else "other client's retrieve"
    other_figure = Figure(f"{who}, {name}") if other is not None else None

    def run() -> None:
        deadline = time.monotonic() + seconds
        with httpx.Client(base_url=server.base_url, timeout=10.0) as client:
            threads = [
                threading.Thread(
                    target=probe,
                    args=(client, health_figure, health),
                    kwargs={"until": lambda: time.monotonic() > deadline},
                )
            ]
            if other_figure is not None and other is not None:
                threads.append(
                    threading.Thread(
                        target=probe,
                        args=(client, other_figure, retrieve(other)),
                        kwargs={"until": lambda: time.monotonic() > deadline},
                    )
                )
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

    return health_figure, other_figure, run


def _answered(sock: socket.socket) -> bool:
    """Whether the server wrote to `sock` or closed it (never blocks; no `select`: 1,100 sockets pass FD 1024)."""
    try:
        sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def trickled_bodies(
    server: rs.Server, count: int, seconds: float, headers: str = "", other: dict[str, str] | None = None
) -> list[Figure]:
    """`count` connections announcing 30,000,000-byte bodies to `retrieve_task_memory`, each sending 120 bytes
    every 100 ms (reconnecting when answered), while `/health` (and, given `other`, a retrieve with those headers)
    is probed."""
    head = (
        f"POST /retrieve_task_memory HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Content-Length: 30000000\r\n\r\n"
    ).encode()
    stop = threading.Event()
    sockets: list[socket.socket | None] = [None] * count
    answered = [0]

    def trickle() -> None:
        while not stop.is_set():
            for index in range(count):
                sock = sockets[index]
                try:
                    if sock is None or _answered(sock):
                        if sock is not None:
                            answered[0] += 1
                            sock.close()
                        sock = sockets[index] = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                        sock.sendall(head)
                    sock.send(b" " * 120)
                except OSError:
                    sockets[index] = None
            stop.wait(0.1)

    feeder = threading.Thread(target=trickle, daemon=True)
    feeder.start()
    health_figure, other_figure, run = during(server, f"{count} trickled bodies", seconds, other)
    try:
        run()
    finally:
        stop.set()
        feeder.join(30)
        for sock in sockets:
            if sock is not None:
                sock.close()
    figures = [health_figure] if other_figure is None else [health_figure, other_figure]
    for figure in figures:
        figure.note = f"{answered[0]} trickling requests answered (401/408/429/503) and reopened"
    return figures


def _send_huge(base_url: str, path: str, count: int, stop: Any, answers: Any) -> None:
    """The attacker process of `huge_bodies`: `count` threads each sending 30 MiB bodies to `path` until `stop`;
    puts the answers' counts on `answers` at the end. It runs at the lowest CPU priority: on this one machine the
    attacker's own work (copying 30 MiB bodies through loopback) would otherwise take the cores the server and the
    probes need, which a remote attacker's work does not."""
    os.nice(19)
    body = b"x" * (30 * 2**20)
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def send() -> None:
        while not stop.is_set():
            try:
                with httpx.Client(base_url=base_url, timeout=60.0) as client:
                    status = str(client.post(path, content=body).status_code)
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            with lock:
                statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=send, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    answers.put(statuses)


def huge_bodies(
    server: rs.Server, count: int, path: str, seconds: float, other: dict[str, str] | None = None
) -> list[Figure]:
    """`count` clients at once each sending a 30 MiB body to `path` (no key; from a low-priority process of
    their own, `_send_huge`); the note says the server's RSS growth. Given `other`, a retrieve with those headers
    is probed beside `/health`."""
    before = server.rss_bytes()
    peak = [before]
    context = multiprocessing.get_context("spawn")
    stop, answers = context.Event(), context.Queue()
    attacker = context.Process(target=_send_huge, args=(server.base_url, path, count, stop, answers), daemon=True)
    watching = threading.Event()

    def watch() -> None:
        while not watching.is_set():
            peak[0] = max(peak[0], server.rss_bytes())
            watching.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    attacker.start()
    watcher.start()
    health_figure, other_figure, run = during(server, f"{count} x 30 MiB bodies to {path}", seconds, other)
    try:
        run()
    finally:
        stop.set()
        statuses: dict[str, int] = answers.get(timeout=180)
        attacker.join(30)
        watching.set()
        watcher.join(5)
    growth = (peak[0] - before) / 2**20
    figures = [health_figure] if other_figure is None else [health_figure, other_figure]
    for figure in figures:
        figure.note = f"RSS grew {growth:.0f} MiB at peak; answers {dict(sorted(statuses.items()))}"
    return figures


def held_streams(
    server: rs.Server, kind: str, count: int, seconds: float, attacker: dict[str, str], other: dict[str, str]
) -> list[Figure]:
    """Key A opens `count` streams of `kind` (`sse`, `events`, `long_poll`) and holds them; key B is probed."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    with httpx.Client(base_url=server.base_url, headers=attacker, timeout=90.0, limits=limits) as client:
        job_id = ""
        if kind == "long_poll":  # a job that waits on an LLM that never answers (`silent_llm`): no CPU spent
            trajectory = {"messages": [{"role": "user", "content": "open the settings"}], "score": 1.0}
            body = {"workspace_id": "ws_a", "trajectories": [trajectory], "async": True}
            accepted = client.post("/summary_task_memory", json=body)
            job_id = accepted.json()["metadata"]["job_id"]
        path = {"sse": "/sse", "events": "/events", "long_poll": f"/jobs/{job_id}?wait=60"}[kind]
        statuses: dict[int, int] = {}
        release = threading.Event()

        def hold() -> None:  # one stream, held open (a long poll's answer comes only at its end: in a thread each)
            try:
                with client.stream("GET", path) as response:
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    if response.status_code == 200:
                        release.wait(seconds + 60)
            except httpx.HTTPError:
                statuses[0] = statuses.get(0, 0) + 1

        holders = [threading.Thread(target=hold, daemon=True) for _ in range(count)]
        for holder in holders:
            holder.start()
        time.sleep(1.0)  # let them open
        health_figure, other_figure, run = during(server, f"key A holds {count} {kind}", seconds, other)
        run()
        release.set()
        for holder in holders:
            holder.join(seconds + 60)
    note = f"key A's {count} opens answered {dict(sorted(statuses.items()))}"
    health_figure.note = note
    assert other_figure is not None
    other_figure.note = note
    return [health_figure, other_figure]


def regex_bombs(
    server: rs.Server, count: int, seconds: float, attacker: dict[str, str], other: dict[str, str]
) -> list[Figure]:
    """Key A sends `count` regex bombs at once; key B's retrieve and a key B grep are probed."""
    root = server.workdir / "data" / "working_memory" / "workspaces"  # a key's own folder (`file_roots.py`)
    for workspace, name, text in (("ws_a", "bomb.txt", "a" * 27 + "!\n"), ("ws_b", "small.txt", "profile settings\n")):
        (root / workspace).mkdir(parents=True, exist_ok=True)
        (root / workspace / name).write_text(text, encoding="utf-8")
    statuses: dict[Any, int] = {}

    def bomb() -> None:
        try:
            with httpx.Client(base_url=server.base_url, headers=attacker, timeout=seconds + 120) as client:
                status: Any = client.post("/grep_working_memory", json=BOMB).status_code
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        statuses[status] = statuses.get(status, 0) + 1

    threads = [threading.Thread(target=bomb, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    health_figure, other_figure, run = during(server, f"key A sends {count} regex bombs", seconds, other)
    grep = Figure(f"key B grep, {count} regex bombs of key A")
    with httpx.Client(base_url=server.base_url, headers=other, timeout=120.0) as client:
        started = time.perf_counter()
        answer = client.post(
            "/grep_working_memory", json={"workspace_id": "ws_b", "file_path": "small.txt", "pattern": "settings"}
        )
        if answer.status_code == 200:
            grep.samples.append(time.perf_counter() - started)
        else:
            grep.failures += 1
    run()
    for thread in threads:
        thread.join(seconds + 120)
    health_figure.note = f"key A's bombs answered {statuses}"
    assert other_figure is not None
    return [health_figure, other_figure, grep]


def _insert(server: rs.Server, memory: dict[str, str], headers: dict[str, str]) -> None:
    """One task memory in workspace `ws_b`, for the probing retrieves to find."""
    httpx.post(
        f"{server.base_url}/vector_store",
        json={"workspace_id": "ws_b", "action": "insert", "memory_dicts": [memory]},
        headers=headers,
        timeout=60,
    ).raise_for_status()


def run_all(args: Any, overrides: list[str]) -> list[Figure]:
    """Every attack: the keyless ones on an open server, the keyed ones on a server with keys A and B."""
    import tempfile  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from reme_service.auth.keyfile import create_key  # noqa: PLC0415

    seconds = args.hostile_seconds
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="reme-hostile-") as tmp:
        for sub in ("open", "keyed"):
            (Path(tmp) / sub).mkdir()
        memory = {"when_to_use": "update the profile settings", "content": "open settings"}
        with rs.running_server(args.python, Path(tmp) / "open", overrides, timeout=120) as server:
            _insert(server, memory, {})
            print(f"{args.trickle} keyless trickled bodies ...", flush=True)
            figures += trickled_bodies(server, args.trickle, seconds)
            for path in ("/health", "/retrieve_task_memory"):
                print(f"{args.huge} keyless 30 MiB bodies to {path} ...", flush=True)
                figures += huge_bodies(server, args.huge, path, seconds, other={})
        keys = Path(tmp) / "keys.json"
        attacker = {"Authorization": f"Bearer {create_key(keys, workspaces=['ws_a'], scope='admin', name='a')[1]}"}
        other = {"Authorization": f"Bearer {create_key(keys, workspaces=['ws_b'], scope='write', name='b')[1]}"}
        silent = socket.socket()  # an "LLM" that accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        llm = [
            "llm.default.backend=openai_compatible",
            f"llm.default.base_url=http://127.0.0.1:{silent.getsockname()[1]}/v1",
            "llm.default.api_key=none",
        ]
        keyed = [*overrides, *llm, f"auth.keys_file={keys}"]
        with silent, rs.running_server(args.python, Path(tmp) / "keyed", keyed, timeout=120) as server:
            _insert(server, memory, other)
            quiet_health, quiet_other, run = during(server, "quiet", seconds, other)
            run()
            figures += [quiet_health, quiet_other] if quiet_other is not None else [quiet_health]
            for kind in ("sse", "events", "long_poll"):
                print(f"key A holds {args.streams} {kind} ...", flush=True)
                figures += held_streams(server, kind, args.streams, seconds, attacker, other)
            print(f"{args.trickle} keyless trickled bodies to the keyed server ...", flush=True)
            figures += trickled_bodies(server, args.trickle, seconds, other=other)
            print(f"{args.huge} keyless 30 MiB bodies to the keyed server ...", flush=True)
            figures += huge_bodies(server, args.huge, "/retrieve_task_memory", seconds, other=other)
            print(f"key A sends {args.bombs} regex bombs ...", flush=True)
            figures += regex_bombs(server, args.bombs, seconds, attacker, other)
            print(f"key A trickles {args.trickle} bodies ...", flush=True)
            auth = f"Authorization: {attacker['Authorization']}\r\n"
            health_figure, other_figure, run = during(server, f"key A trickles {args.trickle} bodies", seconds, other)
            feeder = threading.Thread(target=trickled_bodies, args=(server, args.trickle, seconds, auth), daemon=True)
            feeder.start()
            run()
            feeder.join(seconds + 60)
            figures += [health_figure, other_figure] if other_figure is not None else [health_figure]
    return figures
