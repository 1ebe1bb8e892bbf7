"""The retrieval flows' `exact` field: declared on each retrieval flow, passed down to the store, where it makes a
workspace with an approximate index rank every memory; flows that do not declare it still start and search the
default way."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from reme_service.ops.vector_store.recall_vector_store_op import LEXICAL_WEIGHT
from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.services import Services
from reme_service.stores.inproc.memory import MemoryVectorStore
from reme_service.testing.run_op import op_services, run_flow

pytestmark = pytest.mark.anyio

WS = "big"
WORDS = [f"w{i}" for i in range(300)]
# A deliberately poor graph (2 links a node) over every workspace, so that its answers differ from exact ones.
POOR_INDEX = ("min_rows=1", "connectivity=2", "expansion_add=2", "expansion_search=1", "candidates=1")


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    overlay = tmp_path / "custom.yaml"
    overlay.write_text(  # a user's flow written before `exact` existed: it does not declare it
        "flow:\n  my_search:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(hybrid=False)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
        # and one that declares it: cosine only, no wider pool to rescore (which could hide the index's misses)
        "  my_exact_search:\n    flow_content: BuildQueryOp() >> RecallVectorStoreOp(hybrid=False, rescore_pool=1)\n"
        "    input_schema:\n      query: {type: string, required: true}\n      top_k: {type: integer, default: 3}\n"
        "      exact: {type: boolean, default: false}\n"
    )
    options = [f"vector_store.default.params.ann.{option}" for option in POOR_INDEX]
    async with op_services(tmp_path, f"config={overlay}", *options) as started:
        rng = random.Random(3)
        memories = [{"when_to_use": " ".join(rng.choices(WORDS, k=6)), "content": f"memory {i}"} for i in range(1500)]
        result = await run_flow(started, "vector_store", workspace_id=WS, action="insert", memory_dicts=memories)
        assert result["success"] is True, result
        yield started


def memory_ids(result: dict[str, object]) -> list[str]:
    assert result["success"] is True, result
    metadata = result["metadata"]
    assert isinstance(metadata, dict)
    return [memory["memory_id"] for memory in metadata["memory_list"]]


async def test_exact_ranks_every_memory_of_an_indexed_workspace(services: Services) -> None:
    store = services.store("default").inner
    assert isinstance(store, MemoryVectorStore) and store._spaces[WorkspaceId(WS)].ann is not None
    embedder = services.store_embedder("default")
    rng = random.Random(9)
    differed = 0
    for _ in range(20):
        query = " ".join(rng.choices(WORDS, k=4))
        vector = (await embedder.embed([query]))[0]
        truth = [h.node.unique_id for h in await store.search_vector(WS, vector, top_k=5, exact=True)]
        request = {"workspace_id": WS, "query": query, "top_k": 5}
        default = memory_ids(await run_flow(services, "my_search", **request))  # through the index
        differed += default != truth
        truth_scores = [h.score for h in await store.search_vector(WS, vector, top_k=5, exact=True)]
        exact_flow = await run_flow(services, "my_exact_search", **request, exact=True)
        assert [m["relevance"] for m in exact_flow["metadata"]["memory_list"]] == pytest.approx(truth_scores, abs=1e-6)
        for flow in ("retrieve_task_memory", "retrieve_task_memory_simple"):
            assert await run_flow(services, flow, **request, exact=True)
        result = await run_flow(services, "retrieve_task_memory", **request, exact=True)
        found = [memory["relevance"] for memory in result["metadata"]["memory_list"]]
        fast = [h.node.unique_id for h in await store.search_hybrid(WS, query, top_k=10)]
        exact_hits = await store.search_hybrid(WS, query, top_k=10, exact=True, lexical_weight=LEXICAL_WEIGHT)
        slow = [h.node.unique_id for h in exact_hits]
        # the exact hybrid ranking (the flow's default search is hybrid), compared by score: memories that tie may
        # come in either order
        assert found == pytest.approx([h.score for h in exact_hits[:5]], abs=1e-6)
        differed += fast != slow
    assert differed, "the poor index always answered as exact search does: this test shows nothing"
    personal = await run_flow(services, "retrieve_personal_memory", workspace_id=WS, query="w1 w2", exact=True)
    assert personal["success"] is True, personal


async def test_exact_must_be_a_boolean(services: Services) -> None:
    result = await run_flow(services, "retrieve_task_memory", workspace_id=WS, query="w1", exact="sometimes")
    assert result["success"] is False
