"""`NodeTable`: rows read back as written, raw and compressed, through replaces, swap-deletes and re-encoding."""

from __future__ import annotations

import random
import threading

import orjson
import pytest

from reme_service.stores.inproc import node_table
from reme_service.stores.inproc.node_table import NodeTable
from reme_service.stores.inproc.packed import StoredNode, compile_stored_filter

WORDS = ["deploy", "rollback", "cache", "index", "shard", "replica", "token", "budget", "retry", "timeout"]


def make_nodes(count: int, seed: int = 0) -> list[StoredNode]:
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        text = " ".join(rng.choices(WORDS, k=rng.randint(3, 12))) + ("\n" if i % 7 == 0 else "") + "é✓"[i % 2]
        meta = {"memory_type": "task", "score": round(rng.random(), 3), "n": i, "tags": rng.sample(WORDS, 2)}
        nodes.append(StoredNode(f"{rng.getrandbits(64):016x}", "ws", text, orjson.dumps(meta)))
    return nodes


def same(a: StoredNode, b: StoredNode) -> bool:
    return (a.unique_id, a.workspace_id, a.content, a.meta) == (b.unique_id, b.workspace_id, b.content, b.meta)


def test_raw_rows_follow_appends_replaces_and_swap_deletes() -> None:
    nodes = make_nodes(50)
    table = NodeTable()
    table.extend(nodes)
    assert not table.codec.compressing
    assert all(same(table[row], node) for row, node in enumerate(nodes))
    table.replace(3, StoredNode(nodes[3].unique_id, "ws", "new text", b'{"a":1}'))
    assert (table[3].content, table[3].meta, table.content(3)) == ("new text", b'{"a":1}', "new text")
    assert table.delete(3) == nodes[49].unique_id  # the last row moved into the hole
    assert same(table[3], nodes[49]) and len(table) == 49
    assert table.delete(48) is None  # the last row itself: nothing moves
    assert [node.unique_id for node in table] == table.ids and len(table) == 48


def test_a_big_table_is_compressed_with_a_trained_dictionary_and_reads_back_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(node_table, "COMPRESS_FROM", 2_000)
    nodes = make_nodes(3_000)
    table = NodeTable.planned(len(nodes), lambda rows: (nodes[row] for row in rows))
    table.extend(nodes)
    assert table.codec.compressing and table.codec.dictionary is not None
    raw = sum(len(n.meta) + len(n.content.encode()) for n in nodes)
    assert sum(map(len, table.blobs)) < raw / 2  # what it is for
    assert all(same(table[row], node) for row, node in enumerate(nodes))
    assert list(table.contents()) == [node.content for node in nodes]
    table.replace(10, nodes[20])
    assert table[10].content == nodes[20].content and table[10].unique_id == nodes[10].unique_id


def test_a_table_growing_past_the_threshold_is_re_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_table, "COMPRESS_FROM", 1_000)
    nodes = make_nodes(1_500)
    table = NodeTable()
    table.extend(nodes[:999])
    assert not table.should_compress()
    table.extend(nodes[999:1_200])
    assert table.should_compress()
    before = table.bytes_per_row(64)
    table.compress()
    assert table.codec.compressing and not table.should_compress()
    table.extend(nodes[1_200:])  # later writes use the same dictionary
    assert all(same(table[row], node) for row, node in enumerate(nodes))
    assert table.bytes_per_row(64) < before


def test_readers_in_several_threads_decode_with_their_own_decompressors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_table, "COMPRESS_FROM", 1_000)
    nodes = make_nodes(2_000)
    table = NodeTable.planned(len(nodes), lambda rows: (nodes[row] for row in rows))
    table.extend(nodes)
    wrong: list[int] = []

    def read(offset: int) -> None:
        for _ in range(3):
            wrong.extend(row for row in range(offset, len(nodes), 3) if not same(table[row], nodes[row]))

    threads = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


@pytest.mark.parametrize("compressed", [False, True])
def test_a_filter_tests_rows_raw_or_compressed_rejecting_by_needle_first(
    compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node_table, "COMPRESS_FROM", 1_000 if compressed else 10**9)
    nodes = make_nodes(1_200)
    nodes[5] = StoredNode("tricky", "ws", 'the content says "retry"', b'{"tags":["cache"]}')  # the needle, in content
    table = NodeTable.planned(len(nodes), lambda rows: (nodes[row] for row in rows))
    table.extend(nodes)
    assert table.codec.compressing is compressed
    for filter in ({"metadata.tags": {"eq": "retry"}}, {"metadata.n": {"gt": 1_000}}, {"unique_id": "tricky"}):
        predicate = compile_stored_filter(filter)
        assert predicate is not None
        test = table.tester(predicate)
        assert [row for row in range(len(table)) if test(row)] == [row for row, n in enumerate(nodes) if predicate(n)]
    assert table.tester(compile_stored_filter({"metadata.tags": "retry"}))(5) is False  # type: ignore[arg-type]
