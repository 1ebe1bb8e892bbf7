"""The management REST API beside the ReMe flows (DESIGN §9): browse, edit, delete, export and import memories.

```
GET    /workspaces                                  the caller's workspaces: counts by memory type, last modified
GET    /workspaces/{id}/memories                    a page, and the total: ?limit=&cursor=&sort=&memory_type=&q=
                                                    &since=&until=
POST   /workspaces/{id}/memories                    create one memory (201; 409 when its memory_id exists)
GET    /workspaces/{id}/memories/{memory_id}        one memory (the ReMe memory dict)
PATCH  /workspaces/{id}/memories/{memory_id}        change fields (re-embedded when `when_to_use` changes)
DELETE /workspaces/{id}/memories/{memory_id}
GET    /workspaces/{id}/memories/{memory_id}/history  its history (`history/`), oldest first
GET    /workspaces/{id}/export                      a snapshot of the workspace as ReMe library JSONL, streamed
POST   /workspaces/{id}/import                      a JSONL body replaces the workspace atomically (like `load`)
```

Same authentication as the flows (`AuthGate` has set the caller), same scope rules (`auth.policy`: GET needs a
read key, the rest a write key; a workspace outside the key's scope is a 403 before anything is looked up), same
error envelope. An unknown workspace or memory is a 404. Pages are ordered by memory id or by a time (`sort`),
with opaque cursors (`server/pages.py`); the answers' models are in `server/manage_models.py`. Changes go to the
audit log as flow `manage` (`audit.recorder.AuditRecorder.change`).

Each route is declared once, on the router `manage_router` returns: its path, method, summary and documented
answers beside its handler. Each request resolves its `auth.policy.RequestScope` once (`ManageAPI.scope`) and
works on that.
"""

from __future__ import annotations

import bisect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Path as PathParam, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from reme_service.app import ReMeApp
from reme_service.auth.caller import Scope, caller_now
from reme_service.auth.policy import RequestScope, resolve_workspace, visible, workspace_scope
from reme_service.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    ReMeError,
    StoreError,
    describe_validation_errors,
)
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
from reme_service.server.manage_models import (
    HistoryList,
    ImportResult,
    MemoryDeleted,
    MemoryDict,
    MemoryPage,
    WorkspaceList,
    memory_dict,
)
from reme_service.server.pages import (
    WORKSPACES,
    Cursors,
    ListQuery,
    Page,
    off_loop,
    page_of_ids,
    page_of_nodes,
    parse_limit,
    parse_sort,
    time_bound,
)
from reme_service.storage.writer import Writer
from reme_service.stores.base import VectorStore
from reme_service.stores.summary import WorkspaceSummary as StoreSummary

AUDIT_FLOW = "manage"
#: fields a PATCH may not change: they name the memory
FIXED_FIELDS = ("memory_id", "workspace_id")
#: ReMe's older names a memory dict may still carry (`experience_id`, `experience_type`): read, never refused
LEGACY_FIELDS = frozenset({"experience_id", "experience_type"})

T = TypeVar("T")

WorkspaceId = PathParam(description="the workspace id (URL-encoded)")
MemoryId = PathParam(description="the memory id")
MEMORY_PATH = "/workspaces/{workspace_id}/memories/{memory_id}"

JSONL_OK: dict[str, Any] = {
    "description": "ReMe library JSONL: one memory dict a line (the vector_store dump's format)",
    "content": {"application/x-ndjson": {}},
}
_ERRORS: dict[int | str, dict[str, Any]] = {
    **{code: FLOW_ERROR_RESPONSES[code] for code in (400, 401, 403, 429, 500, 503)},
    404: {"description": "no such workspace or memory (the error envelope)"},
}
_BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    code: FLOW_ERROR_RESPONSES[code] for code in (408, 413, 502)
}  # a body, and an embedding call


