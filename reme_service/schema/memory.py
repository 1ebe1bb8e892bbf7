"""Memories (task, personal, tool), tool-call records, and their mapping to vector nodes.

The mapping follows ReMe 0.2: the embedded text (`node.content`) is the memory's `when_to_use`; the rest of
the memory lives in `node.metadata`. The memory's own `score` is never replaced by a search similarity:
retrieved memories carry the similarity in `relevance`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, model_validator

from reme_service.schema.vector_node import VectorNode, new_id

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


def now_str() -> str:
    """Local time in ReMe's `YYYY-MM-DD HH:MM:SS` format."""
    return datetime.now().strftime(TIME_FORMAT)


def _metadata_dict(value: Any) -> dict[str, Any]:
    """Inner metadata arrives as a dict (0.1, dumps) or a JSON string (0.2 vector nodes)."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        parsed = json.loads(value)
        if not isinstance(parsed, dict):
            raise ValueError("metadata must be a JSON object")
        return parsed
    if isinstance(value, dict):
        return value
    raise ValueError("metadata must be an object or a JSON string of one")


def _score(value: Any) -> float:
    return 0.0 if value is None else float(value)


MetadataDict = Annotated[dict[str, Any], BeforeValidator(_metadata_dict)]
Score = Annotated[float, BeforeValidator(_score)]


class BaseMemory(BaseModel):
    """The envelope shared by every memory kind (ReMe's `BaseMemory`)."""

    model_config = ConfigDict(extra="ignore")

    workspace_id: str = ""
    memory_id: str = Field(default_factory=new_id)
    memory_type: str = "task"
    when_to_use: str = ""
    content: str = ""
    score: Score = 0.0
    time_created: str = Field(default_factory=now_str)
    time_modified: str = Field(default_factory=now_str)
    author: str = ""
    metadata: MetadataDict = Field(default_factory=dict)
    relevance: float | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        # Pre-rename library rows (`experience_id`, `experience_type`) load as memories.
        if isinstance(data, dict) and ("experience_id" in data or "experience_type" in data):
            data = dict(data)
            if "memory_id" not in data and data.get("experience_id"):
                data["memory_id"] = data["experience_id"]
            if "memory_type" not in data and data.get("experience_type"):
                data["memory_type"] = data["experience_type"]
        if isinstance(data, dict) and not data.get("memory_id"):
            data = {**data, "memory_id": new_id()}
        return data

    def _node_metadata(self) -> dict[str, Any]:
        return {
            "memory_type": self.memory_type,
            "content": self.content,
            "score": self.score,
            "time_created": self.time_created,
            "time_modified": self.time_modified,
            "author": self.author,
            "metadata": self.metadata,
        }

    def to_vector_node(self) -> VectorNode:
        return VectorNode(
            unique_id=self.memory_id,
            workspace_id=self.workspace_id,
            content=self.when_to_use,
            metadata=self._node_metadata(),
        )


class TaskMemory(BaseMemory):
    memory_type: Literal["task"] = "task"


class PersonalMemory(BaseMemory):
    """A fact about `target`. Time validity (all `YYYY-MM-DD HH:MM:SS`, empty = unbounded / unknown): the fact holds
    from `valid_from` until `valid_to` (set when a newer statement contradicts it), was stored at `recorded_at`, and
    is forgotten at `expires_at` (a TTL). Additions to ReMe's model; ReMe clients ignore them."""

    memory_type: Literal["personal"] = "personal"
    target: str = ""
    reflection_subject: str = ""
    valid_from: str = ""
    valid_to: str = ""
    recorded_at: str = ""
    expires_at: str = ""

    def _node_metadata(self) -> dict[str, Any]:
        return {
            **super()._node_metadata(),
            "target": self.target,
            "reflection_subject": self.reflection_subject,
            "valid_from": self.valid_from,
            "valid_to": self.valid_to,
            "recorded_at": self.recorded_at,
            "expires_at": self.expires_at,
        }


class ToolCallResult(BaseModel):
    """One recorded tool invocation (ReMe's `ToolCallResult`)."""

    model_config = ConfigDict(extra="ignore")

    create_time: str = Field(default="", description="when the tool was called (free text)")
    tool_name: str = Field(description="the tool's exact name")
    input: dict[str, Any] | str = Field(default="", description="the call's arguments")
    output: str = Field(default="", description="the call's result text")
    token_cost: int = Field(default=-1, description="tokens used; -1 = unknown (estimated on ingest)")
    success: bool = Field(default=True, description="whether the tool ran without a technical error")
    time_cost: float = Field(default=0.0, description="seconds the call took")
    summary: str = Field(default="", description="one-line summary (filled by the judge)")
    evaluation: str = Field(default="", description="short quality assessment (filled by the judge)")
    score: float | None = Field(default=0.0, description="result quality 0 or 1; null when it could not be judged")
    is_summarized: bool = Field(default=False, description="already included in a usage guideline")
    call_hash: str = Field(default="", description="MD5 of input|output, used for dedup (computed when empty)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="free-form call metadata")

    def compute_hash(self) -> str:
        """MD5 of `input_str|output`, with dict inputs as sorted-key JSON (ReMe's dedup key)."""
        if isinstance(self.input, dict):
            input_str = json.dumps(self.input, sort_keys=True, ensure_ascii=False)
        else:
            input_str = str(self.input)
        return hashlib.md5(f"{input_str}|{self.output}".encode(), usedforsecurity=False).hexdigest()


class ToolMemory(BaseMemory):
    memory_type: Literal["tool"] = "tool"
    tool_call_results: list[ToolCallResult] = Field(default_factory=list)

    def _node_metadata(self) -> dict[str, Any]:
        return {
            **super()._node_metadata(),
            "tool_call_results": [r.model_dump(mode="json") for r in self.tool_call_results],
        }


AnyMemory = Annotated[TaskMemory | PersonalMemory | ToolMemory, Field(discriminator="memory_type")]
_MEMORY_ADAPTER: TypeAdapter[TaskMemory | PersonalMemory | ToolMemory] = TypeAdapter(AnyMemory)
MEMORY_TYPES = ("task", "personal", "tool")


def memory_from_dict(data: dict[str, Any]) -> TaskMemory | PersonalMemory | ToolMemory:
    """Build the right memory class from a dict (`memory_type` defaults to `task`)."""
    if "memory_type" not in data and "experience_type" not in data:
        data = {**data, "memory_type": "task"}
    elif "memory_type" not in data:
        data = {**data, "memory_type": data["experience_type"]}
    return _MEMORY_ADAPTER.validate_python(data)


def memory_from_node(node: VectorNode, relevance: float | None = None) -> TaskMemory | PersonalMemory | ToolMemory:
    """Reverse of `to_vector_node`; a retrieved memory gets its search similarity as `relevance`."""
    data = {
        **node.metadata,
        "memory_id": node.unique_id,
        "workspace_id": node.workspace_id,
        "when_to_use": node.content,
    }
    if relevance is None:
        data.pop("relevance", None)  # one copy of the metadata, not two
    else:
        data["relevance"] = relevance
    return memory_from_dict(data)
