"""Request fields of the tool-memory flows that more than one op reads."""

from __future__ import annotations

from reme_service.flow.context import Input

# Declared `type: any` with `items: ToolNames`: the request model already turned a comma-separated string or a
# list into a clean, non-empty list of distinct names.
TOOL_NAMES: Input[list[str]] = Input("tool_names", list[str], factory=list)
