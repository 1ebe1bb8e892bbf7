"""Tools the agent loops hand to the LLM: `Grep` and `ReadFile` over working memory, and the base class.

A tool returns text for the model. Bad arguments and 4xx failures (missing file, bad regex, path outside the
root) come back as an `Error: ...` text so the model can correct itself; anything else (a store that is down)
propagates and fails the request.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from reme_service.concurrency import ThreadLane
from reme_service.errors import InvalidRequestError
from reme_service.ops.working.file_tools import grep_file, read_file
from reme_service.state.interfaces import WorkingFiles


def arg_str(arguments: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = arguments.get(name)
    if value is None or value == "":
        if required:
            raise InvalidRequestError(f"argument '{name}' is required")
        return ""
    if not isinstance(value, str):
        raise InvalidRequestError(f"argument '{name}' must be a string")
    return value


def arg_int(arguments: dict[str, Any], name: str, default: int, *, minimum: int = 0, maximum: int = 10**6) -> int:
    value = arguments.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidRequestError(f"argument '{name}' must be an integer")
    try:
        number = int(float(value))
    except ValueError:
        raise InvalidRequestError(f"argument '{name}' must be an integer") from None
    if not minimum <= number <= maximum:
        raise InvalidRequestError(f"argument '{name}' must be between {minimum} and {maximum}")
    return number


class AgentTool(ABC):
    """One function tool: a name, a description and a JSON-schema for its arguments."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @abstractmethod
    async def call(self, arguments: dict[str, Any]) -> str: ...


class GrepTool(AgentTool):
    name = "Grep"
    description = (
        "Search one working-memory file for lines matching a regular expression (case-insensitive). Use it first "
        "to find where something is; each hit is printed as <file>:<line number>:<line>. If nothing matches, try "
        "shorter or partial keywords."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "the file, exactly as the conversation names it"},
            "pattern": {"type": "string", "description": "a regular expression, e.g. 'error|timeout'"},
            "limit": {"type": "integer", "description": "most lines to return (default 50)"},
        },
        "required": ["file_path", "pattern"],
    }

    def __init__(self, root: WorkingFiles, lane: ThreadLane) -> None:
        self.root = root
        self.lane = lane

    async def call(self, arguments: dict[str, Any]) -> str:
        file_path = arg_str(arguments, "file_path")
        pattern = arg_str(arguments, "pattern")
        limit = arg_int(arguments, "limit", 50, minimum=1, maximum=1000)
        result = await self.lane.run(grep_file, self.root, file_path, pattern, limit=limit)
        return result.text


class ReadFileTool(AgentTool):
    name = "ReadFile"
    description = (
        "Read lines of a working-memory file. offset is the 0-based first line and limit the number of lines; "
        "after a Grep hit on line N, read about 100 lines around it (offset N-50, limit 100)."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "the file, exactly as the conversation names it"},
            "offset": {"type": "integer", "description": "0-based line to start from (default 0)"},
            "limit": {"type": "integer", "description": "number of lines to read (default 100)"},
        },
        "required": ["file_path"],
    }

    def __init__(self, root: WorkingFiles) -> None:
        self.root = root

    async def call(self, arguments: dict[str, Any]) -> str:
        file_path = arg_str(arguments, "file_path")
        offset = arg_int(arguments, "offset", 0)
        limit = arg_int(arguments, "limit", 100, minimum=1, maximum=2000)
        result = await asyncio.to_thread(read_file, self.root, file_path, offset=offset, limit=limit)
        more = f"\n(more lines follow; continue with offset={offset + result.lines})" if result.has_more else ""
        return result.text + more
