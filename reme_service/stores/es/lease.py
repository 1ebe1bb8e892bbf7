"""Lease records for `shared_lock.SharedLock` in an Elasticsearch index (`<prefix>_locks`).

Elasticsearch has true conditional writes: a bulk `create` fails with 409 when the id exists, and `index` or
`delete` with `if_seq_no` / `if_primary_term` fail with 409 unless the document is still at that version. A
claim is a `create` (on success the holder is us, at the version the response names; on 409 the holder is read
back with a realtime `mget`), a renewal an `index` conditional on the version we hold, a release a conditional
`delete`. The index is created by the first claim (Elasticsearch's automatic index creation, with its dynamic
mapping; nothing searches it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from elasticsearch import AsyncElasticsearch

from reme_service.errors import StoreError
from reme_service.stores.shared_lock import LeaseHolder

Guard = Callable[[str], AbstractAsyncContextManager[None]]
_CONFLICT = 409


class EsLeases:
    """The `LeaseBackend` of the Elasticsearch store: one document per locked workspace, id = the workspace id."""

    def __init__(self, es: AsyncElasticsearch, index: str, guard: Guard) -> None:
        self.es = es
        self.index = index
        self.guard = guard

    async def _item(self, action: str, meta: dict[str, Any], source: dict[str, Any] | None) -> dict[str, Any]:
        operations: list[dict[str, Any]] = [{action: {"_index": self.index, **meta}}]
        if source is not None:
            operations.append(source)
        async with self.guard(f"lock {action}"):
            response = await self.es.bulk(operations=operations)
        item: dict[str, Any] = next(iter(response.body["items"][0].values()))
        return item

    @staticmethod
    def _failed(item: dict[str, Any], what: str) -> StoreError:
        error = item.get("error") or {}
        return StoreError(f"elasticsearch: {what} failed ({item.get('status')}): {error.get('reason', error)}")

    async def holder(self, key: str) -> LeaseHolder | None:
        """The current holder of `key`'s lease; None when nobody holds it."""
        async with self.guard("lock read"):
            response = await self.es.mget(index=self.index, ids=[key])
        doc = response.body["docs"][0]
        if not doc.get("found"):
            return None
        source = doc.get("_source") or {}
        expires = source.get("expires")
        return LeaseHolder(
            str(source.get("owner", "")),
            float(expires) if isinstance(expires, int | float) else 0.0,
            (doc.get("_seq_no"), doc.get("_primary_term")),
        )

    async def claim(self, key: str, owner: str, expires: float) -> LeaseHolder | None:
        item = await self._item("create", {"_id": key}, {"owner": owner, "expires": expires})
        if "error" not in item:
            return LeaseHolder(owner, expires, (item.get("_seq_no"), item.get("_primary_term")))
        if item.get("status") != _CONFLICT:
            raise self._failed(item, "taking a workspace lock")
        return await self.holder(key)

    def _condition(self, key: str, holder: LeaseHolder) -> dict[str, Any]:
        seq_no, primary_term = holder.version if isinstance(holder.version, tuple) else (None, None)
        if seq_no is None or primary_term is None:
            raise StoreError(f"elasticsearch: the lock record of {key!r} carries no version")
        return {"_id": key, "if_seq_no": seq_no, "if_primary_term": primary_term}

    async def renew(self, key: str, holder: LeaseHolder, expires: float) -> LeaseHolder | None:
        item = await self._item("index", self._condition(key, holder), {"owner": holder.owner, "expires": expires})
        if "error" in item:
            if item.get("status") in (_CONFLICT, 404):
                return None
            raise self._failed(item, "renewing a workspace lock")
        return LeaseHolder(holder.owner, expires, (item.get("_seq_no"), item.get("_primary_term")))

    async def drop(self, key: str, holder: LeaseHolder) -> None:
        item = await self._item("delete", self._condition(key, holder), None)
        if "error" in item and item.get("status") not in (_CONFLICT, 404):
            raise self._failed(item, "releasing a workspace lock")
