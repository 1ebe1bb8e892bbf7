"""The in-RAM node layout: metadata kept as JSON bytes, filters over it, and packed library nodes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from reme_service.errors import InvalidRequestError
from reme_service.ops.vector_store.library_io import read_library_nodes
from reme_service.providers.embedding.hash import HashEmbeddingClient
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.filters import compile_filter
from reme_service.stores.inproc.local import LocalVectorStore
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.stores.inproc.packed import PackedNodes, StoredNode, compact_bytes, compile_stored_filter, export_node
from reme_service.stores.params import LocalStoreParams

pytestmark = pytest.mark.anyio

TRICKY = ['say "hi"', "back\\slash", "naïve 中文", "tab\there", "", "a,b:c", "emoji 🙂", "task"]


def _metadata(rng: random.Random) -> dict[str, Any]:
    return {
        "memory_type": rng.choice(["task", "personal", "tool"]),
        "author": rng.choice(TRICKY),
        "score": rng.choice([0, 1, 0.5, True, None]),
        "tags": rng.sample(TRICKY, 2),
        "metadata": {"freq": rng.randint(0, 5), "note": rng.choice(TRICKY)},
    }


FILTERS: list[dict[str, Any]] = [
    {"metadata.memory_type": "task"},
    {"metadata.author": 'say "hi"'},
    {"metadata.author": "naïve 中文", "metadata.memory_type": "personal"},
    {"metadata.metadata.note": "back\\slash"},
    {"metadata.metadata.note": {"eq": "emoji 🙂"}},
    {"metadata.author": {"ne": "task"}},
    {"metadata.author": ["tab\there", "a,b:c"]},
    {"metadata.score": True},
    {"metadata.score": 1},
    {"metadata.score": None},
    {"metadata.metadata.freq": {"gte": 2, "lt": 4}},
    {"metadata.tags": "task"},  # a list never equals a string, though the bytes hold '"task"'
    {"metadata.absent": "task"},
    {"metadata.absent": {"nin": ["x"]}},
    {"content": "text 3"},
    {"unique_id": {"in": ["n1", "n2", "n3", "n4", "n5", "n6"]}, "metadata.memory_type": "tool"},
]


MATCH_NOTHING = [{"metadata.tags": "task"}, {"metadata.absent": "task"}]


@pytest.mark.parametrize("filter", FILTERS, ids=[orjson.dumps(f).decode() for f in FILTERS])
def test_stored_filters_agree_with_the_dict_filters(filter: dict[str, Any]) -> None:
    rng = random.Random(7)
    nodes = [
        VectorNode(unique_id=f"n{i}", workspace_id="ws", content=f"text {i}", metadata=_metadata(rng))
        for i in range(300)
    ]
    stored = [StoredNode.encode(n.unique_id, n.workspace_id, n.content, n.metadata) for n in nodes]
    expected = compile_filter(filter)
    actual = compile_stored_filter(filter)
    assert expected is not None and actual is not None
    wanted = [n.unique_id for n in nodes if expected(n)]
    assert [s.unique_id for s in stored if actual(s)] == wanted
    assert bool(wanted) is (filter not in MATCH_NOTHING)  # the comparison is not vacuous


def test_an_empty_stored_filter_is_none_and_bad_ones_are_400() -> None:
    assert compile_stored_filter(None) is None and compile_stored_filter({}) is None
    with pytest.raises(InvalidRequestError, match="unknown operator"):
        compile_stored_filter({"metadata.x": {"like": "a"}})


def test_stored_metadata_is_compact_json_and_exports_are_independent_copies() -> None:
    node = StoredNode.encode("id1", "ws", "text", {"a": [1, 2], "b": {"c": "d"}})
    assert node.meta == b'{"a":[1,2],"b":{"c":"d"}}'
    exported = export_node(node)
    exported.metadata["a"].append(3)
    assert export_node(node).metadata == {"a": [1, 2], "b": {"c": "d"}}
    data = orjson.dumps({"x": 1})
    assert compact_bytes(data) == data and compact_bytes(data) is not data


def test_unserialisable_metadata_is_a_400_naming_the_node() -> None:
    with pytest.raises(InvalidRequestError, match="the metadata of 'bad' is not JSON-serialisable"):
        StoredNode.encode("bad", "ws", "text", {"when": object()})


def test_packed_nodes_read_as_a_sequence_of_vector_nodes() -> None:
    rows = [StoredNode.encode(f"n{i}", "ws", f"text {i}", {"i": i}) for i in range(4)]
    packed = PackedNodes(rows)
    assert len(packed) == 4
    assert packed[1].unique_id == "n1" and packed[1].metadata == {"i": 1} and packed[1].vector is None
    assert [n.unique_id for n in packed[1:3]] == ["n1", "n2"]
    assert [n.content for n in packed] == [f"text {i}" for i in range(4)]
    assert packed[-1].unique_id == "n3"


def _library(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    return path


async def test_a_packed_library_load_keeps_the_last_duplicate_and_the_target_workspace(tmp_path: Path) -> None:
    file = _library(
        tmp_path / "lib.jsonl",
        [
            {"workspace_id": "elsewhere", "memory_id": "a", "when_to_use": "first a", "content": "x"},
            {"memory_id": "b", "when_to_use": "only b", "content": "y", "metadata": {"k": 1}},
            {"memory_id": "a", "when_to_use": "second a", "content": "z"},
        ],
    )
    nodes = await read_library_nodes(file, "target")
    assert isinstance(nodes, PackedNodes) and len(nodes) == 3
    for store in (
        MemoryVectorStore(embedder=HashEmbeddingClient(dimensions=32)),
        LocalVectorStore(LocalStoreParams(store_dir=tmp_path / "local"), embedder=HashEmbeddingClient(dimensions=32)),
    ):
        assert await store.replace_workspace("target", nodes) == 2
        listed = await store.list_nodes("target", with_vectors=True)
        assert [(n.unique_id, n.workspace_id, n.content) for n in listed] == [
            ("a", "target", "second a"),
            ("b", "target", "only b"),
        ]
        assert listed[1].metadata["metadata"] == {"k": 1} and listed[0].metadata["content"] == "z"
        hits = await store.search("target", "only b", top_k=1)
        assert hits[0].node.unique_id == "b" and hits[0].score == pytest.approx(1.0, abs=1e-5)
        # the packed rows are adopted, not shared mutably: a second load into another workspace is independent
        assert await store.replace_workspace("copy", nodes) == 2
        await store.delete_ids("copy", ["a"])
        assert [n.unique_id for n in await store.list_nodes("target")] == ["a", "b"]
        await store.close()


async def test_local_snapshots_keep_metadata_bytes_exactly(tmp_path: Path) -> None:
    embedder = HashEmbeddingClient(dimensions=16)
    metadata = {"quote": 'say "hi"', "unicode": "中文 🙂", "nested": {"list": [1, 2.5, None, True]}}
    store = LocalVectorStore(LocalStoreParams(store_dir=tmp_path, compact_after_records=1), embedder=embedder)
    await store.upsert("ws", [VectorNode(unique_id="n", workspace_id="ws", content="text", metadata=metadata)])
    await store.upsert("ws", [VectorNode(unique_id="m", workspace_id="ws", content="more", metadata={})])
    await store.close()  # the first upsert is in the snapshot, the second replayed from the log or snapshot
    reopened = LocalVectorStore(LocalStoreParams(store_dir=tmp_path), embedder=embedder)
    nodes = {n.unique_id: n for n in await reopened.list_nodes("ws")}
    assert nodes["n"].metadata == metadata and nodes["m"].metadata == {}
    await reopened.close()
