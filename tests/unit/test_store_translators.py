"""Pure functions under the Chroma and Elasticsearch stores: names, metadata leaves, filter translation, fusion."""

from __future__ import annotations

import re

import pytest

from reme_service.errors import ConfigError
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.chroma.where import chroma_where, node_metadata, record_metadata, stale_keys
from reme_service.stores.es.query import es_filter, reciprocal_rank_fusion
from reme_service.stores.names import (
    check_es_prefix,
    chroma_collection_name,
    chroma_temp_name,
    chroma_workspace_id,
    es_alias_name,
    es_index_name,
    es_workspace_id,
)
from reme_service.stores.remote_filter import plan_filter, scalar_leaves

IDS = [WorkspaceId(w) for w in ("a", "My.WS_1", "-x-", "..a", "_", "a.", "A" * 128, "0" * 128, "x_0", "X_y.Z-9")]
CHROMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
ES_NAME = re.compile(r'^[a-z0-9][^A-Z\\/*?"<>| ,#:]*$')


@pytest.mark.parametrize("workspace", IDS)
def test_chroma_names_are_valid_and_reversible(workspace: WorkspaceId) -> None:
    name = chroma_collection_name(workspace)
    assert CHROMA_NAME.fullmatch(name) and ".." not in name
    assert chroma_workspace_id(name) == workspace
    for kind in ("s", "t"):
        temp = chroma_temp_name(workspace, kind, "ab12")
        assert CHROMA_NAME.fullmatch(temp) and chroma_workspace_id(temp) is None


def test_chroma_names_are_distinct_and_foreign_names_do_not_decode() -> None:
    assert len({chroma_collection_name(w) for w in IDS}) == len(IDS)
    assert chroma_collection_name(WorkspaceId("my.ws_1")) != chroma_collection_name(WorkspaceId("My.WS_1"))
    for foreign in ("reme-x", "other-a_e", "reme-a_xb_e", "reme-_e", "reme-a b_e"):
        assert chroma_workspace_id(foreign) is None


@pytest.mark.parametrize("workspace", IDS)
def test_es_names_are_lower_case_valid_and_reversible(workspace: WorkspaceId) -> None:
    alias = es_alias_name(workspace)
    index = es_index_name(alias, 1_800_000_000_000_000_000)
    for name in (alias, index):
        assert ES_NAME.fullmatch(name) and len(name.encode()) <= 255, name
    hashed = len("reme-" + workspace) + sum(ch.isupper() or ch == "_" for ch in workspace) > 200
    assert es_workspace_id(alias) == (None if hashed else workspace)
    assert es_workspace_id(index) is None  # "_<digit>" never occurs in an encoding


def test_es_names_are_distinct_and_long_ones_hashed() -> None:
    aliases = {es_alias_name(w) for w in [*IDS, WorkspaceId("my.ws_1"), WorkspaceId("MY.ws_1")]}
    assert len(aliases) == len(IDS) + 2
    long_upper = WorkspaceId("AB" * 64)
    alias = es_alias_name(long_upper)
    assert len(alias) <= 200 and es_workspace_id(alias) is None
    assert alias != es_alias_name(WorkspaceId("AB" * 63 + "AC"))
    with pytest.raises(ConfigError):
        check_es_prefix("Reme-")


def test_scalar_leaves_by_kind() -> None:
    metadata = {"a": "s", "b": {"c": 1, "d": True, "e": None, "f": [1], "g": {}}, "h.i": 2, "j": 2.5}
    assert sorted(scalar_leaves(metadata)) == [
        ("a", "s", "s"), ("b.c", "n", 1.0), ("b.d", "b", True), ("b.e", "z", True), ("j", "n", 2.5)
    ]  # fmt: skip


def test_chroma_records_round_trip_and_replace_stale_keys() -> None:
    metadata = {"memory_type": "task", "metadata": {"freq": 3}, "calls": [{"x": None}]}
    record = record_metadata("id1", 5, metadata)
    assert record["_uid"] == "id1" and record["_seq"] == 5
    assert record["ms.memory_type"] == "task" and record["mn.metadata.freq"] == 3.0
    assert node_metadata(record) == metadata
    newer = record_metadata("id1", 5, {"memory_type": "task"})
    assert stale_keys(record, newer) == {"mn.metadata.freq": None}


