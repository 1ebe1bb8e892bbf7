"""A store write, recorded to its writer's audit trail (`GuardedStore` calls these for the four writes).

Each first looks up which of the ids exist (to tell added from changed, and to report only ids a delete really
removed), runs the write on the backend, then adds to the trail. The nodes that lookup returns are the
before-values of the memories' history (`history/entry.py`): when the trail keeps history, an entry is added per
memory written or deleted, and deleted memories (or a dropped or replaced workspace) are marked for scrubbing. An
update that sets a memory's `valid_to` is an INVALIDATE. The backend's own calls (a `replace_workspace` built on its
`upsert`) happen inside it and are not seen here, so a write is reported once.

With a `Journal` whose database the backend's transactions run in (the PostgreSQL state beside a pgvector store),
the history entries and a draft of the request's audit record are made before the write and run inside its
transaction (`stores/joined.py`), instead of waiting in the trail for the recorder: they are committed with the
memories, or not at all (`_write`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from reme_service.audit.trail import AuditTrail
from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.history.entry import VALID_TO, HistoryEntry, HistoryStep, Scrub, written
from reme_service.schema.vector_node import VectorNode
from reme_service.storage.writer import Writer
from reme_service.stores.base import VectorStore
from reme_service.stores.joined import JoinsTransactions, TransactionWork
from reme_service.stores.vectors import latest_by_id


class Journal(Protocol):
    """What can write a request's history entries and audit drafts in a store's own transactions
    (`state.pg.records.PgJournal`, with a pgvector store on its database)."""

    def joins(self, store: object) -> bool: ...

    async def ready(self) -> None: ...

    @property
    def audit(self) -> bool: ...

    def work(self, workspace_id: str, steps: Sequence[HistoryStep], record: Any, token: str) -> TransactionWork: ...


#: a write of the backend, through the store it is given (the backend, or its view joined by the history's work)
Write = Callable[[VectorStore], Awaitable[Any]]


async def _existing(store: VectorStore, workspace_id: str, ids: Sequence[str]) -> dict[str, VectorNode]:
    if not ids:
        return {}
    return {node.unique_id: node for node in await store.get(workspace_id, list(ids))}


def _common(writer: Writer) -> dict[str, Any]:
    return {"request_id": writer.request_id, "flow": writer.flow, "key_id": writer.key_id}


def _upsert_entries(writer: Writer, nodes: Sequence[VectorNode], before: dict[str, VectorNode]) -> list[HistoryEntry]:
    """The history entries of an upsert. An id the batch repeats is one write, of its last version, as the stores
    apply it (`stores/vectors.latest_by_id`): one entry, not one per repeat."""
    common = _common(writer)
    return [e for node in latest_by_id(nodes) if (e := written(before.get(node.unique_id), node, **common)) is not None]


def _invalidated(nodes: Sequence[VectorNode], before: dict[str, VectorNode]) -> list[str]:
    """The ids an upsert marked no longer true (`valid_to` newly set), without history entries to read it from."""
    return [
        node.unique_id
        for node in latest_by_id(nodes)
        if (old := before.get(node.unique_id)) is not None
        and node.metadata.get(VALID_TO)
        and not old.metadata.get(VALID_TO)
    ]


def _deletions(writer: Writer, ids: list[str], *, whole_workspace: bool = False) -> list[HistoryStep]:
    """DELETE entries of `ids`, then the scrub of their history's text (of the whole workspace's with
    `whole_workspace`)."""
    common = _common(writer)
    steps: list[HistoryStep] = [HistoryEntry(event="DELETE", memory_id=i, **common) for i in ids]
    if whole_workspace or ids:
        steps.append(Scrub(None if whole_workspace else frozenset(ids)))
    return steps


async def _write(
    store: VectorStore,
    journal: Journal | None,
    writer: Writer,
    workspace_id: str,
    steps: list[HistoryStep],
    write: Write,
    apply: Callable[[AuditTrail], None],
    changed: Callable[[Any], bool] = lambda _: True,
) -> Any:
    """Run `write`; once it succeeded and `changed` its result, `apply` its changes to the trail.

    With a journal the store joins, the write's history `steps` and a draft of the request's audit record as of this
    write (the trail with `apply` applied: `AuditTrail.draft`) run in the write's own transaction, committed or
    rolled back with the memories; the recorder then appends the final record only if it differs from the last
    draft committed. Otherwise the steps go to the trail, for the recorder to write after the write."""
    trail = writer.trail
    drafting = journal is not None and journal.audit and trail.draft is not None
    if journal is None or not (steps or drafting) or not isinstance(store, JoinsTransactions):
        result = await write(store)
        if changed(result):
            _record(writer, workspace_id, steps)
            apply(trail)
        return result
    await journal.ready()
    record = trail.draft(trail.projected(apply)) if drafting and trail.draft is not None else None
    work = journal.work(workspace_id, steps, record, trail.token)
    ran: list[bool] = []

    async def then(conn: Any) -> None:
        await work(conn)
        ran.append(True)

    trail.draft_begins()
    try:
        result = await write(store.joined(then))
    except BaseException:
        trail.draft_ends(None)  # rolled back (or, cancelled, left to commit alone: then its draft is its record)
        raise
    trail.draft_ends(record if ran else None)  # (a write to an unknown workspace runs no work)
    if changed(result):
        apply(trail)
    return result


def _record(writer: Writer, workspace_id: str, steps: list[HistoryStep]) -> None:
    if steps and writer.trail.keeps_history:
        writer.trail.recorded(workspace_id, steps)


async def audited_upsert(
    store: VectorStore,
    writer: Writer,
    workspace_id: str,
    nodes: Sequence[VectorNode],
    write: Write,
    *,
    replace: bool = False,
    journal: Journal | None = None,
) -> int:
    """Run `write` (an upsert of `nodes`, or with `replace` a replacement of the workspace by them) and record it.
    With `journal`, the history is written in the write's own transaction (`_write`)."""
    trail = writer.trail
    ids = [node.unique_id for node in nodes]
    before = {} if replace else await _existing(store, workspace_id, ids)
    steps: list[HistoryStep] = []
    if trail.keeps_history:
        # a replace drops every memory the workspace held (their history is scrubbed), then adds the new ones
        if replace:
            steps += _deletions(writer, await store.list_ids(workspace_id), whole_workspace=True)
        # a write's history entries: ~20 µs a node (a library load), so many are made in a worker thread
        entries = await off_loop_if(len(nodes) > OFF_LOOP_ITEMS, _upsert_entries, writer, nodes, before)
        steps += entries
        invalidated = [e.memory_id for e in entries if e.event == "INVALIDATE"]
    else:
        invalidated = _invalidated(nodes, before)
    added, changed = [i for i in ids if i not in before], [i for i in ids if i in before]

    def apply(target: AuditTrail) -> None:
        target.wrote(workspace_id, added=added, changed=changed)
        target.invalidated_ids(workspace_id, invalidated)

    return int(await _write(store, journal, writer, workspace_id, steps, write, apply))


async def audited_delete_ids(
    store: VectorStore,
    writer: Writer,
    workspace_id: str,
    ids: Sequence[str],
    write: Write,
    *,
    journal: Journal | None = None,
) -> int:
    before = await _existing(store, workspace_id, ids)
    gone = [i for i in dict.fromkeys(ids) if i in before]  # a repeated id is deleted once
    steps = _deletions(writer, gone) if writer.trail.keeps_history else []

    def apply(target: AuditTrail) -> None:
        target.deleted_ids(workspace_id, gone)

    return int(await _write(store, journal, writer, workspace_id, steps, write, apply))


async def audited_delete_workspace(
    store: VectorStore, writer: Writer, workspace_id: str, write: Write, *, journal: Journal | None = None
) -> bool:
    held = await store.list_ids(workspace_id)
    steps = _deletions(writer, held, whole_workspace=True) if writer.trail.keeps_history else []

    def apply(target: AuditTrail) -> None:
        target.dropped_workspace(workspace_id, len(held))

    return bool(await _write(store, journal, writer, workspace_id, steps, write, apply, changed=bool))
