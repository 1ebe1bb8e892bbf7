"""The management REST API beside the ReMe flows (DESIGN §9): browse, edit, delete, export and import memories.

```
GET    /workspaces                                  the caller's workspaces: counts by memory type, last modified
GET    /workspaces/{id}/memories                    a page: ?limit=&cursor=&memory_type=&q=&since=&until=
GET    /workspaces/{id}/memories/{memory_id}        one memory (the ReMe memory dict)
PATCH  /workspaces/{id}/memories/{memory_id}        change fields (re-embedded when `when_to_use` changes)
DELETE /workspaces/{id}/memories/{memory_id}
GET    /workspaces/{id}/memories/{memory_id}/history  its history (`history/`), oldest first
GET    /workspaces/{id}/export                      a snapshot of the workspace as ReMe library JSONL, streamed
POST   /workspaces/{id}/import                      a JSONL body replaces the workspace atomically (like `load`)
```

Same authentication as the flows (`AuthGate` has set the caller), same scope rules (`auth.policy`: GET needs a
read key, the rest a write key; a workspace outside the key's scope is a 403 before anything is looked up), same
error envelope. An unknown workspace or memory is a 404. Pages are ordered by memory id; the cursor is opaque and
HMAC-bound to the workspace and the filters, with a key kept in `<data_dir>/auth/cursor.key`, so it survives
restarts and is shared by the processes of one data directory. Changes go to the audit log as flow `manage`.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from fastapi import FastAPI, Path as PathParam, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from reme_service.app import ReMeApp
from reme_service.audit.trail import current_trail
from reme_service.auth.caller import TRUSTED, Scope, current_caller
from reme_service.auth.policy import authorize_workspace
from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.errors import (
    InvalidRequestError,
    NotFoundError,
    ReMeError,
    StoreError,
    describe_validation_errors,
)
from reme_service.history.entry import HistoryEntry
from reme_service.history.lookup import memory_history
from reme_service.ops.vector_store.library_io import parse_library_bytes
from reme_service.schema.json_limits import check_json_values
from reme_service.schema.memory import MEMORY_TYPES, BaseMemory, memory_from_dict, memory_from_node, now_str
from reme_service.schema.vector_node import VectorNode
from reme_service.schema.workspace_ids import validate_workspace_id
from reme_service.server.body import parse_json
from reme_service.server.envelope import json_response, request_id_from
from reme_service.server.export import SnapshotResponse, snapshot_library
from reme_service.server.http_errors import FLOW_ERROR_RESPONSES
from reme_service.storage.writer import Writer
from reme_service.stores.base import VectorStore
from reme_service.stores.summary import WorkspaceSummary as StoreSummary

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
AUDIT_FLOW = "manage"
#: fields a PATCH may not change: they name the memory
FIXED_FIELDS = ("memory_id", "workspace_id")
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$")

WorkspaceId = PathParam(description="the workspace id (URL-encoded)")
MemoryId = PathParam(description="the memory id")


class WorkspaceSummary(BaseModel):
    workspace_id: str = Field(description="the workspace id")
    size: int = Field(description="how many memories it holds")
    counts: dict[str, int] = Field(description="memories by memory_type (task, personal, tool)")
    last_modified: str | None = Field(description="the latest time_modified of its memories (null when empty)")
    embedding_space: dict[str, Any] | None = Field(
        default=None,
        description="provider, model and dimensions of the embedder its vectors come from (null: none recorded)",
    )
    needs_reembed: bool = Field(
        default=False, description="its vectors come from another embedder than the service's: run reembed"
    )


class WorkspaceList(BaseModel):
    workspaces: list[WorkspaceSummary] = Field(description="a page of the workspaces the API key covers, by id")
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null at the end")


class MemoryPage(BaseModel):
    memories: list[dict[str, Any]] = Field(description="ReMe memory dicts, ordered by memory_id")
    next_cursor: str | None = Field(description="pass as `cursor` (same filters) for the next page; null at the end")


class MemoryDeleted(BaseModel):
    deleted: bool = Field(description="always true (an unknown memory is a 404)")
    memory_id: str = Field(description="the deleted memory's id")


class HistoryList(RootModel[list[HistoryEntry]]):
    """A JSON list of history entries, oldest first."""


class ImportResult(BaseModel):
    size: int = Field(description="how many memories the workspace now holds")


class MemoryDict(BaseModel):
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    memory_id: str = Field(description="the memory's id")
    memory_type: str = Field(description="task, personal or tool; the other fields are those of its kind")


def _memory_dict(node: VectorNode) -> dict[str, Any]:
    return memory_from_node(node).model_dump(mode="json")


# -- listing --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListQuery:
    limit: int
    memory_type: str | None
    q: str | None
    since: str | None
    until: str | None
    after: str | None = None  # the last memory id of the previous page (from the cursor)

    @property
    def filtered(self) -> bool:
        return bool(self.memory_type or self.q or self.since or self.until)

    def signature(self) -> str:
        return orjson.dumps([self.memory_type, self.q, self.since, self.until]).decode()

    def keeps(self, node: VectorNode) -> bool:
        meta = node.metadata
        if self.memory_type and meta.get("memory_type", "task") != self.memory_type:
            return False
        modified = str(meta.get("time_modified", ""))
        if self.since and modified < self.since:
            return False
        if self.until and modified > self.until:
            return False
        if self.q:
            needle = self.q.casefold()
            return needle in node.content.casefold() or needle in str(meta.get("content", "")).casefold()
        return True


def _time_bound(name: str, value: str | None, *, end: bool) -> str | None:
    """`YYYY-MM-DD[ HH:MM[:SS]]` (or with `T`) as ReMe's `YYYY-MM-DD HH:MM:SS`; a day alone is its first second
    for `since` and its last for `until`. Both bounds are inclusive, on `time_modified`."""
    if value is None or value == "":
        return None
    if not _TIME.match(value):
        raise InvalidRequestError(
            f"{name} must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS, not {value[:40]!r}", details={"field": name}
        )
    value = value.replace("T", " ")
    if len(value) == 10:
        return value + (" 23:59:59" if end else " 00:00:00")
    return value if len(value) == 19 else value + (":59" if end else ":00")


def _parse_limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidRequestError(f"limit must be an integer, not {raw[:40]!r}", details={"field": "limit"}) from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}", details={"field": "limit"})
    return limit


class Cursors:
    """Opaque page cursors: `<base64url of the last id>.<HMAC-SHA256 of workspace, filters and id>`. The key lives
    in `<data_dir>/auth/cursor.key` (created once, mode 0600, by whichever process needs it first)."""

    def __init__(self, key_file: Path) -> None:
        self._file = key_file
        self._key: bytes | None = None

    def _load_key(self) -> bytes:
        if self._key is None:
            self._key = _read_or_create_key(self._file)
        return self._key

    def _mac(self, workspace_id: str, query: ListQuery, after: str) -> str:
        message = orjson.dumps([workspace_id, query.signature(), after])
        digest = hmac.new(self._load_key(), message, hashlib.sha256).digest()[:18]
        return base64.urlsafe_b64encode(digest).decode()

    async def issue(self, workspace_id: str, query: ListQuery, after: str) -> str:
        await asyncio.to_thread(self._load_key)
        body = base64.urlsafe_b64encode(after.encode()).decode().rstrip("=")
        return f"{body}.{self._mac(workspace_id, query, after)}"

    async def open(self, workspace_id: str, query: ListQuery, cursor: str) -> str:
        """The id the cursor continues after; 400 for a cursor not issued for this workspace and these filters."""
        await asyncio.to_thread(self._load_key)
        invalid = InvalidRequestError(
            "invalid cursor: use the next_cursor of a page of this workspace, with the same filters",
            details={"field": "cursor"},
        )
        body, _, mac = cursor.partition(".")
        try:
            after = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            raise invalid from None
        # compare_digest takes ASCII strings only (a TypeError, a 500, for `é`): compare the bytes
        expected = self._mac(workspace_id, query, after).encode()
        if not mac or not hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), expected):
            raise invalid
        return after


def _read_or_create_key(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # the first process to get here wins; the others read its key
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


def _page_of_ids(ids: list[str], after: str | None, limit: int) -> tuple[list[str], bool]:
    ids.sort()
    start = bisect.bisect_right(ids, after) if after is not None else 0
    return ids[start : start + limit], start + limit < len(ids)


def _page_of_nodes(nodes: list[VectorNode], query: ListQuery) -> tuple[list[dict[str, Any]], bool]:
    kept = [node for node in nodes if query.keeps(node)]
    kept.sort(key=lambda node: node.unique_id)
    start = bisect.bisect_right([n.unique_id for n in kept], query.after) if query.after is not None else 0
    page = kept[start : start + query.limit]
    return [_memory_dict(node) for node in page], start + query.limit < len(kept)


async def _off_loop(size: int, fn: Callable[[], Any]) -> Any:
    """Sorting and filtering `size` ids or nodes: in a worker thread above `OFF_LOOP_ITEMS`."""
    return await off_loop_if(size > OFF_LOOP_ITEMS, fn)


# -- the routes -----------------------------------------------------------------------------------------------


class ManageAPI:
    """The management endpoints of one app."""

    def __init__(self, app: ReMeApp) -> None:
        self.app = app
        self.cursors = Cursors(app.data_dir / "auth" / "cursor.key")

    def store(self) -> VectorStore:
        """The default store, bound to the request's audit trail when it has one (`audited`)."""
        if self.app.services is None:
            raise StoreError("the service is not started")
        trail = current_trail.get()
        writer = Writer(trail, (current_caller.get() or TRUSTED).key_id) if trail is not None else None
        return self.app.services.store().bound(writer)

    @staticmethod
    def authorize(workspace_id: str, needed: Scope, what: str) -> str:
        """The validated workspace id, once the caller may do `what` there (403 otherwise)."""
        workspace_id = validate_workspace_id(workspace_id)
        authorize_workspace(current_caller.get() or TRUSTED, workspace_id, needed, what)
        return workspace_id

    async def existing(self, workspace_id: str, needed: Scope, what: str) -> tuple[str, VectorStore]:
        workspace_id = self.authorize(workspace_id, needed, what)
        store = self.store()
        await store.require_workspace(workspace_id)
        return workspace_id, store

    async def audited(
        self, request: Request, workspace_id: str, action: str, change: Callable[[], Awaitable[Response]]
    ) -> Response:
        """Run a change with an audit trail and write its record (also when it failed), as the flows do."""
        request_id = request_id_from(request.scope.get("headers", ()))
        trail = self.app.new_trail(request_id, AUDIT_FLOW)
        token = current_trail.set(trail)
        error_code: str | None = None
        try:
            return await change()
        except ReMeError as error:
            error_code = error.code
            raise
        finally:
            current_trail.reset(token)
            await self.app.audit_change(AUDIT_FLOW, action, workspace_id, request_id, trail, error_code)

    # -- handlers

    async def workspaces(self, request: Request) -> Response:
        """A page of the workspaces the caller may use, by id (`limit`, ≤ 500, default 50; `cursor`), each with the
        store's summary of it (`VectorStore.summarize`: counted in the store, no memory is materialised where the
        backend can avoid it). An unpaged list of 10,000 workspaces took 1-2 s and 4 MB."""
        caller = current_caller.get() or TRUSTED
        store = self.store()
        limit = _parse_limit(request.query_params.get("limit"))
        cursor = request.query_params.get("cursor")
        visible = sorted(w for w in await store.list_workspaces() if caller.may_use(w))
        if cursor:
            after = await self.cursors.open("", _WORKSPACES, cursor)
            visible = visible[bisect.bisect_right(visible, after) :]
        page, more = visible[:limit], len(visible) > limit
        next_cursor = await self.cursors.issue("", _WORKSPACES, page[-1]) if more else None
        result = []
        for workspace_id in page:
            summary = _summary(workspace_id, await store.summarize(workspace_id))
            space = await store.workspace_space(workspace_id)
            summary["embedding_space"] = space.model_dump() if space is not None else None
            summary["needs_reembed"] = space is not None and space != store.space
            result.append(summary)
        return json_response(
            {"workspaces": result, "next_cursor": next_cursor},
            request_id=request_id_from(request.scope.get("headers", ())),
        )

    async def list_memories(self, request: Request, workspace_id: str) -> Response:
        params = request.query_params
        workspace_id, store = await self.existing(workspace_id, "read", "listing memories")
        memory_type = params.get("memory_type") or None
        if memory_type is not None and memory_type not in MEMORY_TYPES:
            raise InvalidRequestError(
                f"memory_type must be one of {', '.join(MEMORY_TYPES)}", details={"field": "memory_type"}
            )
        query = ListQuery(
            limit=_parse_limit(params.get("limit")),
            memory_type=memory_type,
            q=params.get("q") or None,
            since=_time_bound("since", params.get("since"), end=False),
            until=_time_bound("until", params.get("until"), end=True),
        )
        cursor = params.get("cursor")
        if cursor:
            query = ListQuery(**{**query.__dict__, "after": await self.cursors.open(workspace_id, query, cursor)})
        if query.filtered:
            type_filter = {"metadata.memory_type": query.memory_type} if query.memory_type else None
            nodes = await store.list_nodes(workspace_id, filter=type_filter)
            memories, more = await _off_loop(len(nodes), lambda: _page_of_nodes(nodes, query))
            last = memories[-1]["memory_id"] if memories else None
        else:
            ids = await store.list_ids(workspace_id)
            page, more = await _off_loop(len(ids), lambda: _page_of_ids(ids, query.after, query.limit))
            memories = [_memory_dict(node) for node in await store.get(workspace_id, page)]
            last = page[-1] if page else None
        next_cursor = await self.cursors.issue(workspace_id, query, last) if more and last is not None else None
        return json_response(
            {"memories": memories, "next_cursor": next_cursor}, request_id=request_id_from(request.scope["headers"])
        )

    async def get_memory(self, request: Request, workspace_id: str, memory_id: str) -> Response:
        workspace_id, store = await self.existing(workspace_id, "read", "reading a memory")
        node = await _one(store, workspace_id, memory_id)
        return json_response(_memory_dict(node), request_id=request_id_from(request.scope["headers"]))

    async def history(self, request: Request, workspace_id: str, memory_id: str) -> Response:
        workspace_id = self.authorize(workspace_id, "read", "reading a memory's history")
        entries = await memory_history(self.app.history, self.store(), workspace_id, memory_id)
        return json_response(entries, request_id=request_id_from(request.scope["headers"]))

    async def patch_memory(self, request: Request, workspace_id: str, memory_id: str) -> Response:
        workspace_id = validate_workspace_id(workspace_id)  # refusals are audited too, as for the flows

        async def change() -> Response:
            _, store = await self.existing(workspace_id, "write", "PATCH of a memory")
            patch = _patch_body(await request.body())
            async with store.lock(workspace_id):
                node = await _one(store, workspace_id, memory_id)
                current = memory_from_node(node).model_dump(mode="json")
                for name in FIXED_FIELDS:
                    if name in patch and patch[name] != current[name]:
                        raise InvalidRequestError(f"{name} cannot be changed", details={"field": name})
                updated = _patched(current, patch)
                new_node = updated.to_vector_node()
                if new_node.content == node.content and node.vector is not None:
                    new_node.vector = node.vector  # the indexed text is unchanged: keep its embedding
                await store.upsert(workspace_id, [new_node])
            return json_response(updated.model_dump(mode="json"), request_id=request_id_from(request.scope["headers"]))

        return await self.audited(request, workspace_id, "patch_memory", change)

    async def delete_memory(self, request: Request, workspace_id: str, memory_id: str) -> Response:
        workspace_id = validate_workspace_id(workspace_id)  # refusals are audited too, as for the flows

        async def change() -> Response:
            _, store = await self.existing(workspace_id, "write", "DELETE of a memory")
            async with store.lock(workspace_id):
                if not await store.delete_ids(workspace_id, [memory_id]):
                    raise NotFoundError("no such memory", details={"memory_id": memory_id})
            return json_response(
                {"deleted": True, "memory_id": memory_id}, request_id=request_id_from(request.scope["headers"])
            )

        return await self.audited(request, workspace_id, "delete_memory", change)

    async def export(self, request: Request, workspace_id: str) -> Response:
        """The workspace as it was at one instant (`server/export.py`): snapshotted under its lock before the response
        starts, so a workspace deleted meanwhile or a failing store is still an error envelope, then streamed."""
        workspace_id, store = await self.existing(workspace_id, "read", "an export")
        spool = await snapshot_library(store, workspace_id)
        name = quote(f"{workspace_id}.jsonl", safe="")
        headers = {
            "x-request-id": request_id_from(request.scope["headers"]),
            "content-disposition": f"attachment; filename*=UTF-8''{name}",
        }
        return SnapshotResponse(spool, media_type="application/x-ndjson", headers=headers)

    async def import_library(self, request: Request, workspace_id: str) -> Response:
        workspace_id = validate_workspace_id(workspace_id)  # refusals are audited too, as for the flows

        async def change() -> Response:
            _, store = await self.existing(workspace_id, "write", "an import")
            body = await request.body()
            nodes = await parse_library_bytes(body, workspace_id, "the request body")
            async with store.lock(workspace_id):
                # deleted while the body was read or the lock awaited: the import must not bring it back
                await store.require_workspace(workspace_id)
                size = await store.replace_workspace(workspace_id, nodes)
            return json_response({"size": size}, request_id=request_id_from(request.scope["headers"]))

        return await self.audited(request, workspace_id, "import", change)


