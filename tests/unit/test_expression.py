"""The flow DSL parser and the composition algebra: pure logic, pinned precisely without a server."""

from __future__ import annotations

import pytest

from reme_service.app import build_op_registry
from reme_service.errors import FlowSyntaxError
from reme_service.flow.expression import parse_flow
from reme_service.flow.op import Parallel, Sequential
from reme_service.ops.task.build_query_op import BuildQueryOp
from reme_service.ops.task.merge_memory_op import MergeMemoryOp
from reme_service.ops.task.rerank_memory_op import RerankMemoryOp
from reme_service.ops.vector_store.recall_vector_store_op import RecallVectorStoreOp

REGISTRY = build_op_registry()


def test_sequence_and_parallel_parse_into_flattened_nodes() -> None:
    tree = parse_flow(
        "BuildQueryOp() >> RecallVectorStoreOp(top_k=3) >> (RerankMemoryOp(top_k=2) | MergeMemoryOp())", REGISTRY
    )
    assert isinstance(tree, Sequential)
    assert len(tree.children) == 3
    assert isinstance(tree.children[2], Parallel)
    assert tree == BuildQueryOp() >> RecallVectorStoreOp(top_k=3) >> (RerankMemoryOp(top_k=2) | MergeMemoryOp())


def test_repr_prints_the_dsl_back_and_round_trips() -> None:
    text = "BuildQueryOp() >> (RerankMemoryOp(top_k=2) | MergeMemoryOp()) >> RecallVectorStoreOp(top_k=4)"
    tree = parse_flow(text, REGISTRY)
    assert repr(tree) == text
    assert parse_flow(repr(tree), REGISTRY) == tree


def test_composition_is_immutable() -> None:
    a, b, c = BuildQueryOp(), RecallVectorStoreOp(), MergeMemoryOp()
    ab = a >> b
    abc = ab >> c
    assert len(ab.children) == 2  # the left operand was not mutated
    assert len(abc.children) == 3
    par = (a | b) | c
    assert isinstance(par, Parallel) and len(par.children) == 3


def test_bare_names_and_multiline_expressions() -> None:
    tree = parse_flow("BuildQueryOp\n >> MergeMemoryOp()", REGISTRY)
    assert tree == BuildQueryOp() >> MergeMemoryOp()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("BuildQueryOp() >> NoSuchOp()", "unknown op 'NoSuchOp'; valid: "),
        ("BuildQueryOp(nope=1)", "bad parameters for BuildQueryOp"),
        ("RerankMemoryOp(top_k='many')", "top_k"),
        ("BuildQueryOp() + MergeMemoryOp()", "unsupported syntax (BinOp)"),
        ("BuildQueryOp(enable_llm_build=__import__('os'))", "must be a literal"),
        ("BuildQueryOp(", "syntax error"),
        ("BuildQueryOp(True)", "by keyword"),
        ("MergeMemoryOp(**{'a': 1})", "'**' arguments"),
    ],
)
def test_bad_expressions_fail_with_a_message(text: str, fragment: str) -> None:
    with pytest.raises(FlowSyntaxError) as info:
        parse_flow(text, REGISTRY, flow_name="my_flow")
    assert fragment in str(info.value)
    assert "my_flow" in str(info.value)


def test_error_names_the_column() -> None:
    with pytest.raises(FlowSyntaxError, match="column 19"):
        parse_flow("BuildQueryOp() >> Missing()", REGISTRY, flow_name="f")


def test_params_are_validated_and_frozen() -> None:
    op = RerankMemoryOp(top_k=7)
    assert op.params.top_k == 7
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error
        op.params.top_k = 3
