"""`ReMeStore` is a LangGraph `BaseStore` over a live service: BaseStore's documented semantics (put / get / search
/ delete / list_namespaces, batch and abatch), checked through the store and through the service's own API.

LangGraph ships no store conformance kit (its libs/checkpoint tests exercise InMemoryStore itself), so these are
written from BaseStore's documentation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

pytest.importorskip("langgraph", reason="langgraph is not installed: `pip install -e '.[langgraph]'`")

from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from reme_service.client import ReMeClient  # noqa: E402
from reme_service.integrations.langgraph import ReMeStore  # noqa: E402
from reme_service.integrations.langgraph.namespaces import (  # noqa: E402
    key_to_memory_id,
    memory_id_to_key,
    namespace_to_workspace,
    workspace_to_namespace,
)
from tests.service.conftest import ServeFn  # noqa: E402

pytestmark = pytest.mark.service


@pytest.fixture
def served(serve: ServeFn) -> Iterator[tuple[ReMeStore, ReMeClient]]:
    with serve() as http:
        base_url = str(http.base_url).rstrip("/")
        store = ReMeStore(base_url, api_key="")
        with ReMeClient(base_url, api_key="") as client:
            try:
                yield store, client
            finally:
                store.close()


def test_namespaces_and_keys_are_encoded_reversibly() -> None:
    for namespace in [("users",), ("users", "alice@example", "memories"), ("a/b", "c\\d", "50%", "tab\tx")]:
        workspace = namespace_to_workspace(namespace)
        assert "/" not in workspace and "\\" not in workspace and workspace.isprintable()
        assert workspace_to_namespace(workspace) == namespace
    assert namespace_to_workspace(("users", "alice")) == "lg:users.alice"
    assert workspace_to_namespace("my_agent") is None  # not a LangGraph workspace
    for key in ["k1", "a/b", "100%", "ünï code"]:
        assert memory_id_to_key(key_to_memory_id(key)) == key
        assert "/" not in key_to_memory_id(key)
    for bad in [(), ("a.b",), ("a", ""), ("x" * 300,)]:
        with pytest.raises(InvalidNamespaceError):
            namespace_to_workspace(bad)


def test_put_get_update_delete_round_trip_through_the_service(served: tuple[ReMeStore, ReMeClient]) -> None:
    store, client = served
    assert isinstance(store, BaseStore)
    namespace = ("users", "alice")
    store.put(namespace, "food", {"text": "Alice is vegetarian", "n": 1})
    item = store.get(namespace, "food")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (namespace, "food", {"text": "Alice is vegetarian", "n": 1})
    # the item is a memory of the workspace the namespace names, readable by any client of the service
    memory = client.request("GET", "/workspaces/lg%3Ausers.alice/memories/food").json()
    assert memory["metadata"]["langgraph_value"] == {"text": "Alice is vegetarian", "n": 1}
    assert "Alice is vegetarian" in memory["when_to_use"]

    store.put(namespace, "food", {"text": "Alice is vegan", "n": 2})
    updated = store.get(namespace, "food")
    assert updated is not None and updated.value == {"text": "Alice is vegan", "n": 2}
    assert updated.created_at == item.created_at
    assert updated.updated_at >= item.updated_at
    history = client.request("GET", "/workspaces/lg%3Ausers.alice/memories/food/history").json()
    assert [entry["event"] for entry in history] == ["ADD", "UPDATE"]

    store.delete(namespace, "food")
    assert store.get(namespace, "food") is None
    store.delete(namespace, "food")  # deleting what is gone is no error
    assert store.get(("nobody",), "food") is None  # nor is reading a namespace that was never written


def test_search_by_meaning_ranks_within_the_prefix_and_filters(served: tuple[ReMeStore, ReMeClient]) -> None:
    store, _ = served
    store.put(("docs", "a"), "pasta", {"text": "how to cook pasta al dente", "kind": "recipe", "stars": 5})
    store.put(("docs", "a"), "tax", {"text": "filing income tax returns", "kind": "admin", "stars": 2})
    store.put(("docs", "b"), "risotto", {"text": "how to cook a risotto", "kind": "recipe", "stars": 3})
    store.put(("other",), "pasta", {"text": "how to cook pasta al dente", "kind": "recipe", "stars": 5})
    store.put(("docs", "a"), "hidden", {"text": "how to cook pasta al dente"}, index=False)

    hits = store.search(("docs",), query="how to cook pasta al dente", limit=3)
    assert all(isinstance(hit, SearchItem) and hit.score is not None for hit in hits)
    assert [hit.namespace[0] for hit in hits] == ["docs"] * len(hits)
    assert hits[0].key == "pasta" and hits[0].namespace == ("docs", "a")
    # an item put with index=False is kept (get, filter-only search) but never found by meaning
    assert "hidden" not in {hit.key for hit in store.search(("docs",), query="how to cook pasta al dente", limit=10)}
    assert store.get(("docs", "a"), "hidden") is not None
    scores = [hit.score or 0.0 for hit in hits]
    assert scores == sorted(scores, reverse=True)

    recipes = store.search(("docs",), filter={"kind": "recipe"})
    assert sorted(hit.key for hit in recipes) == ["pasta", "risotto"]
    assert [hit.key for hit in store.search(("docs",), filter={"stars": {"$gte": 3, "$lt": 5}})] == ["risotto"]
    assert [hit.key for hit in store.search(("docs", "a"), filter={"kind": {"$ne": "recipe"}, "stars": 2})] == ["tax"]
    everything = store.search(("docs",), limit=10)
    assert len(everything) == 4  # with "hidden"
    assert store.search(("docs",), limit=2, offset=1) == everything[1:3]


def test_list_namespaces_prefix_suffix_wildcards_depth_and_pages(served: tuple[ReMeStore, ReMeClient]) -> None:
    store, client = served
    namespaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "c", "f"), ("b", "a", "f"), ("users", "1")]
    for index, namespace in enumerate(namespaces):
        store.put(namespace, f"k{index}", {"i": index})
    client.vector_store("insert", workspace_id="not_langgraph", memory_dicts=[{"when_to_use": "x", "content": "y"}])

    assert store.list_namespaces() == sorted(namespaces)
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(suffix=("f",)) == [("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "c", "f")]
    assert store.list_namespaces(prefix=("*", "a")) == [("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "c")]
    assert store.list_namespaces(limit=2, offset=1) == sorted(namespaces)[1:3]
    store.delete(("users", "1"), "k4")
    assert ("users", "1") not in store.list_namespaces()  # a namespace without items is not listed


def test_batch_runs_mixed_ops_in_order(served: tuple[ReMeStore, ReMeClient]) -> None:
    store, _ = served
    results = store.batch(
        [
            PutOp(("batch",), "one", {"n": 1}),
            GetOp(("batch",), "one"),
            PutOp(("batch",), "one", None),
            GetOp(("batch",), "one"),
            PutOp(("batch",), "two", {"n": 2}),
            SearchOp(("batch",)),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("batch",)),)),
        ]
    )
    assert results[0] is None and results[2] is None and results[4] is None
    assert results[1] is not None and results[1].value == {"n": 1}  # type: ignore[union-attr]
    assert results[3] is None
    assert [item.key for item in results[5]] == ["two"]  # type: ignore[union-attr]
    assert results[6] == [("batch",)]
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("bad.label",), "k", {"n": 1})])


def test_async_methods_share_the_service_with_the_blocking_ones(served: tuple[ReMeStore, ReMeClient]) -> None:
    store, _ = served

    async def scenario() -> None:
        await asyncio.gather(*(store.aput(("async", "x"), f"k{i}", {"i": i}) for i in range(5)))
        item = await store.aget(("async", "x"), "k3")
        assert item is not None and item.value == {"i": 3}
        assert sorted(hit.key for hit in await store.asearch(("async",), filter={"i": {"$gt": 2}})) == ["k3", "k4"]
        assert await store.alist_namespaces(prefix=("async",)) == [("async", "x")]
        await store.adelete(("async", "x"), "k3")
        assert await store.aget(("async", "x"), "k3") is None
        await store.aclose()

    asyncio.run(scenario())
    assert store.get(("async", "x"), "k4") is not None  # the blocking path sees what the async one wrote


def test_a_compiled_graph_reads_and_writes_memories_through_the_store(served: tuple[ReMeStore, ReMeClient]) -> None:
    from typing import TypedDict

    from langgraph.config import get_store
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        text: str
        recalled: list[str]

    def remember(state: State) -> State:
        store = get_store()
        recalled = [hit.value["text"] for hit in store.search(("users", "u1"), query=state["text"], limit=1)]
        store.put(("users", "u1"), f"note{len(recalled)}", {"text": state["text"]})
        return {"recalled": recalled}

    store, client = served
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    graph = builder.compile(store=store)
    assert graph.invoke({"text": "Alice likes green tea"})["recalled"] == []
    assert graph.invoke({"text": "Alice likes green tea"})["recalled"] == ["Alice likes green tea"]
    page = client.request("GET", "/workspaces/lg%3Ausers.u1/memories").json()
    assert page["total"] == 2