#: the "filters" of a workspace-list cursor, issued for workspace "" (never a workspace id): a memory page's cursor
#: never opens as one, nor the other way round
_WORKSPACES = ListQuery(limit=0, memory_type=None, q=None, since=None, until=None)


def _summary(workspace_id: str, counted: StoreSummary) -> dict[str, Any]:
    """The workspace's entry of the list: the store's summary (`VectorStore.summarize`), every memory type counted
    (0 when absent)."""
    counts = {**dict.fromkeys(MEMORY_TYPES, 0), **counted.counts}
    return {
        "workspace_id": workspace_id,
        "size": counted.size,
        "counts": counts,
        "last_modified": counted.last_modified,
    }


async def _one(store: VectorStore, workspace_id: str, memory_id: str) -> VectorNode:
    found = await store.get(workspace_id, [memory_id])
    if not found:
        raise NotFoundError("no such memory", details={"memory_id": memory_id})
    return found[0]


def _patch_body(raw: bytes) -> dict[str, Any]:
    """The fields a PATCH changes, read and limited as the flow endpoints read their bodies (`server/body.py`,
    `schema/json_limits.py`): no value a memory could not be answered with again is written."""
    patch = parse_json(raw) if raw.strip() else None
    if not isinstance(patch, dict) or not patch:
        raise InvalidRequestError("the body must be a JSON object of the fields to change")
    try:
        check_json_values(patch, "memory")
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_errors(exc, prefix="invalid memory: ", limit=1)) from None
    return patch


