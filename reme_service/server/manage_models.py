"""What the management routes answer (`server/manage.py`), as OpenAPI shows it: the response models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, RootModel

from reme_service.history.entry import HistoryEntry
from reme_service.schema.memory import memory_from_node
from reme_service.schema.vector_node import VectorNode


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
    memories: list[dict[str, Any]] = Field(description="ReMe memory dicts, in the order `sort` asked (memory_id)")
    next_cursor: str | None = Field(
        description="pass as `cursor` (same filters and sort) for the next page; null at the end"
    )
    total: int = Field(description="how many memories match the filters, over all pages")


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


def memory_dict(node: VectorNode) -> dict[str, Any]:
    return memory_from_node(node).model_dump(mode="json")
