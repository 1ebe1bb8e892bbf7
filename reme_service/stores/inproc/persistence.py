"""What an in-process store keeps outside RAM: the `Persistence` a `MemoryVectorStore` is given.

The store calls it at fixed points of its work, each under the workspace's write lock (except `exists`,
`list_workspaces` and `touch`), and always before the in-RAM state changes, so what is persisted never lags behind
what a reader can see. `NoPersistence` (backend "memory") keeps nothing; `stores/inproc/local.py`'s `LocalFiles`
(backend "local") keeps a snapshot and a write-ahead log per workspace and lets idle workspaces leave RAM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from reme_service.schema.workspace_ids import WorkspaceId
from reme_service.stores.inproc.workspace import Batch, WorkspaceState


class Persistence(Protocol):
    """The store's persistence. `durable`: whether every workspace in RAM can be loaded again (`load`), so the
    store may let it go (`touch`'s `release`, and on close)."""

    durable: bool

    async def load(self, workspace_id: WorkspaceId) -> WorkspaceState | None:
        """The persisted workspace, or None when there is none."""
        ...

    async def exists(self, workspace_id: WorkspaceId) -> bool: ...

    async def list_workspaces(self) -> list[str]: ...

    async def create(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Persist a new, empty workspace."""
        ...

    async def replace(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Persist `state` whole in place of the workspace's former content."""
        ...

    async def drop(self, workspace_id: WorkspaceId) -> bool:
        """Remove the workspace; whether anything was persisted."""
        ...

    async def log_upsert(self, workspace_id: WorkspaceId, state: WorkspaceState, batch: Batch) -> None:
        """Make `batch` durable before `state` takes it."""
        ...

    async def log_delete(self, workspace_id: WorkspaceId, state: WorkspaceState, ids: list[str]) -> None:
        """Make the delete of `ids` (each in `state`) durable before `state` applies it."""
        ...

    async def after_write(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """`state` has applied a logged write (housekeeping, e.g. a compaction)."""
        ...

    async def ann_ready(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """A build gave `state` its approximate index."""
        ...

    def touch(self, workspace_id: WorkspaceId, state: WorkspaceState, release: Callable[[WorkspaceId], bool]) -> None:
        """`workspace_id` is being used (runs on the event loop, without awaiting). `release(other)` drops another
        workspace from the store's RAM unless a write holds it, and says whether it did."""
        ...

    async def unload(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """The store closes and forgets `state` (a durable persistence only): persist what it must."""
        ...

    async def close(self) -> None:
        """Release what the persistence holds open, after every `unload`."""
        ...


class NoPersistence:
    """Nothing survives the process (backend "memory"): every call is a no-op."""

    durable = False

    async def load(self, workspace_id: WorkspaceId) -> WorkspaceState | None:
        return None

    async def exists(self, workspace_id: WorkspaceId) -> bool:
        return False

    async def list_workspaces(self) -> list[str]:
        return []

    async def create(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        return None

    async def replace(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        return None

    async def drop(self, workspace_id: WorkspaceId) -> bool:
        return False

    async def log_upsert(self, workspace_id: WorkspaceId, state: WorkspaceState, batch: Batch) -> None:
        return None

    async def log_delete(self, workspace_id: WorkspaceId, state: WorkspaceState, ids: list[str]) -> None:
        return None

    async def after_write(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        return None

    async def ann_ready(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        return None

    def touch(self, workspace_id: WorkspaceId, state: WorkspaceState, release: Callable[[WorkspaceId], bool]) -> None:
        return None

    async def unload(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        return None

    async def close(self) -> None:
        return None