def _patched(current: dict[str, Any], patch: dict[str, Any]) -> BaseMemory:
    """The memory with `patch` applied and validated; unknown fields are a 400 naming them."""
    merged = {**current, **patch}
    if "time_modified" not in patch:
        merged["time_modified"] = now_str()
    try:
        updated = memory_from_dict(merged)
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_errors(exc, prefix="invalid memory: ", limit=3)) from None
    unknown = sorted(set(patch) - set(type(updated).model_fields))
    if unknown:
        raise InvalidRequestError(
            f"unknown field(s) {', '.join(unknown)}; a {updated.memory_type} memory has "
            f"{', '.join(name for name in type(updated).model_fields if name != 'relevance')}",
            details={"field": unknown[0]},
        )
    return updated


JSONL_OK: dict[str, Any] = {
    "description": "ReMe library JSONL: one memory dict a line (the vector_store dump's format)",
    "content": {"application/x-ndjson": {}},
}


def install_manage_routes(api: FastAPI, app: ReMeApp) -> None:
    """Add the management routes to `api` (called once by `server.http.create_http_app`)."""
    manage = ManageAPI(app)
    errors: dict[int | str, dict[str, Any]] = {
        code: FLOW_ERROR_RESPONSES[code] for code in (400, 401, 403, 429, 500, 503)
    }
    errors[404] = {"description": "no such workspace or memory (the error envelope)"}
    body_errors: dict[int | str, dict[str, Any]] = {
        code: FLOW_ERROR_RESPONSES[code] for code in (408, 413, 502)
    }  # a body, and an embedding call

    async def workspaces(request: Request) -> Response:
        return await manage.workspaces(request)

    async def list_memories(request: Request, workspace_id: str = WorkspaceId) -> Response:
        return await manage.list_memories(request, workspace_id)

    async def get_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        return await manage.get_memory(request, workspace_id, memory_id)

    async def patch_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        return await manage.patch_memory(request, workspace_id, memory_id)

    async def delete_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        return await manage.delete_memory(request, workspace_id, memory_id)

    async def history(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        return await manage.history(request, workspace_id, memory_id)

    async def export(request: Request, workspace_id: str = WorkspaceId) -> Response:
        return await manage.export(request, workspace_id)

    async def import_library(request: Request, workspace_id: str = WorkspaceId) -> Response:
        return await manage.import_library(request, workspace_id)

    memory_path = "/workspaces/{workspace_id}/memories/{memory_id}"
    routes: list[tuple[str, str, Callable[..., Awaitable[Response]], type[BaseModel] | None, str]] = [
        (
            "GET",
            "/workspaces",
            workspaces,
            WorkspaceList,
            ("A page of the workspaces this API key covers, with their counts: limit (≤ 500, default 50), cursor"),
        ),
        (
            "GET",
            "/workspaces/{workspace_id}/memories",
            list_memories,
            MemoryPage,
            "A page of memories by memory id: limit (≤ 500, default 50), cursor, memory_type, q (text in "
            "when_to_use or content), since, until (time_modified, inclusive)",
        ),
        ("GET", memory_path, get_memory, MemoryDict, "One memory"),
        (
            "PATCH",
            memory_path,
            patch_memory,
            MemoryDict,
            "Change a memory's fields (re-embedded when when_to_use "
            "changes); the body is a JSON object of the fields to change",
        ),
        ("DELETE", memory_path, delete_memory, MemoryDeleted, "Delete a memory"),
        (
            "GET",
            memory_path + "/history",
            history,
            HistoryList,
            "The memory's history, oldest first: ADD, UPDATE and INVALIDATE entries with the changed fields before "
            "and after, DELETE entries; a deleted memory's history keeps events, ids and times only",
        ),
        (
            "GET",
            "/workspaces/{workspace_id}/export",
            export,
            None,
            "The workspace as ReMe library JSONL, one memory a line: a snapshot taken under its lock, then streamed",
        ),
        (
            "POST",
            "/workspaces/{workspace_id}/import",
            import_library,
            ImportResult,
            "Replace the workspace with a ReMe library JSONL body, atomically (like vector_store load)",
        ),
    ]
    for method, path, endpoint, model, summary in routes:
        api.add_api_route(
            path,
            endpoint,
            methods=[method],
            summary=summary,
            response_class=Response,
            responses={
                200: {"model": model, "description": "success"} if model else JSONL_OK,
                **errors,
                **(body_errors if method in ("PATCH", "POST") else {}),
            },
            name=f"manage_{endpoint.__name__}",
            tags=["manage"],
        )
