"""`ReMeStore`: LangGraph's `BaseStore` over the memory service's HTTP API.

Each namespace is a workspace (`namespaces.py` says how the tuple becomes its id) and each item one task memory of
it: the key is the memory id, the value is kept whole in the memory's `metadata.langgraph_value` and as JSON in its
`content` (readable in /ui), and the text the service embeds (`when_to_use`) is the value's indexed fields: the
put's `index` paths, else the store's `index_fields`, else the whole value as JSON; an item put with `index=False`
is kept but never returned by a search with a `query`. `created_at` / `updated_at` are the memory's
`time_created` / `time_modified` (the server's local time, to the second).

- `get`, `put` (create, or update keeping `created_at`), `delete`: one memory through the management API.
- `search(prefix, query=...)`: the service's vector search (`retrieve_task_memory`, at most 50 candidates per
  namespace) in every namespace under the prefix, ranked by similarity (`SearchItem.score`); without a query, the
  items newest first. `filter` (exact values, dotted paths, `$eq` `$ne` `$gt` `$gte` `$lt` `$lte`) is applied here.
- `list_namespaces`: the namespaces that hold items, from the workspaces the API key covers.

Ops of a `batch` run in order. `abatch` runs on the caller's event loop; `batch` (and the blocking `get`, `put`, ...)
on a loop thread of the store's own. TTLs are not supported (`supports_ttl = False`).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import get_text_at_path

from reme_service.client import DEFAULT_BASE_URL, AsyncReMeClient, error_from_response
from reme_service.integrations.langgraph.matching import has_prefix, matches_filter, select_namespaces
from reme_service.integrations.langgraph.namespaces import (
    DEFAULT_PREFIX,
    key_to_memory_id,
    memory_id_to_key,
    namespace_to_workspace,
    workspace_to_namespace,
)
from reme_service.loop_thread import LoopThread

VALUE_FIELD = "langgraph_value"  # metadata field holding the item's value
INDEXED_FIELD = "langgraph_indexed"  # false for an item put with index=False
MAX_TOP_K = 50  # the retrieval flows' top_k bound
PAGE = 500  # the management API's largest page
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def _time(text: Any) -> datetime:
    try:
        return datetime.strptime(str(text), TIME_FORMAT).astimezone()
    except ValueError:
        return datetime.now().astimezone()


class _Session:
    """The store's HTTP calls over one `AsyncReMeClient` (bound to one event loop)."""

    def __init__(self, client: AsyncReMeClient, prefix: str, index_fields: list[str] | None) -> None:
        self.client = client
        self.prefix = prefix
        self.index_fields = index_fields

    async def _json(self, method: str, path: str, body: Any = None, *, missing_ok: bool = False) -> Any:
        response = await self.client.request(method, path, body)
        if missing_ok and response.status_code == 404:
            return None
        if response.status_code not in (200, 201):
            raise error_from_response(response)
        return response.json()

    def _item(self, namespace: tuple[str, ...], memory: Mapping[str, Any], score: float | None = None) -> SearchItem:
        """The memory as a LangGraph item (a `SearchItem`, scored when it came from a search by meaning)."""
        metadata = memory.get("metadata") or {}
        return SearchItem(
            namespace,
            memory_id_to_key(str(memory["memory_id"])),
            dict(metadata.get(VALUE_FIELD) or {}),
            _time(memory.get("time_created")),
            _time(memory.get("time_modified")),
            score,
        )

    async def run(self, op: Op) -> Result:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return await self.get(op)
        if isinstance(op, PutOp):
            await (self.delete(op) if op.value is None else self.put(op))
            return None
        if isinstance(op, SearchOp):
            return await self.search(op)
        if isinstance(op, ListNamespacesOp):
            return select_namespaces(await self.namespaces(), op.match_conditions, op.max_depth, op.limit, op.offset)
        raise TypeError(f"unknown store op {type(op).__name__}")

    def _memory_path(self, namespace: tuple[str, ...], key: str) -> str:
        workspace = quote(namespace_to_workspace(namespace, self.prefix), safe="")
        if not key:
            raise ValueError("an item's key must not be empty")
        return f"/workspaces/{workspace}/memories/{quote(key_to_memory_id(key), safe='')}"

    async def get(self, op: GetOp) -> Item | None:
        memory = await self._json("GET", self._memory_path(op.namespace, op.key), missing_ok=True)
        if memory is None:
            return None
        item = self._item(op.namespace, memory)
        return Item(
            value=item.value,
            key=item.key,
            namespace=item.namespace,
            created_at=item.created_at,
            updated_at=item.updated_at,
        )

    def _indexed_text(self, key: str, value: Mapping[str, Any], index: Any) -> tuple[str, bool]:
        if index is False:
            return key, False
        paths = index if isinstance(index, list) else self.index_fields
        if not paths:
            return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), True
        texts = [text for path in paths for text in get_text_at_path(value, path)]
        return "\n".join(texts) or key, True

    async def put(self, op: PutOp) -> None:
        assert op.value is not None
        value = dict(op.value)
        text, indexed = self._indexed_text(op.key, value, op.index)
        fields = {
            "when_to_use": text,
            "content": json.dumps(value, ensure_ascii=False, default=str),
            "metadata": {VALUE_FIELD: value, INDEXED_FIELD: indexed},
        }
        path = self._memory_path(op.namespace, op.key)
        response = await self.client.request("PATCH", path, fields)
        if response.status_code == 404:  # a new item: create it (a concurrent create wins the 409, then patch)
            workspace = path.rsplit("/memories/", 1)[0]
            memory = {"memory_type": "task", "memory_id": key_to_memory_id(op.key), **fields}
            response = await self.client.request("POST", f"{workspace}/memories", memory)
            if response.status_code == 409:
                response = await self.client.request("PATCH", path, fields)
        if response.status_code not in (200, 201):
            raise error_from_response(response)

    async def delete(self, op: PutOp) -> None:
        await self._json("DELETE", self._memory_path(op.namespace, op.key), missing_ok=True)

    async def _workspaces(self) -> list[dict[str, Any]]:
        """Every workspace the key covers (the management API's pages)."""
        found: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = urlencode({"limit": PAGE, **({"cursor": cursor} if cursor else {})})
            page = await self._json("GET", f"/workspaces?{query}")
            found.extend(page["workspaces"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    async def namespaces(self) -> list[tuple[str, ...]]:
        """The namespaces that hold at least one item."""
        result = []
        for summary in await self._workspaces():
            namespace = workspace_to_namespace(summary["workspace_id"], self.prefix)
            if namespace is not None and summary.get("size", 0) > 0:
                result.append(namespace)
        return result

    async def _all_memories(self, workspace_id: str) -> list[dict[str, Any]]:
        memories: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = {"limit": PAGE, "sort": "-time_modified", **({"cursor": cursor} if cursor else {})}
            path = f"/workspaces/{quote(workspace_id, safe='')}/memories?{urlencode(params)}"
            page = await self._json("GET", path, missing_ok=True)
            if page is None:
                return memories
            memories.extend(page["memories"])
            cursor = page.get("next_cursor")
            if not cursor:
                return memories

    async def search(self, op: SearchOp) -> list[SearchItem]:
        spaces = [ns for ns in await self.namespaces() if has_prefix(ns, op.namespace_prefix)]
        found: list[SearchItem] = []
        for namespace in spaces:
            workspace_id = namespace_to_workspace(namespace, self.prefix)
            scored: list[tuple[dict[str, Any], float | None]]
            if op.query:
                hits = await self.client.retrieve_task_memory(op.query, top_k=MAX_TOP_K, workspace_id=workspace_id)
                indexed = [m for m in hits.memory_list if (m.get("metadata") or {}).get(INDEXED_FIELD, True)]
                scored = [(m, float(m.get("relevance") or 0.0)) for m in indexed]
            else:
                scored = [(m, None) for m in await self._all_memories(workspace_id)]
            for memory, score in scored:
                item = self._item(namespace, memory, score)
                if matches_filter(item.value, op.filter):
                    found.append(item)
        if op.query:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda item: (item.updated_at, item.namespace, item.key), reverse=True)
        return found[op.offset : op.offset + op.limit]


class ReMeStore(BaseStore):
    """A LangGraph store kept in the memory service (see the module docstring).

    ```python
    from reme_service.integrations.langgraph import ReMeStore

    store = ReMeStore("http://127.0.0.1:8002", api_key="...")
    store.put(("users", "alice"), "food", {"text": "Alice is vegetarian"})
    store.search(("users", "alice"), query="what does alice eat?")
    graph = builder.compile(store=store)
    ```

    `api_key` defaults to `REME_API_KEY`; `prefix` keeps this store's workspaces apart from others (`lg:`);
    `index_fields` are the value paths embedded when a put names none (default: the whole value). Call `close()`
    (or `await aclose()`) when done.
    """

    supports_ttl = False

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        prefix: str = DEFAULT_PREFIX,
        index_fields: list[str] | None = None,
        timeout: float = 120.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._settings: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "headers": headers}
        self.base_url = base_url
        self.prefix = prefix
        self.index_fields = index_fields
        self._thread: LoopThread | None = None
        self._thread_session: _Session | None = None
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Session] = weakref.WeakKeyDictionary()

    def _session(self) -> _Session:
        client = AsyncReMeClient(self.base_url, **self._settings)
        return _Session(client, self.prefix, self.index_fields)

    async def _run_all(self, session: _Session, ops: Iterable[Op]) -> list[Result]:
        return [await session.run(op) for op in ops]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order on the store's own loop thread; one result per op (None for a put)."""
        if self._thread is None:
            self._thread = LoopThread("reme-langgraph-store")
        if self._thread_session is None:
            self._thread_session = self._thread.run(_make(self._session))
        return self._thread.run(self._run_all(self._thread_session, list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run `ops` in order on the running loop; one result per op (None for a put)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None:
            session = self._sessions[loop] = self._session()
        return await self._run_all(session, list(ops))

    def close(self) -> None:
        """Close the loop thread's connections and the thread (connections of `abatch`: `aclose`)."""
        if self._thread is not None:
            if self._thread_session is not None:
                self._thread.run(self._thread_session.client.aclose())
            self._thread.close()
        self._thread = self._thread_session = None

    async def aclose(self) -> None:
        """Close the connections `abatch` opened on the running loop, and `close()` the rest."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.client.aclose()
        await asyncio.to_thread(self.close)


async def _make(factory: Any) -> _Session:
    """`factory()` called on the running loop (the client it builds belongs to that loop)."""
    session: _Session = factory()
    return session


__all__ = ["ReMeStore"]
