"""MCP memory tools named for what an assistant does with them, beside the ReMe flows (which keep their tools):

```
add_memory        remember this              the management API's create (POST /workspaces/{id}/memories)
search_memories   what do you know about X   the retrieval flow of the memory type (retrieve_personal_memory, ...)
get_memory        show me that memory        GET /workspaces/{id}/memories/{memory_id}
update_memory     correct that               PATCH (re-embedded when when_to_use changes)
delete_memory     forget that                DELETE
list_memories     what do you remember       GET /workspaces/{id}/memories (sort, cursor, total)
```

Each runs the code of its HTTP route or flow (`server/manage.py`: `ManageAPI` and its create/patch/delete/list
functions; `ReMeApp.run_validated` for the search), so the key's scope, the audit record (flow `manage`, the HTTP
route's action), the history and the change events are theirs. Arguments are validated by the pydantic models
below, whose JSON schemas are the tools' input schemas (`mcp_tools.input_schema`, the flows' path). A result's
structured content is the route's answer (`{"memory": ...}`, `{"memories", "next_cursor", "total"}`, `{"deleted",
"memory_id"}`) and its text the same as JSON; a failure is a tool error with the error envelope, as a flow's is.
An empty `workspace_id` is the configured `default_workspace`, as for the flows.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import orjson
from mcp import types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reme_service.errors import InvalidRequestError, NotFoundError, ReMeError, RequestValidationError
from reme_service.server.manage import (
    ManageAPI,
    create_memory_in,
    delete_memory_in,
    one_memory,
    patch_memory_in,
)
from reme_service.server.mcp_tools import describe_validation_error, error_result, input_schema

if TYPE_CHECKING:
    from reme_service.app import ReMeApp
    from reme_service.auth.policy import RequestScope
    from reme_service.stores.base import VectorStore

WORKSPACE = Field(default="", description="the memory space (one per user or task family); empty: the default")
MEMORY_ID = Field(min_length=1, description="the memory's id (memory_id of a search or listing result)")
#: the retrieval flow `search_memories` runs for each memory type
SEARCH_FLOWS = {"personal": "retrieve_personal_memory", "task": "retrieve_task_memory"}


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workspace_id: str = WORKSPACE


class AddMemory(_Arguments):
    content: str = Field(min_length=1, description="what to remember")
    when_to_use: str = Field(
        default="", description="when it is relevant (what a search matches); empty: the content itself"
    )
    memory_type: Literal["personal", "task"] = Field(
        default="personal", description="personal: a fact about someone; task: an experience of doing something"
    )
    target: str = Field(default="", description="whom a personal memory is about (e.g. the user's name)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="any JSON object kept with the memory")


class SearchMemories(_Arguments):
    query: str = Field(min_length=1, description="what to find memories about")
    top_k: int = Field(default=5, ge=1, le=50, description="how many memories to return (1-50)")
    memory_type: Literal["personal", "task"] = Field(default="personal", description="which memories to search")


class GetMemory(_Arguments):
    memory_id: str = MEMORY_ID


class UpdateMemory(_Arguments):
    memory_id: str = MEMORY_ID
    content: str | None = Field(default=None, description="the new content (left as it is when absent)")
    when_to_use: str | None = Field(default=None, description="the new when_to_use (re-embedded)")
    metadata: dict[str, Any] | None = Field(default=None, description="the new metadata object (replaces the old)")


class DeleteMemory(_Arguments):
    memory_id: str = MEMORY_ID


class ListMemories(_Arguments):
    limit: int = Field(default=20, ge=1, le=500, description="memories per page (1-500)")
    cursor: str = Field(default="", description="the next_cursor of the previous page")
    sort: Literal["-time_created", "time_created", "-time_modified", "time_modified", "memory_id"] = Field(
        default="-time_created", description="the order: newest first by default"
    )
    memory_type: Literal["", "personal", "task", "tool"] = Field(default="", description="only this type")
    q: str = Field(default="", description="only memories whose when_to_use or content holds this text")


Handler = Callable[[Any, str], Awaitable[dict[str, Any] | types.CallToolResult]]


class MemoryTools:
    """The six tools of one app: `tools()` lists them, `call` runs one. `name in tools` says whether a name is
    one of them."""

    def __init__(self, app: ReMeApp) -> None:
        self.app = app
        self.manage = ManageAPI(app)
        self._tools: dict[str, tuple[type[_Arguments], str, Handler]] = {
            "add_memory": (AddMemory, "Remember something: store one memory (answered with its memory_id).", self._add),
            "search_memories": (
                SearchMemories,
                "Find the memories most relevant to a query (the personal or task retrieval flow).",
                self._search,
            ),
            "get_memory": (GetMemory, "One memory by its memory_id.", self._get),
            "update_memory": (UpdateMemory, "Change a memory's content, when_to_use or metadata.", self._update),
            "delete_memory": (DeleteMemory, "Forget a memory: delete it by its memory_id.", self._delete),
            "list_memories": (
                ListMemories,
                "A page of the workspace's memories, newest first, with the total and the next page's cursor.",
                self._list,
            ),
        }

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def tools(self) -> list[types.Tool]:
        return [
            types.Tool(name=name, description=description, inputSchema=input_schema(model))
            for name, (model, description, _) in self._tools.items()
        ]

    async def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        request_id = uuid.uuid4().hex[:16]
        model, _, handler = self._tools[name]
        try:
            parsed = model.model_validate(arguments or {})
        except ValidationError as exc:
            invalid = RequestValidationError(
                describe_validation_error(name, exc), details={"errors": exc.errors(include_url=False)}
            )
            return error_result(invalid, request_id)
        if not parsed.workspace_id:
            parsed.workspace_id = self.app.config.default_workspace
        try:
            answer = await handler(parsed, request_id)
        except ReMeError as error:
            return error_result(error, request_id)
        if isinstance(answer, types.CallToolResult):
            return answer
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=orjson.dumps(answer).decode())],
            structuredContent=answer,
            isError=False,
        )

    async def _change(
        self,
        request_id: str,
        workspace_id: str,
        action: str,
        what: str,
        change: Callable[[RequestScope, VectorStore], Awaitable[dict[str, Any]]],
        *,
        creates: bool = False,
    ) -> dict[str, Any]:
        return await self.manage.audited(request_id, workspace_id, action, what, change, creates=creates)

    async def _add(self, args: AddMemory, request_id: str) -> dict[str, Any]:
        memory: dict[str, Any] = {
            "memory_type": args.memory_type,
            "content": args.content,
            "when_to_use": args.when_to_use or args.content,
            "metadata": args.metadata,
        }
        if args.memory_type == "personal":
            memory["target"] = args.target

        async def change(scope: RequestScope, store: VectorStore) -> dict[str, Any]:
            created = await create_memory_in(store, scope.workspace_id, memory)
            return {"memory": created.model_dump(mode="json")}

        return await self._change(
            request_id, args.workspace_id, "create_memory", "creating a memory", change, creates=True
        )

    async def _search(self, args: SearchMemories, request_id: str) -> dict[str, Any] | types.CallToolResult:
        flow = SEARCH_FLOWS[args.memory_type]
        runner = self.app.flows.get(flow)
        if runner is None:
            raise NotFoundError(f"search_memories needs the flow {flow!r}, which is not configured")
        request = runner.request_model.model_validate(
            {"workspace_id": args.workspace_id, "query": args.query, "top_k": args.top_k}
        )
        status, payload = await self.app.run_validated(runner, request, request_id)
        if status != 200 or not payload.get("success", False):  # the flow's error envelope, as its own tool gives it
            message = payload.get("metadata", {}).get("error", {}).get("message", f"{flow} failed")
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=message)], structuredContent=payload, isError=True
            )
        return {"memories": payload.get("metadata", {}).get("memory_list", []), "answer": payload.get("answer", "")}

    async def _get(self, args: GetMemory, _request_id: str) -> dict[str, Any]:
        scope = self.manage.scope(args.workspace_id, "read", "reading a memory")
        return {"memory": await one_memory(await self.manage.existing(scope), scope.workspace_id, args.memory_id)}

    async def _update(self, args: UpdateMemory, request_id: str) -> dict[str, Any]:
        fields = args.model_dump(include={"content", "when_to_use", "metadata"}, exclude_none=True)
        if not fields:
            raise InvalidRequestError("update_memory changes content, when_to_use or metadata: give at least one")

        async def change(scope: RequestScope, store: VectorStore) -> dict[str, Any]:
            updated = await patch_memory_in(store, scope.workspace_id, args.memory_id, fields)
            return {"memory": updated.model_dump(mode="json")}

        return await self._change(request_id, args.workspace_id, "patch_memory", "a change of a memory", change)

    async def _delete(self, args: DeleteMemory, request_id: str) -> dict[str, Any]:
        async def change(scope: RequestScope, store: VectorStore) -> dict[str, Any]:
            await delete_memory_in(store, scope.workspace_id, args.memory_id)
            return {"deleted": True, "memory_id": args.memory_id}

        return await self._change(request_id, args.workspace_id, "delete_memory", "a deletion of a memory", change)

    async def _list(self, args: ListMemories, _request_id: str) -> dict[str, Any]:
        scope = self.manage.scope(args.workspace_id, "read", "listing memories")
        params = args.model_dump(include={"limit", "cursor", "sort", "memory_type", "q"})
        return await self.manage.list_page(scope, {key: str(value) for key, value in params.items() if value != ""})
