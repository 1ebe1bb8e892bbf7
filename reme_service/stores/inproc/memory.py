"""The in-process vector store (backend "memory"), also the engine under the durable "local" backend.

Each workspace is a `WorkspaceState` (`stores/inproc/workspace.py`: the rows, the nodes and their indexes), searched
by `stores/inproc/search.py`. What is kept outside RAM is the `Persistence` the store is given
(`stores/inproc/persistence.py`): nothing for "memory", a snapshot and a log per workspace for "local"
(`stores/inproc/local.py`).

Concurrency. Writes to one workspace are serialised by an internal per-workspace lock (not `lock()`, which
belongs to callers) and run as shielded tasks, so a cancelled caller never leaves a half-applied write.
Embedding happens before that lock is taken (`stores/inproc/prepare.py`), and the persistence records a write
before RAM changes. Reads and writes share a workspace's arrays through its gate (`stores/inproc/gate.py`): work
over fewer than `INLINE_ROWS` rows runs inline on the event loop, larger work in a worker thread.

The approximate index (`stores/inproc/ann.py`) of a workspace of `ann.min_rows` rows or more is built in the
background while its searches stay exact, and attached under the write lock.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from functools import partial

import numpy as np
from numpy.typing import NDArray

from reme_service.concurrency import OFF_LOOP_ITEMS
from reme_service.providers.embedding.base import EmbeddingClient
from reme_service.schema.vector_node import SearchHit, VectorNode
from reme_service.schema.workspace_ids import WorkspaceId, validate_workspace_id
from reme_service.stores.base import Filter, VectorStore
from reme_service.stores.inproc.ann import AnnIndex
from reme_service.stores.inproc.packed import compile_stored_filter
from reme_service.stores.inproc.persistence import NoPersistence, Persistence
from reme_service.stores.inproc.prepare import prepare_batch
from reme_service.stores.inproc.search import run_search
from reme_service.stores.inproc.workspace import INLINE_ROWS, Batch, WorkspaceState
from reme_service.stores.params import AnnParams, MemoryStoreParams
from reme_service.stores.spaces import EmbeddingSpace, check_space, recorded_space
from reme_service.stores.summary import WorkspaceSummary
from reme_service.stores.vectors import QueryVector, as_query, dimension_error

logger = logging.getLogger(__name__)


class MemoryVectorStore(VectorStore):
    """Workspaces in RAM, persisted by the `persistence` given (none: nothing survives the process). The
    persistence is called under the workspace's write lock, before the in-RAM state changes."""

    backend = "memory"

    def __init__(
        self,
        params: MemoryStoreParams | None = None,
        *,
        embedder: EmbeddingClient,
        persistence: Persistence | None = None,
    ) -> None:
        """`params` is accepted for symmetry with the other backends; a ReMe `store_dir` in it is ignored."""
        super().__init__(embedder=embedder)
        self._spaces: dict[WorkspaceId, WorkspaceState] = {}
        self._persistence: Persistence = persistence if persistence is not None else NoPersistence()
        self.ann_params = params.ann if params is not None else AnnParams()
        self._ann_builds: set[asyncio.Task[None]] = set()
        self._closing = False
        if persistence is None and params is not None and params.store_dir is not None:
            logger.info(
                "vector_store backend memory keeps nothing on disk: params.store_dir (a ReMe setting) is ignored"
            )

    def resident_workspaces(self) -> int | None:
        return len(self._spaces)

    # ----- the approximate index -----

    async def _ensure_ann(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """Give `state` its approximate index when it is big enough and has none: at once below `INLINE_ROWS` rows
        (only with `ann.min_rows` set that low), else built in the background while searches stay exact. Call with
        the workspace's write lock held (no write is under way, so the build's starting point is exact)."""
        min_rows = self.ann_params.min_rows
        if min_rows is None or state.size < min_rows or state.dim is None or self._closing:
            return
        if state.ann is not None or state.ann_dirty is not None:
            return
        if state.size < INLINE_ROWS:
            build = partial(AnnIndex.build, self.ann_params, state.matrix, state.size, lambda: False)
            state.ann = await state.gate.run_exclusive(build, inline=True)
            await self._persistence.ann_ready(workspace_id, state)
            return
        state.ann_dirty = set()
        task = asyncio.ensure_future(self._build_ann(workspace_id, state, state.matrix, state.size))
        self._ann_builds.add(task)
        task.add_done_callback(self._ann_builds.discard)

    async def _build_ann(
        self, workspace_id: WorkspaceId, state: WorkspaceState, matrix: NDArray[np.float32], rows: int
    ) -> None:
        def stop() -> bool:  # the store closes, or the workspace was replaced, dropped or let go of
            return self._closing or self._spaces.get(workspace_id) is not state

        try:
            started = time.perf_counter()
            ann = await AnnIndex.build_in_background(self.ann_params, matrix, rows, stop)
            if ann is None:
                return
            async with self._write_lock(workspace_id):
                if stop():
                    return
                await state.gate.run_exclusive(partial(state.attach_ann, ann), inline=False)
                logger.info(
                    "approximate index of workspace %r: %d rows in %.1f s", workspace_id, rows,
                    time.perf_counter() - started,
                )  # fmt: skip
                await self._persistence.ann_ready(workspace_id, state)
        except Exception:  # searches stay exact; the next write or load tries again
            logger.exception("building the approximate index of workspace %r failed", workspace_id)
        finally:
            if state.ann is None:
                state.ann_dirty = None

    async def close(self) -> None:
        """Stop background index builds (each stops within one batch), then the base's close; a durable store then
        unloads every workspace (its persistence saves what it must) and closes its persistence."""
        self._closing = True
        if self._ann_builds:
            await asyncio.gather(*self._ann_builds, return_exceptions=True)
        await super().close()
        if self._persistence.durable:
            for workspace_id in list(self._spaces):
                async with self._write_lock(workspace_id):
                    state = self._spaces.pop(workspace_id, None)
                    if state is not None:
                        await self._persistence.unload(workspace_id, state)
        await self._persistence.close()

    # ----- plumbing -----

    async def _open(self, workspace_id: WorkspaceId, *, create: bool) -> WorkspaceState | None:
        """The workspace's state, loading or creating it. Call with the workspace's write lock held."""
        state = self._spaces.get(workspace_id)
        if state is None:
            state = await self._persistence.load(workspace_id)
            if state is None and create:
                state = WorkspaceState()
                await self._persistence.create(workspace_id, state)
            if state is not None:
                self._spaces[workspace_id] = state
        if state is not None:
            self._touch(workspace_id, state)
            await self._ensure_ann(workspace_id, state)
        return state

    async def _get(self, workspace_id: WorkspaceId) -> WorkspaceState | None:
        """The workspace's state for a read, loading it if needed; None when it does not exist."""
        state = self._spaces.get(workspace_id)
        if state is not None:
            self._touch(workspace_id, state)
            return state
        if not await self._persistence.exists(workspace_id):
            return None  # (an unknown id gets no lock: reads of made-up ids must not grow `_write_locks`)
        async with self._write_lock(workspace_id):
            return await self._open(workspace_id, create=False)

    def _touch(self, workspace_id: WorkspaceId, state: WorkspaceState) -> None:
        """`workspace_id` is being used: a durable persistence may let idle workspaces leave RAM (`_release`)."""
        self._persistence.touch(workspace_id, state, self._release)

    def _release(self, workspace_id: WorkspaceId) -> bool:
        """Forget a workspace's state unless its write lock is held (a write, a load or a compaction under way);
        readers already running keep the state they hold. Only for a durable persistence: it is on disk."""
        lock = self._write_locks.get(workspace_id)
        if lock is not None and lock.locked():
            return False
        self._spaces.pop(workspace_id, None)
        return True

    # ----- writes -----

    async def create_workspace(self, workspace_id: str) -> None:
        workspace_id = validate_workspace_id(workspace_id)
        if workspace_id not in self._spaces:
            await self._shielded(self._commit_create(workspace_id))

    async def _commit_create(self, workspace_id: WorkspaceId) -> None:
        async with self._write_lock(workspace_id):
            await self._open(workspace_id, create=True)

    async def delete_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return await self._shielded(self._commit_drop(workspace_id))

    async def _commit_drop(self, workspace_id: WorkspaceId) -> bool:
        async with self._write_lock(workspace_id):
            existed = self._spaces.pop(workspace_id, None) is not None
            return await self._persistence.drop(workspace_id) or existed

    async def upsert(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is not None and state.size:  # refused before embedding; checked again under the write lock
            check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "write to")
        batch = await prepare_batch(self.embedder, workspace_id, nodes, state.dim if state is not None else None)
        batch.space = self.space
        return await self._shielded(self._commit_upsert(workspace_id, batch))

    async def _commit_upsert(self, workspace_id: WorkspaceId, batch: Batch) -> int:
        async with self._write_lock(workspace_id):
            state = await self._open(workspace_id, create=True)
            assert state is not None
            if batch.dim is None or not batch.nodes:
                return 0
            if state.size:
                check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "write to")
            if state.dim is not None and state.dim != batch.dim:
                raise dimension_error(workspace_id, state.dim, batch.dim, "the batch's vectors")
            await self._persistence.log_upsert(workspace_id, state, batch)
            await self._apply_upsert(state, batch, batch.dim)
            self._touch(workspace_id, state)  # its size changed
            await self._persistence.after_write(workspace_id, state)
            await self._ensure_ann(workspace_id, state)
        return len(batch.nodes)

    async def _apply_upsert(self, state: WorkspaceState, batch: Batch, dim: int) -> None:
        """Put a persisted `batch` (of dimension `dim`) into `state`: the one step of an upsert that changes RAM."""
        small = state.size < INLINE_ROWS and len(batch.nodes) < INLINE_ROWS
        needed = state.size + state.count_new(node.unique_id for node in batch.nodes)
        grow = partial(state.grown, needed, dim)
        matrix = grow() if small else await asyncio.to_thread(grow)  # copying only reads: readers may run
        apply = partial(state.apply_upsert, batch.nodes, batch.vectors, dim=dim, matrix=matrix)
        await state.gate.run_exclusive(apply, inline=len(batch.nodes) < INLINE_ROWS)
        state.space = batch.space  # persisted with the batch: a workspace without a space adopts it atomically
        if state.nodes.should_compress():  # once, when the workspace grows past the threshold
            await state.gate.run_exclusive(state.nodes.compress, inline=False)

    async def delete_ids(self, workspace_id: str, ids: Sequence[str]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        unique = list(dict.fromkeys(ids))
        if not unique or await self._get(workspace_id) is None:
            return 0
        return await self._shielded(self._commit_delete(workspace_id, unique))

    async def _commit_delete(self, workspace_id: WorkspaceId, ids: list[str]) -> int:
        async with self._write_lock(workspace_id):
            state = await self._open(workspace_id, create=False)
            present = [uid for uid in ids if uid in state.rows] if state is not None else []
            if state is None or not present:
                return 0
            await self._persistence.log_delete(workspace_id, state, present)
            delete = partial(state.apply_delete, present)
            deleted = await state.gate.run_exclusive(delete, inline=len(present) < INLINE_ROWS)
            self._touch(workspace_id, state)  # its size changed
            await self._persistence.after_write(workspace_id, state)
        return deleted

    async def replace_workspace(self, workspace_id: str, nodes: Sequence[VectorNode]) -> int:
        workspace_id = validate_workspace_id(workspace_id)
        batch = await prepare_batch(self.embedder, workspace_id, nodes, None)
        batch.space = self.space
        build = partial(WorkspaceState.build, batch)
        state = build() if len(batch.nodes) < INLINE_ROWS else await asyncio.to_thread(build)
        return await self._shielded(self._commit_replace(workspace_id, state))

    async def _commit_replace(self, workspace_id: WorkspaceId, state: WorkspaceState) -> int:
        async with self._write_lock(workspace_id):
            await self._persistence.replace(workspace_id, state)
            self._spaces[workspace_id] = state  # readers still running keep the old state
            self._touch(workspace_id, state)
            await self._ensure_ann(workspace_id, state)  # a big load is searchable (exactly) before its index is built
        return state.size

    # ----- reads -----

    async def exists_workspace(self, workspace_id: str) -> bool:
        workspace_id = validate_workspace_id(workspace_id)
        return workspace_id in self._spaces or await self._persistence.exists(workspace_id)

    async def list_workspaces(self) -> list[str]:
        return sorted(set(self._spaces) | set(await self._persistence.list_workspaces()))

    async def get(self, workspace_id: str, ids: Sequence[str]) -> list[VectorNode]:
        """The nodes that exist, in the order asked, with their vectors."""
        workspace_id = validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or not ids:
            return []
        return await state.gate.run_shared(partial(state.get, list(ids)), inline=len(ids) < INLINE_ROWS)

    async def search_vector(
        self,
        workspace_id: str,
        vector: QueryVector,
        *,
        top_k: int,
        filter: Filter | None = None,
        exact: bool = False,
    ) -> list[SearchHit]:
        workspace_id = validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.dim is None or state.size == 0 or top_k <= 0:
            return []
        check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
        query = as_query(vector, workspace_id, state.dim)
        return await self._counted(workspace_id, state, run_search(state, query, top_k, predicate, exact))

    async def search_hybrid(
        self,
        workspace_id: str,
        query: str,
        *,
        top_k: int,
        filter: Filter | None = None,
        lexical_weight: float = 0.3,
        exact: bool = False,
        vector: QueryVector | None = None,
    ) -> list[SearchHit]:
        workspace_id = validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.dim is None or state.size == 0 or top_k <= 0:
            return []
        check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
        dim = state.dim
        if vector is None:
            vector = (await self.embedder.embed([query]))[0]
            state = await self._get(workspace_id)  # the workspace may have been replaced while embedding
            if state is None or state.dim is None or state.size == 0:
                return []
            check_space(workspace_id, recorded_space(state.space, state.dim), self.space, "search")
            dim = state.dim
        query_vector = as_query(vector, workspace_id, dim)
        search = run_search(state, query_vector, top_k, predicate, exact, text=query, weight=lexical_weight)
        return await self._counted(workspace_id, state, search)

    async def _counted(
        self, workspace_id: WorkspaceId, state: WorkspaceState, search: Awaitable[list[SearchHit]]
    ) -> list[SearchHit]:
        """The hits of `search` (a `run_search` of `state`), then the workspace used again: the search may have
        built its int8 copy, its BM25 index or kept BM25 scores, which count in a persistent store's RAM estimate
        at once (`_touch`)."""
        hits = await search
        if self._spaces.get(workspace_id) is state:
            self._touch(workspace_id, state)
        return hits

    async def workspace_space(self, workspace_id: str) -> EmbeddingSpace | None:
        workspace_id = validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        return recorded_space(state.space, state.dim) if state is not None and state.size else None

    async def list_ids(self, workspace_id: str) -> list[str]:
        """The ids alone, sorted, without decoding any node's metadata (the management API pages and exports by
        them); the sorted order is kept between calls until the set of ids changes."""
        workspace_id = validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return []
        return await state.gate.run_shared(state.sorted_ids, inline=state.size < INLINE_ROWS * 16)

    async def summarize(self, workspace_id: str) -> WorkspaceSummary:
        """From the stored metadata, without making a node, counted once and then kept up to date by the writes
        (`WorkspaceState.summarize`); a count of more than `OFF_LOOP_ITEMS` rows runs in a worker thread."""
        workspace_id = validate_workspace_id(workspace_id)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return WorkspaceSummary()
        inline = state.size <= OFF_LOOP_ITEMS or state.summary_kept()
        return await state.gate.run_shared(state.summarize, inline=inline)

    async def list_nodes(
        self, workspace_id: str, *, filter: Filter | None = None, with_vectors: bool = False
    ) -> list[VectorNode]:
        workspace_id = validate_workspace_id(workspace_id)
        predicate = compile_stored_filter(filter)
        state = await self._get(workspace_id)
        if state is None or state.size == 0:
            return []
        work = partial(state.export, predicate, with_vectors)
        return await state.gate.run_shared(work, inline=state.size < INLINE_ROWS)
