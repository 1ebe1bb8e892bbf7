"""The connection to Chroma: a server through `chromadb.AsyncHttpClient`, or an embedded `chromadb.PersistentClient`
whose synchronous calls run in worker threads. `chromadb` is imported only when a Chroma store is used.

Both look alike to the store: `await conn.call(obj, "method", **kwargs)` runs a client or collection method with
the timeout applied (server mode) and every Chroma, HTTP or timeout failure turned into `StoreError` (503) with
the reason, or `DimensionMismatchError` (400) when Chroma refuses a vector's dimension.

A server that is down when the service starts does not stop it: `client()` connects on demand (a plain heartbeat
probe first, so failed attempts leave no client state behind), and every call after a successful connection
reaches the server again as soon as it is back.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from reme_service.errors import DimensionMismatchError, ReMeError, StoreError
from reme_service.stores.params import ChromaStoreParams

logger = logging.getLogger(__name__)

_DIMENSION_RE = re.compile(r"dimension of (\d+), got (\d+)")


def _chroma_errors() -> tuple[type[BaseException], ...]:
    from chromadb.errors import ChromaError

    return (ChromaError, httpx.HTTPError, ValueError, OSError, RuntimeError)


def is_not_found(exc: BaseException) -> bool:
    """Whether Chroma said the collection does not exist."""
    from chromadb.errors import NotFoundError

    if isinstance(exc, ReMeError):
        return False
    return isinstance(exc, NotFoundError) or "does not exist" in str(exc)


class ChromaConnection:
    """One Chroma client (server or embedded), created on first use and shared by every call."""

    def __init__(self, params: ChromaStoreParams, *, store_dir: Path | None) -> None:
        """Server mode when `params.host` is set, else an embedded Chroma in `store_dir` (resolved by the store)."""
        self.params = params
        self.host = params.host or None
        self.port, self.timeout = params.port, params.timeout
        self.store_dir = store_dir if self.host is None else None
        self._client: Any = None
        self._connecting = asyncio.Lock()

    @property
    def embedded(self) -> bool:
        return self.host is None

    @property
    def where(self) -> str:
        if self.embedded:
            return f"embedded chroma at {self.store_dir}"
        return f"chroma server at {'https' if self.params.ssl else 'http'}://{self.host}:{self.port}"

    async def client(self) -> Any:
        """The client, connecting first when needed; StoreError when Chroma cannot be reached."""
        if self._client is None:
            async with self._connecting:
                if self._client is None:
                    self._client = await self._connect()
        return self._client

    async def _connect(self) -> Any:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        try:
            if self.embedded:
                assert self.store_dir is not None
                await asyncio.to_thread(self.store_dir.mkdir, parents=True, exist_ok=True)
                return await asyncio.to_thread(
                    chromadb.PersistentClient,
                    path=str(self.store_dir),
                    settings=settings,
                    tenant=self.params.tenant,
                    database=self.params.database,
                )
            url = f"{'https' if self.params.ssl else 'http'}://{self.host}:{self.port}/api/v2/heartbeat"
            async with httpx.AsyncClient(timeout=self.timeout) as probe:
                (await probe.get(url, headers=self.params.headers)).raise_for_status()
            async with asyncio.timeout(self.timeout):
                return await chromadb.AsyncHttpClient(
                    host=str(self.host),
                    port=self.port,
                    ssl=self.params.ssl,
                    headers=self.params.headers,
                    settings=settings,
                    tenant=self.params.tenant,
                    database=self.params.database,
                )
        except TimeoutError as exc:
            raise StoreError(f"{self.where} did not answer within {self.timeout:g} s") from exc
        except Exception as exc:  # noqa: BLE001 - any failure to connect means "unavailable"
            raise StoreError(f"{self.where} is unreachable: {type(exc).__name__}: {exc}") from exc

    @asynccontextmanager
    async def guard(self, action: str) -> AsyncIterator[None]:
        """Turn failures inside the block into StoreError / DimensionMismatchError naming `action`."""
        try:
            yield
        except ReMeError:
            raise
        except TimeoutError as exc:
            raise StoreError(f"{self.where}: {action} timed out after {self.timeout:g} s") from exc
        except _chroma_errors() as exc:
            if is_not_found(exc):
                raise
            match = _DIMENSION_RE.search(str(exc))
            if match:
                expected, actual = int(match.group(1)), int(match.group(2))
                raise DimensionMismatchError(
                    f"{action}: a vector has dimension {actual}, but the Chroma collection holds vectors of "
                    f"dimension {expected}",
                    details={"expected": expected, "actual": actual},
                ) from exc
            if isinstance(exc, httpx.TransportError):
                raise StoreError(f"{self.where} is unreachable ({action}): {type(exc).__name__}: {exc}") from exc
            raise StoreError(f"{self.where}: {action} failed: {type(exc).__name__}: {exc}") from exc

    async def call(self, obj: Any, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """`obj.method(*args, **kwargs)`: in a worker thread (embedded) or awaited with the timeout (server).
        Chroma's NotFoundError passes through unchanged (the store decides what a missing collection means)."""
        async with self.guard(method):
            if self.embedded:
                return await asyncio.to_thread(getattr(obj, method), *args, **kwargs)
            async with asyncio.timeout(self.timeout):
                return await getattr(obj, method)(*args, **kwargs)

    async def heartbeat(self) -> None:
        client = await self.client()
        await self.call(client, "heartbeat")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if self.embedded:
                await asyncio.to_thread(client.close)
            else:
                await close_async_http_client(client)
        except Exception:  # noqa: BLE001 - closing is best effort
            logger.warning("error while closing the %s client", self.where, exc_info=True)


async def close_async_http_client(client: Any) -> None:
    """Close the httpx client the chromadb async client opened for this event loop. chromadb keeps those in a
    class-level dict keyed by event loop and offers no public close; left open, a later event loop could inherit
    a client bound to a closed one."""
    server = getattr(client, "_server", None)
    clients = getattr(type(server), "_clients", None)
    if not isinstance(clients, dict):
        return
    http = clients.pop(hash(asyncio.get_running_loop()), None)
    if http is not None:
        await http.aclose()
