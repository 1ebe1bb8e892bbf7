"""Lease records for `shared_lock.SharedLock` in a Chroma collection (`<prefix>_locks`, one-dimensional records).

Chroma offers what the protocol needs: `add` of an id that exists leaves the existing record alone (the server
applies writes one at a time, so of several processes adding one id exactly one record survives), a `get` after
a write sees it, and `delete(ids=..., where={"owner": ...})` removes a record only while it names that owner.
Renewal reads the record and updates its expiry when it is still ours; it cannot race with a takeover, which
needs the expiry to have passed (renewals run every third of the lease).
"""

from __future__ import annotations

from typing import Any

from reme_service.stores.chroma.client import ChromaConnection, is_not_found
from reme_service.stores.shared_lock import LeaseHolder

_ROLE_KEY = "reme_role"


class ChromaLeases:
    """The `LeaseBackend` of the Chroma store: one record per locked workspace, id = the workspace id."""

    def __init__(self, conn: ChromaConnection, collection: str) -> None:
        self.conn = conn
        self.collection = collection
        self._handle: Any = None

    async def _call(self, method: str, **kwargs: Any) -> Any:
        """Run a collection method, creating the collection on first use and again if it was dropped."""
        for attempt in (0, 1):
            if self._handle is None:
                client = await self.conn.client()
                self._handle = await self.conn.call(
                    client,
                    "get_or_create_collection",
                    self.collection,
                    metadata={_ROLE_KEY: "locks"},
                    embedding_function=None,
                )
            try:
                return await self.conn.call(self._handle, method, **kwargs)
            except Exception as exc:
                if attempt or not is_not_found(exc):
                    raise
                self._handle = None
        raise AssertionError("unreachable")

    async def holder(self, key: str) -> LeaseHolder | None:
        """The current holder of `key`'s lease; None when nobody holds it."""
        got = await self._call("get", ids=[key], include=["metadatas"])
        if not got["ids"]:
            return None
        record = (got.get("metadatas") or [None])[0] or {}
        expires = record.get("expires")
        return LeaseHolder(str(record.get("owner", "")), float(expires) if isinstance(expires, int | float) else 0.0)

    async def claim(self, key: str, owner: str, expires: float) -> LeaseHolder | None:
        await self._call("add", ids=[key], embeddings=[[1.0]], metadatas=[{"owner": owner, "expires": expires}])
        return await self.holder(key)

    async def renew(self, key: str, holder: LeaseHolder, expires: float) -> LeaseHolder | None:
        current = await self.holder(key)
        if current is None or current.owner != holder.owner:
            return None
        await self._call("update", ids=[key], metadatas=[{"owner": holder.owner, "expires": expires}])
        return LeaseHolder(holder.owner, expires)

    async def drop(self, key: str, holder: LeaseHolder) -> None:
        await self._call("delete", ids=[key], where={"owner": holder.owner})
