"""The key file and the key ring: concurrent `reme keys` changes lose nothing, a key file broken while the
service runs fails closed and recovers, last-used times reach `reme keys list`, and the token bucket."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from reme_service.auth.keyfile import create_key, read_key_file, read_last_used
from reme_service.auth.keyring import KeyRing
from reme_service.auth.rate_limit import RateLimiter
from reme_service.errors import HTTPStatusError, UnauthorizedError


def test_concurrent_creates_lose_no_key(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    made: list[str] = []
    start = threading.Barrier(16)

    def make(index: int) -> None:
        start.wait()
        for _ in range(5):
            made.append(create_key(path, workspaces=[f"w{index}"], scope="write")[0].id)

    threads = [threading.Thread(target=make, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(record.id for record in read_key_file(path).keys) == sorted(made)
    assert len(made) == 80


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_key_file_broken_while_serving_fails_closed_until_repaired(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    _, key = create_key(path, workspaces=["alice"], scope="write")
    clock = Clock()
    ring = KeyRing(path, reload_seconds=1.0, clock=clock)
    ring.load()
    assert ring.authenticate(key).workspaces == ("alice",)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    clock.now += 1.5
    with pytest.raises(HTTPStatusError) as failure:
        ring.authenticate(key)
    assert failure.value.status == 503
    assert ring.has_keys()  # so checking stays on
    path.write_bytes(good)
    os.utime(path, ns=(1, 1))
    clock.now += 1.5
    assert ring.authenticate(key).workspaces == ("alice",)
    with pytest.raises(UnauthorizedError):
        ring.authenticate(key[:-2] + "zz")


def test_last_use_is_flushed_for_reme_keys_list(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    record, key = create_key(path, workspaces=["alice"], scope="read")
    ring = KeyRing(path)
    ring.load()
    ring.authenticate(key)
    assert read_last_used(path) == {}
    ring.flush()
    assert set(read_last_used(path)) == {record.id}


def test_the_token_bucket_allows_bursts_then_the_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(2.0, 3, clock=clock)
    assert [limiter.wait("k") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.wait("k") == pytest.approx(0.5)
    assert limiter.wait("other") == 0.0
    clock.now += 0.5
    assert limiter.wait("k") == 0.0
    assert limiter.wait("k") > 0
    clock.now += 10
    assert [limiter.wait("k") for _ in range(4)][:3] == [0.0, 0.0, 0.0]
    assert RateLimiter.retry_after(0.2) == 1 and RateLimiter.retry_after(2.1) == 3