def _where(filter: dict) -> tuple:
    plan = plan_filter(filter, "ws")
    result = chroma_where(plan.conditions)
    return result.where, result.exact, plan.impossible or result.impossible


def test_chroma_where_translations() -> None:
    assert _where({"metadata.memory_type": "task"}) == ({"ms.memory_type": {"$eq": "task"}}, True, False)
    assert _where({"metadata.metadata.freq": {"gte": 5, "lt": 12}}) == (
        {"$and": [{"mn.metadata.freq": {"$gte": 5.0}}, {"mn.metadata.freq": {"$lt": 12.0}}]}, True, False
    )  # fmt: skip
    assert _where({"metadata.x": ["a", 1, True, None]}) == (
        {"$or": [{"ms.x": {"$in": ["a"]}}, {"mn.x": {"$in": [1.0]}}, {"mb.x": {"$in": [True]}},
                 {"mz.x": {"$eq": True}}]}, True, False,
    )  # fmt: skip
    assert _where({"metadata.x": {"nin": ["a", 2]}}) == (
        {"$and": [{"ms.x": {"$nin": ["a"]}}, {"mn.x": {"$nin": [2.0]}}]}, True, False
    )  # fmt: skip
    assert _where({"unique_id": {"in": ["a", 3]}}) == ({"_uid": {"$in": ["a"]}}, True, False)
    assert _where({"workspace_id": "ws", "metadata.y": None}) == ({"mz.y": {"$eq": True}}, True, False)
    # what Chroma cannot say is left to the store's own predicate
    assert _where({"metadata.when": {"gte": "2024"}}) == (None, False, False)
    assert _where({"content": "x", "metadata.k": 1}) == ({"mn.k": {"$eq": 1.0}}, False, False)
    assert _where({"metadata.big": {"gt": 2**60}}) == ({"mn.big": {"$gte": float(2**60)}}, False, False)
    # what no node can satisfy
    assert _where({"workspace_id": "other"})[2] and _where({"unique_id": 5})[2] and _where({"metadata.z": []})[2]
    assert _where({"metadata": {"ne": 1}, "unique_id": {"nin": [1]}}) == (None, True, False)


def test_es_filter_translations() -> None:
    flt = es_filter(plan_filter({"metadata.memory_type": "task", "metadata.x": {"ne": None}}, "ws").conditions)
    assert flt.exact and not flt.impossible
    assert flt.query() == {
        "bool": {
            "filter": [{"nested": {"path": "leaves", "query": {"bool": {"filter": [
                {"term": {"leaves.p": "memory_type"}}, {"term": {"leaves.s": "task"}}]}}}}],
            "must_not": [{"nested": {"path": "leaves", "query": {"bool": {"filter": [
                {"term": {"leaves.p": "x"}}, {"term": {"leaves.z": True}}]}}}}],
        }
    }  # fmt: skip
    mixed = es_filter(plan_filter({"metadata.x": {"in": ["a", 1, 2]}}, "ws").conditions)
    inner = mixed.filter[0]["nested"]["query"]["bool"]["filter"][1]["bool"]
    assert inner == {"should": [{"term": {"leaves.s": "a"}}, {"terms": {"leaves.n": [1.0, 2.0]}}],
                     "minimum_should_match": 1}  # fmt: skip
    ranged = es_filter(plan_filter({"unique_id": {"gte": "b"}, "metadata.n": {"lt": 3}}, "ws").conditions)
    assert ranged.exact and ranged.filter[0] == {"range": {"unique_id": {"gte": "b"}}}
    assert not es_filter(plan_filter({"metadata.s": {"gt": "a"}}, "ws").conditions).exact
    assert not es_filter(plan_filter({"metadata.s": "x" * 9_000}, "ws").conditions).exact
    assert es_filter(plan_filter({"unique_id": {"in": [1]}}, "ws").conditions).impossible
    assert es_filter([]).query() == {"match_all": {}}


def test_reciprocal_rank_fusion() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "a", "d"]])
    assert [uid for uid, _ in fused] == ["a", "b", "c", "d"]
    assert fused[0][1] == pytest.approx((1 / 61 + 1 / 62) / (2 / 61))
    assert reciprocal_rank_fusion([["x"], ["x"]]) == [("x", 1.0)]
    assert all(0 < score <= 1 for _, score in fused)
