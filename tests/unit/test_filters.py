"""The filter grammar: parsing, validation errors and evaluation semantics."""

from __future__ import annotations

from typing import Any

import pytest

from reme_service.errors import InvalidRequestError
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.filters import Condition, compile_filter, matches, parse_filter

NODE = VectorNode(
    unique_id="n1",
    workspace_id="ws",
    content="how to retry http calls",
    metadata={
        "memory_type": "task",
        "score": 0.5,
        "flag": True,
        "count": 1,
        "none": None,
        "tags": ["a", "b"],
        "time_created": "2024-05-01 10:00:00",
        "metadata": {"freq": 3, "utility": 2.5, "deep": {"x": "y"}},
    },
)


def test_parse_normalises_every_form() -> None:
    parsed = parse_filter(
        {"unique_id": "n1", "metadata.memory_type": ["task", "tool"], "metadata.score": {"gt": 0, "lte": 1}}
    )
    assert parsed == [
        Condition(("unique_id",), "eq", "n1"),
        Condition(("metadata", "memory_type"), "in", ("task", "tool")),
        Condition(("metadata", "score"), "gt", 0),
        Condition(("metadata", "score"), "lte", 1),
    ]
    assert parsed[1].key == "metadata.memory_type"
    assert parse_filter(None) == [] and parse_filter({}) == []


def test_an_empty_filter_compiles_to_none() -> None:
    assert compile_filter(None) is None
    assert compile_filter({}) is None
    assert matches(NODE, None)


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"unique_id": "n1"}, True),
        ({"unique_id": "n2"}, False),
        ({"workspace_id": "ws", "content": "how to retry http calls"}, True),
        ({"metadata.memory_type": "task"}, True),
        ({"metadata.memory_type": ["personal", "task"]}, True),
        ({"metadata.memory_type": ["personal", "tool"]}, False),
        ({"metadata.metadata.freq": 3}, True),
        ({"metadata.metadata.freq": 3.0}, True),  # numbers compare by value
        ({"metadata.metadata.freq": {"gte": 3, "lt": 4}}, True),
        ({"metadata.metadata.freq": {"gt": 3}}, False),
        ({"metadata.metadata.utility": {"lte": 2.5}}, True),
        ({"metadata.metadata.deep.x": "y"}, True),
        ({"metadata.time_created": {"gte": "2024-01-01", "lt": "2024-12-31"}}, True),
        ({"metadata.time_created": {"gt": 5}}, False),  # a string against a number never matches
        ({"metadata.score": {"gt": "0"}}, False),
        ({"metadata.flag": True}, True),
        ({"metadata.flag": 1}, False),  # booleans equal only booleans
        ({"metadata.count": True}, False),
        ({"metadata.count": {"in": [1, 2]}}, True),
        ({"metadata.flag": {"gt": 0}}, False),
        ({"metadata.none": None}, True),
        ({"metadata.tags": "a"}, False),  # lists are values, not sets to search
        ({"metadata.memory_type": {"ne": "personal"}}, True),
        ({"metadata.memory_type": {"ne": "task"}}, False),
        ({"metadata.memory_type": {"nin": ["personal"]}}, True),
        ({"metadata.memory_type": {"nin": ["task"]}}, False),
        ({"metadata.memory_type": "task", "metadata.metadata.freq": {"gt": 5}}, False),  # all must hold
    ],
)
def test_semantics(filter: dict[str, Any], expected: bool) -> None:
    assert matches(NODE, filter) is expected


@pytest.mark.parametrize(
    "path",
    ["metadata.absent", "metadata.metadata.absent", "metadata.memory_type.deeper", "content.x", "unique_id.x"],
)
def test_a_missing_path_matches_only_ne_and_nin(path: str) -> None:
    for spec in ("x", ["x"], {"eq": "x"}, {"in": ["x"]}, {"gt": 0}, {"lte": "z"}, {"eq": None}):
        assert not matches(NODE, {path: spec}), spec
    assert matches(NODE, {path: {"ne": "x"}})
    assert matches(NODE, {path: {"nin": ["x"]}})


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        ({"metadata.x": {"like": "a%"}}, "unknown operator 'like'"),
        ({"metadata.x": {}}, "empty operator object"),
        ({"metadata.x": {"in": "abc"}}, "takes a list"),
        ({"metadata.x": {"nin": 3}}, "takes a list"),
        ({"metadata.x": {"gt": True}}, "number or a string"),
        ({"metadata.x": {"gt": None}}, "number or a string"),
        ({"metadata.x": {"eq": [1]}}, "takes a scalar"),
        ({"metadata.x": {"ne": {"a": 1}}}, "takes a scalar"),
        ({"metadata.x": [{"a": 1}]}, "must be scalars"),
        ({"metadata.x": {"in": [[1]]}}, "must be scalars"),
        ({"metadata.x": object()}, "a condition is a scalar"),
        ({"metadata..x": 1}, "empty path segment"),
        ({"memory_type": "task"}, "starts with one of content, metadata, unique_id.*e.g. .metadata.memory_type"),
        ({"vector": {"ne": None}}, "starts with one of"),
        ({"": 1}, "non-empty dotted paths"),
        ({1: 1}, "non-empty dotted paths"),
        (["metadata.x"], "must be an object"),
        ("metadata.x", "must be an object"),
    ],
)
def test_invalid_grammar_is_a_clear_400(filter: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message) as caught:
        compile_filter(filter)
    assert caught.value.status == 400
    assert caught.value.details["field"] == "filter"


def test_compiled_predicate_is_reusable_over_many_nodes() -> None:
    predicate = compile_filter({"metadata.memory_type": "task", "metadata.metadata.freq": {"gte": 10}})
    assert predicate is not None
    nodes = [
        VectorNode(unique_id=str(i), metadata={"memory_type": "task" if i % 2 else "tool", "metadata": {"freq": i}})
        for i in range(20)
    ]
    assert [n.unique_id for n in nodes if predicate(n)] == ["11", "13", "15", "17", "19"]
    # a non-dict in the middle of a path is a missing value, not an error
    assert not predicate(VectorNode(metadata={"memory_type": "task", "metadata": "not a dict"}))
