"""One typed method per flow, shared by the blocking and the asyncio client (`reme_service.client`).

`FlowMethods[R]` only builds the request: each method names its flow's fields and calls `self.call(flow, ...)`,
which returns `FlowResult` in the blocking client and `Awaitable[FlowResult]` in the asyncio one. Every method
takes `workspace_id` (the client's default when omitted) and `**fields` for anything else the flow accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

R = TypeVar("R")

Json = Mapping[str, Any] | BaseModel  # a JSON object, or a pydantic model of one (Message, Trajectory, ToolCallResult)
VectorStoreAction = Literal["list", "dump", "load", "copy", "delete", "delete_ids", "insert", "history"]
WorkingSummaryMode = Literal["compact", "compress", "auto"]


class FlowMethods(Generic[R]):
    """Typed shortcuts over `call`; subclasses implement `call`."""

    def call(self, flow: str, /, **fields: Any) -> R:
        raise NotImplementedError

    # -- task memory ----------------------------------------------------------------------------------

    def retrieve_task_memory(
        self, query: str, *, top_k: int | None = None, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Task memories (experiences) for `query`: `answer` is the formatted text, `metadata.memory_list` the list."""
        return self.call("retrieve_task_memory", query=query, top_k=top_k, workspace_id=workspace_id, **fields)

    def retrieve_task_memory_simple(
        self, query: str, *, top_k: int | None = None, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Task memories for `query`, merged into one text block."""
        return self.call("retrieve_task_memory_simple", query=query, top_k=top_k, workspace_id=workspace_id, **fields)

    def summary_task_memory(self, trajectories: Sequence[Json], *, workspace_id: str | None = None, **fields: Any) -> R:
        """Distil scored trajectories (`{messages, score, metadata: {query}}`) into stored task memories."""
        return self.call("summary_task_memory", trajectories=trajectories, workspace_id=workspace_id, **fields)

    def summary_task_memory_simple(
        self, trajectories: Sequence[Json], *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """One LLM call per trajectory (at most two memories each); stored."""
        return self.call("summary_task_memory_simple", trajectories=trajectories, workspace_id=workspace_id, **fields)

    def record_task_memory(
        self, memory_dicts: Sequence[Json], update_utility: bool, *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Count a use of retrieved memories (freq + 1; utility + 1 when they helped)."""
        return self.call(
            "record_task_memory",
            memory_dicts=memory_dicts,
            update_utility=update_utility,
            workspace_id=workspace_id,
            **fields,
        )

    def delete_task_memory(
        self, freq_threshold: int, utility_threshold: float, *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Delete memories used at least `freq_threshold` times whose utility / freq is below `utility_threshold`."""
        return self.call(
            "delete_task_memory",
            freq_threshold=freq_threshold,
            utility_threshold=utility_threshold,
            workspace_id=workspace_id,
            **fields,
        )

    # -- personal memory ------------------------------------------------------------------------------

    def summary_personal_memory(
        self,
        trajectories: Sequence[Json] | None = None,
        *,
        messages: Sequence[Json] | None = None,
        user_name: str | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Turn what a user said (`trajectories` of `{messages}`, or `messages`) into stored personal memories."""
        return self.call(
            "summary_personal_memory",
            trajectories=trajectories,
            messages=messages,
            user_name=user_name,
            workspace_id=workspace_id,
            **fields,
        )

    def reflect_personal_memory(
        self, *, user_name: str | None = None, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Consolidate a user's unreflected observations into insights."""
        return self.call("reflect_personal_memory", user_name=user_name, workspace_id=workspace_id, **fields)

    def retrieve_personal_memory(
        self,
        query: str | None = None,
        *,
        top_k: int | None = None,
        user_name: str | None = None,
        as_of: str | None = None,
        include_invalid: bool | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Personal memories relevant to `query` (or to the last user message of `messages=`), among the facts valid
        at `as_of` (default now; `include_invalid=True` for all)."""
        return self.call(
            "retrieve_personal_memory",
            query=query,
            top_k=top_k,
            user_name=user_name,
            as_of=as_of,
            include_invalid=include_invalid,
            workspace_id=workspace_id,
            **fields,
        )

    # -- tool memory ----------------------------------------------------------------------------------

    def add_tool_call_result(
        self, tool_call_results: Sequence[Json], *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Record tool calls (`{tool_name, input, output, success, time_cost, ...}`) in their tools' memories."""
        return self.call(
            "add_tool_call_result", tool_call_results=tool_call_results, workspace_id=workspace_id, **fields
        )

    def summary_tool_memory(
        self, tool_names: str | Sequence[str], *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """Write usage guidelines for the named tools from their recorded calls."""
        return self.call("summary_tool_memory", tool_names=_names(tool_names), workspace_id=workspace_id, **fields)

    def retrieve_tool_memory(
        self, tool_names: str | Sequence[str], *, workspace_id: str | None = None, **fields: Any
    ) -> R:
        """The memories (guidelines and statistics) of the named tools."""
        return self.call("retrieve_tool_memory", tool_names=_names(tool_names), workspace_id=workspace_id, **fields)

    def use_mock_search(self, query: str, *, workspace_id: str | None = None, **fields: Any) -> R:
        """Benchmark helper: run one of the mock search tools and return its tool-call record."""
        return self.call("use_mock_search", query=query, workspace_id=workspace_id, **fields)

    # -- working memory -------------------------------------------------------------------------------

    def summary_working_memory(
        self,
        messages: Sequence[Json],
        *,
        working_summary_mode: WorkingSummaryMode | None = None,
        store_dir: str | None = None,
        chat_id: str | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Offload a long message list to files; the answer/metadata hold the shortened list."""
        return self.call(
            "summary_working_memory",
            messages=messages,
            working_summary_mode=working_summary_mode,
            store_dir=store_dir,
            chat_id=chat_id,
            workspace_id=workspace_id,
            **fields,
        )

    def summary_working_memory_for_as(
        self,
        messages: Sequence[Json],
        *,
        working_summary_mode: WorkingSummaryMode | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """As `summary_working_memory`, but returns the files to write instead of writing them."""
        return self.call(
            "summary_working_memory_for_as",
            messages=messages,
            working_summary_mode=working_summary_mode,
            workspace_id=workspace_id,
            **fields,
        )

    def grep_working_memory(
        self,
        file_path: str,
        pattern: str,
        *,
        limit: int | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Matching lines of an offloaded file."""
        return self.call(
            "grep_working_memory",
            file_path=file_path,
            pattern=pattern,
            limit=limit,
            workspace_id=workspace_id,
            **fields,
        )

    def read_working_memory(
        self,
        file_path: str,
        *,
        offset: int | None = None,
        limit: int | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Lines `offset` .. `offset + limit` of an offloaded file."""
        return self.call(
            "read_working_memory",
            file_path=file_path,
            offset=offset,
            limit=limit,
            workspace_id=workspace_id,
            **fields,
        )

    # -- agents ---------------------------------------------------------------------------------------

    def agentic_retrieve(self, messages: Sequence[Json], *, workspace_id: str | None = None, **fields: Any) -> R:
        """A ReAct agent over offloaded working memory (needs an LLM on the server)."""
        return self.call("agentic_retrieve", messages=messages, workspace_id=workspace_id, **fields)

    def react(
        self,
        query: str | None = None,
        *,
        messages: Sequence[Json] | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """A ReAct agent with a search tool (needs an LLM on the server)."""
        return self.call("react", query=query, messages=messages, workspace_id=workspace_id, **fields)

    # -- workspaces and libraries ---------------------------------------------------------------------

    def vector_store(
        self,
        action: VectorStoreAction,
        *,
        path: str | None = None,
        src_workspace_id: str | None = None,
        memory_ids: Sequence[str] | None = None,
        memory_dicts: Sequence[Json] | None = None,
        memory_id: str | None = None,
        workspace_id: str | None = None,
        **fields: Any,
    ) -> R:
        """Operate on a workspace: list, dump/load a library file, copy, delete, delete_ids, insert, history (of
        `memory_id`)."""
        return self.call(
            "vector_store",
            action=action,
            path=path,
            src_workspace_id=src_workspace_id,
            memory_ids=memory_ids,
            memory_dicts=memory_dicts,
            memory_id=memory_id,
            workspace_id=workspace_id,
            **fields,
        )


def _names(tool_names: str | Sequence[str]) -> str | list[str]:
    return tool_names if isinstance(tool_names, str) else list(tool_names)