def _answers(model: type[BaseModel] | None, *, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """A route's documented answers: its 200 (`model`, or JSONL), the errors, and those of a body when it reads one."""
    ok = {"model": model, "description": "success"} if model else JSONL_OK
    answers: dict[int | str, dict[str, Any]] = {200: ok, **_ERRORS}
    if body:
        answers.update(_BODY_ERRORS)
    return answers


class ManageAPI:
    """What the management routes of one app share: its store, the page cursors, the scope and audit steps."""

    def __init__(self, app: ReMeApp) -> None:
        self.app = app
        self.cursors = Cursors(app.data_dir / "auth" / "cursor.key")

    def store(self, writer: Writer | None = None) -> VectorStore:
        """The default store, recording its writes for `writer` (`audited` gives the change's)."""
        if self.app.services is None:
            raise StoreError("the service is not started")
        return self.app.services.store().bound(writer)

    @staticmethod
    def scope(workspace_id: str, needed: Scope, what: str) -> RequestScope:
        """The request's scope on `workspace_id`, once the caller may do `what` there (400, 403 otherwise)."""
        return resolve_workspace(caller_now(), workspace_id, needed, what)

    async def existing(self, scope: RequestScope, writer: Writer | None = None) -> VectorStore:
        """The store (its writes recorded for `writer`), once `scope`'s workspace is known to exist in it (404
        otherwise)."""
        store = self.store(writer)
        await store.require_workspace(scope.workspace_id)
        return store

    async def list_page(self, scope: RequestScope, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of `scope`'s memories and the total of its matches, for the query parameters `params` (limit,
        cursor, sort, memory_type, q, since, until: the listing route's); 404 for an unknown workspace."""
        store = await self.existing(scope)
        workspace_id = scope.workspace_id
        memory_type = params.get("memory_type") or None
        if memory_type is not None and memory_type not in MEMORY_TYPES:
            raise InvalidRequestError(
                f"memory_type must be one of {', '.join(MEMORY_TYPES)}", details={"field": "memory_type"}
            )
        query = ListQuery(
            limit=parse_limit(params.get("limit")),
            memory_type=memory_type,
            q=params.get("q") or None,
            since=time_bound("since", params.get("since"), end=False),
            until=time_bound("until", params.get("until"), end=True),
            sort=parse_sort(params.get("sort")),
        )
        cursor = params.get("cursor")
        if cursor:
            query = replace(query, after=await self.cursors.open(workspace_id, query, cursor))
        if query.filtered or not query.by_id:
            type_filter = {"metadata.memory_type": query.memory_type} if query.memory_type else None
            nodes = await store.list_nodes(workspace_id, filter=type_filter)
            page: Page = await off_loop(len(nodes), lambda: page_of_nodes(nodes, query))
            memories = page.items
        else:
            ids = await store.list_ids(workspace_id)
            page = await off_loop(len(ids), lambda: page_of_ids(ids, query))
            found = {node.unique_id: node for node in await store.get(workspace_id, page.items)}
            memories = [memory_dict(found[memory_id]) for memory_id in page.items if memory_id in found]
        next_cursor = await self.cursors.issue(workspace_id, query, page.last) if page.more and page.last else None
        return {"memories": memories, "next_cursor": next_cursor, "total": page.total}

    async def audited(
        self,
        request_id: str,
        workspace_id: str,
        action: str,
        what: str,
        change: Callable[[RequestScope, VectorStore], Awaitable[T]],
        *,
        creates: bool = False,
    ) -> T:
        """Run a change of an existing workspace (or of any, when the change `creates` it) with an audit trail and
        write its record, as the flows do: also when it failed or was refused (a malformed workspace id is a 400
        before that, and is not recorded). The HTTP routes and the MCP memory tools (`mcp_memory.py`) both change
        memories through it."""
        workspace_id = validate_workspace_id(workspace_id)
        caller = caller_now()
        trail = self.app.audit.new_trail(request_id, AUDIT_FLOW)
        self.app.audit.expect(trail, AUDIT_FLOW, action, workspace_id, caller)
        error_code: str | None = None
        try:
            scope = workspace_scope(caller, workspace_id, "write", what)
            writer = Writer(trail, caller.key_id)
            store = self.store(writer) if creates else await self.existing(scope, writer)
            return await change(scope, store)
        except ReMeError as error:
            error_code = error.code
            raise
        except RequestValidationError:  # a body that is not JSON (`server/body.parse_json`): refused, and recorded
            error_code = InvalidRequestError.code
            raise
        except Exception:
            error_code = "internal_error"
            raise
        finally:
            await self.app.audit.change(AUDIT_FLOW, action, workspace_id, request_id, trail, error_code, caller)


def manage_router(app: ReMeApp) -> APIRouter:
    """The management routes of `app` (included by `server.http.create_http_app`)."""
    manage = ManageAPI(app)
    router = APIRouter(tags=["manage"], default_response_class=Response)
    _read_routes(router, manage)
    _change_routes(router, manage)
    return router


def _read_routes(router: APIRouter, manage: ManageAPI) -> None:
    """The GET routes: read keys may use them."""

    @router.get(
        "/workspaces",
        name="manage_workspaces",
        summary="A page of the workspaces this API key covers, with their counts: limit (≤ 500, default 50), cursor",
        responses=_answers(WorkspaceList),
    )
    async def workspaces(request: Request) -> Response:
        # A page of the workspaces the caller may use, by id, each with the store's summary of it
        # (`VectorStore.summarize`: counted in the store, no memory is materialised where the backend can avoid
        # it). An unpaged list of 10,000 workspaces took 1-2 s and 4 MB. (No docstring: OpenAPI would show it.)
        caller = caller_now()
        store = manage.store()
        limit = parse_limit(request.query_params.get("limit"))
        cursor = request.query_params.get("cursor")
        shown = sorted(w for w in await store.list_workspaces() if visible(caller, w))
        if cursor:
            after = await manage.cursors.open("", WORKSPACES, cursor)
            shown = shown[bisect.bisect_right(shown, after) :]
        page, more = shown[:limit], len(shown) > limit
        next_cursor = await manage.cursors.issue("", WORKSPACES, page[-1]) if more else None
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

    @router.get(
        "/workspaces/{workspace_id}/memories",
        name="manage_list_memories",
        summary="A page of memories and how many match (`total`): limit (≤ 500, default 50), cursor, sort "
        "(memory_id, time_created or time_modified; a leading - for descending; default memory_id), memory_type, "
        "q (text in when_to_use or content), since, until (time_modified, inclusive)",
        responses=_answers(MemoryPage),
    )
    async def list_memories(request: Request, workspace_id: str = WorkspaceId) -> Response:
        scope = manage.scope(workspace_id, "read", "listing memories")
        page = await manage.list_page(scope, request.query_params)
        return json_response(page, request_id=request_id_from(request.scope["headers"]))

    @router.get(MEMORY_PATH, name="manage_get_memory", summary="One memory", responses=_answers(MemoryDict))
    async def get_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        scope = manage.scope(workspace_id, "read", "reading a memory")
        memory = await one_memory(await manage.existing(scope), scope.workspace_id, memory_id)
        return json_response(memory, request_id=request_id_from(request.scope["headers"]))

    @router.get(
        MEMORY_PATH + "/history",
        name="manage_history",
        summary="The memory's history, oldest first: ADD, UPDATE and INVALIDATE entries with the changed fields "
        "before and after, DELETE entries; a deleted memory's history keeps events, ids and times only",
        responses=_answers(HistoryList),
    )
    async def history(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        scope = manage.scope(workspace_id, "read", "reading a memory's history")
        entries = await memory_history(manage.app.history, manage.store(), scope.workspace_id, memory_id)
        return json_response(entries, request_id=request_id_from(request.scope["headers"]))

    @router.get(
        "/workspaces/{workspace_id}/export",
        name="manage_export",
        summary="The workspace as ReMe library JSONL, one memory a line: a snapshot taken under its lock, then "
        "streamed",
        responses=_answers(None),
    )
    async def export(request: Request, workspace_id: str = WorkspaceId) -> Response:
        # The workspace as it was at one instant (`server/export.py`): snapshotted under its lock before the
        # response starts, so a workspace deleted meanwhile or a failing store is still an error envelope.
        scope = manage.scope(workspace_id, "read", "an export")
        spool = await snapshot_library(await manage.existing(scope), scope.workspace_id)
        name = quote(f"{scope.workspace_id}.jsonl", safe="")
        headers = {
            "x-request-id": request_id_from(request.scope["headers"]),
            "content-disposition": f"attachment; filename*=UTF-8''{name}",
        }
        return SnapshotResponse(spool, media_type="application/x-ndjson", headers=headers)


def _change_routes(router: APIRouter, manage: ManageAPI) -> None:
    """The routes that change a workspace: write keys only; each is audited (`ManageAPI.audited`), refusals too."""

    @router.post(
        "/workspaces/{workspace_id}/memories",
        name="manage_create_memory",
        summary="Create a memory from a ReMe memory dict (memory_type task, personal or tool; memory_id and times "
        "are given when absent); the workspace is created with it when new",
        status_code=201,
        responses={
            **_answers(MemoryDict, body=True),
            201: {"model": MemoryDict, "description": "created"},
            409: {"description": "a memory with this memory_id exists (the error envelope)"},
        },
    )
    async def create_memory(request: Request, workspace_id: str = WorkspaceId) -> Response:
        request_id = request_id_from(request.scope["headers"])

        async def change(scope: RequestScope, store: VectorStore) -> Response:
            memory = await create_memory_in(store, scope.workspace_id, _json_object(await request.body()))
            return json_response(memory.model_dump(mode="json"), status=201, request_id=request_id)

        return await manage.audited(
            request_id, workspace_id, "create_memory", "creating a memory", change, creates=True
        )

    @router.patch(
        MEMORY_PATH,
        name="manage_patch_memory",
        summary="Change a memory's fields (re-embedded when when_to_use "
        "changes); the body is a JSON object of the fields to change",
        responses=_answers(MemoryDict, body=True),
    )
    async def patch_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        request_id = request_id_from(request.scope["headers"])

        async def change(scope: RequestScope, store: VectorStore) -> Response:
            updated = await patch_memory_in(store, scope.workspace_id, memory_id, _json_object(await request.body()))
            return json_response(updated.model_dump(mode="json"), request_id=request_id)

        return await manage.audited(request_id, workspace_id, "patch_memory", "PATCH of a memory", change)

    @router.delete(
        MEMORY_PATH, name="manage_delete_memory", summary="Delete a memory", responses=_answers(MemoryDeleted)
    )
    async def delete_memory(request: Request, workspace_id: str = WorkspaceId, memory_id: str = MemoryId) -> Response:
        request_id = request_id_from(request.scope["headers"])

        async def change(scope: RequestScope, store: VectorStore) -> Response:
            await delete_memory_in(store, scope.workspace_id, memory_id)
            return json_response({"deleted": True, "memory_id": memory_id}, request_id=request_id)

        return await manage.audited(request_id, workspace_id, "delete_memory", "DELETE of a memory", change)

    @router.post(
        "/workspaces/{workspace_id}/import",
        name="manage_import_library",
        summary="Replace the workspace with a ReMe library JSONL body, atomically (like vector_store load)",
        responses=_answers(ImportResult, body=True),
    )
    async def import_library(request: Request, workspace_id: str = WorkspaceId) -> Response:
        request_id = request_id_from(request.scope["headers"])

        async def change(scope: RequestScope, store: VectorStore) -> Response:
            body = await request.body()
            nodes = await parse_library_bytes(body, scope.workspace_id, "the request body")
            async with store.lock(scope.workspace_id):
                # deleted while the body was read or the lock awaited: the import must not bring it back
                await store.require_workspace(scope.workspace_id)
                size = await store.replace_workspace(scope.workspace_id, nodes)
            return json_response({"size": size}, request_id=request_id)

        return await manage.audited(request_id, workspace_id, "import", "an import", change)


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


async def create_memory_in(store: VectorStore, workspace_id: str, data: Any) -> BaseMemory:
    """Create the memory `data` (a memory dict) in `workspace_id`: 409 when its memory_id exists there."""
    memory = _new_memory(data, workspace_id)
    async with store.lock(workspace_id):
        if await store.get(workspace_id, [memory.memory_id]):
            raise ConflictError(
                "a memory with this memory_id exists: PATCH it, or leave memory_id out",
                details={"memory_id": memory.memory_id},
            )
        await store.upsert(workspace_id, [memory.to_vector_node()])
    return memory


async def patch_memory_in(store: VectorStore, workspace_id: str, memory_id: str, patch: Any) -> BaseMemory:
    """Change the fields `patch` (a JSON object) names of a memory; re-embedded only when its indexed text changes."""
    fields = _patch_fields(patch)
    async with store.lock(workspace_id):
        node = await _one(store, workspace_id, memory_id)
        current = memory_from_node(node).model_dump(mode="json")
        for name in FIXED_FIELDS:
            if name in fields and fields[name] != current[name]:
                raise InvalidRequestError(f"{name} cannot be changed", details={"field": name})
        updated = _patched(current, fields)
        new_node = updated.to_vector_node()
        if new_node.content == node.content and node.vector is not None:
            new_node.vector = node.vector  # the indexed text is unchanged: keep its embedding
        await store.upsert(workspace_id, [new_node])
    return updated


async def delete_memory_in(store: VectorStore, workspace_id: str, memory_id: str) -> None:
    """Delete a memory; 404 when there is none by that id."""
    async with store.lock(workspace_id):
        if not await store.delete_ids(workspace_id, [memory_id]):
            raise NotFoundError("no such memory", details={"memory_id": memory_id})


async def one_memory(store: VectorStore, workspace_id: str, memory_id: str) -> dict[str, Any]:
    """One memory as the API answers it (`memory_dict`); 404 when there is none by that id."""
    return memory_dict(await _one(store, workspace_id, memory_id))


async def _one(store: VectorStore, workspace_id: str, memory_id: str) -> VectorNode:
    found = await store.get(workspace_id, [memory_id])
    if not found:
        raise NotFoundError("no such memory", details={"memory_id": memory_id})
    return found[0]


def _json_object(raw: bytes) -> Any:
    """A body read as the flow endpoints read theirs (`server/body.py`); None when empty."""
    return parse_json(raw) if raw.strip() else None


def _patch_fields(patch: Any) -> dict[str, Any]:
    """The fields a PATCH changes, limited as the flow endpoints limit their bodies (`schema/json_limits.py`): no
    value a memory could not be answered with again is written."""
    if not isinstance(patch, dict) or not patch:
        raise InvalidRequestError("the body must be a JSON object of the fields to change")
    try:
        check_json_values(patch, "memory")
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_errors(exc, prefix="invalid memory: ", limit=1)) from None
    return patch


def _new_memory(data: Any, workspace_id: str) -> BaseMemory:
    """The memory a POST creates in `workspace_id`: its JSON object limited as a PATCH's is, validated as
    `vector_store insert` validates each memory dict; unknown fields, or another workspace_id, are a 400."""
    if not isinstance(data, dict) or not data:
        raise InvalidRequestError("the body must be a JSON object: a memory (memory_type, when_to_use, content, …)")
    try:
        check_json_values(data, "memory")
        memory = memory_from_dict(data)
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_errors(exc, prefix="invalid memory: ", limit=3)) from None
    _refuse_unknown(data, memory)
    if memory.workspace_id not in ("", workspace_id):
        raise InvalidRequestError(
            "workspace_id differs from the workspace in the path", details={"field": "workspace_id"}
        )
    memory.workspace_id = workspace_id
    return memory


def _refuse_unknown(fields: dict[str, Any], memory: BaseMemory) -> None:
    """A 400 naming the first of `fields` that is not a field of `memory`'s kind (ReMe's legacy names aside)."""
    unknown = sorted(set(fields) - set(type(memory).model_fields) - LEGACY_FIELDS)
    if unknown:
        raise InvalidRequestError(
            f"unknown field(s) {', '.join(unknown)}; a {memory.memory_type} memory has "
            f"{', '.join(name for name in type(memory).model_fields if name != 'relevance')}",
            details={"field": unknown[0]},
        )


def _patched(current: dict[str, Any], patch: dict[str, Any]) -> BaseMemory:
    """The memory with `patch` applied and validated; unknown fields are a 400 naming them."""
    merged = {**current, **patch}
    if "time_modified" not in patch:
        merged["time_modified"] = now_str()
    try:
        updated = memory_from_dict(merged)
    except ValidationError as exc:
        raise InvalidRequestError(describe_validation_errors(exc, prefix="invalid memory: ", limit=3)) from None
    _refuse_unknown(patch, updated)
    return updated
