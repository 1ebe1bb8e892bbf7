"""The key file and the key ring: concurrent `reme keys` changes lose nothing, a key file broken while the
service runs fails closed and recovers, last-used times reach `reme keys list`, the token bucket, and the
re-check of a caller resolved earlier (what ends the streams and MCP sessions of a revoked key)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from reme_service.auth.access import Access
from reme_service.auth.caller import TRUSTED
from reme_service.auth.cli import main as keys_main
from reme_service.auth.keyfile import create_key, read_key_file, read_last_used, revoke_key
from reme_service.auth.keyring import KeyRing
from reme_service.auth.rate_limit import RateLimiter
from reme_service.config.models import AuthConfig
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


def test_a_key_created_by_another_process_counts_from_its_first_request(tmp_path: Path) -> None:
    """The reload interval bounds how long a revoked key may still pass, never how long a new key is refused."""
    path = tmp_path / "keys.json"
    create_key(path, workspaces=["alice"], scope="write")
    clock = Clock()
    ring = KeyRing(path, reload_seconds=1.0, clock=clock)
    ring.load()
    _, fresh = create_key(path, workspaces=["bob"], scope="read")  # `reme keys create` beside the service
    clock.now += 0.1  # well inside the reload interval
    assert ring.authenticate(fresh).workspaces == ("bob",)
    with pytest.raises(UnauthorizedError, match="unknown API key"):
        ring.authenticate(fresh[:-2] + "zz")


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


def test_a_caller_stands_while_its_key_grants_the_same_rights(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    clock = Clock()
    ring = KeyRing(path, reload_seconds=1.0, clock=clock)
    ring.load()
    access = Access(AuthConfig(), ring, host="127.0.0.1")
    assert access.still_valid(TRUSTED)  # no key yet: checking is off

    def reload() -> None:
        clock.now += 1.5
        os.utime(path, ns=(int(clock.now * 1e9), int(clock.now * 1e9)))  # seen changed even at the same size

    kept_record, kept_key = create_key(path, workspaces=["alice"], scope="write")
    narrowed_record, narrowed_key = create_key(path, workspaces=["alice", "bob"], scope="read")
    gone_record, gone_key = create_key(path, workspaces=["alice"], scope="read")
    widened_record, widened_key = create_key(path, workspaces=["alice"], scope="read")
    demoted_record, demoted_key = create_key(path, workspaces=["alice"], scope="write")
    reload()
    keys = (kept_key, narrowed_key, gone_key, widened_key, demoted_key)
    kept, narrowed, gone, widened, demoted = (ring.authenticate(key) for key in keys)
    assert not access.still_valid(TRUSTED)  # the first key closed the service: a trusted caller no longer stands
    assert all(access.still_valid(caller) for caller in (kept, narrowed, gone, widened, demoted))

    stored = json.loads(path.read_text())
    stored["keys"] = [entry for entry in stored["keys"] if entry["id"] != gone_record.id]
    entries = {entry["id"]: entry for entry in stored["keys"]}
    entries[narrowed_record.id]["workspaces"] = ["bob"]
    entries[widened_record.id].update(workspaces=["alice", "carol"], scope="admin")
    entries[demoted_record.id]["scope"] = "read"
    path.write_text(json.dumps(stored))
    assert access.still_valid(narrowed)  # not reloaded yet: within reload_seconds
    reload()
    assert access.still_valid(kept) and not access.still_valid(narrowed) and not access.still_valid(gone)
    assert access.still_valid(widened)  # more rights than it had: what it was doing is still allowed
    assert not access.still_valid(demoted)  # a lower scope is a narrowing too

    good = path.read_bytes()
    path.write_bytes(good[:10])
    reload()
    assert not access.still_valid(kept)  # a broken key file fails closed
    path.write_bytes(good)
    reload()
    assert access.still_valid(kept)
    revoke_key(path, kept_record.id)
    reload()
    assert not access.still_valid(kept)


def test_keys_create_takes_a_workspace_id_holding_an_equals_sign(tmp_path: Path) -> None:
    """`--workspace a=b`: `a=b` is a valid workspace id, the option's value, not a config argument (D23)."""
    data = f"data_dir={tmp_path}"
    assert keys_main(["create", "--workspace", "a=b", "--scope", "write", data]) == 0
    assert keys_main(["create", "--workspace=c=d", "--name", "x=y", "--scope", "read", data]) == 0
    records = read_key_file(tmp_path / "auth" / "keys.json").keys
    assert [(r.workspaces, r.name) for r in records] == [(["a=b"], ""), (["c=d"], "x=y")]
