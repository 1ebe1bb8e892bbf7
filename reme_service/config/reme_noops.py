"""Configuration keys printed in ReMe's docs that configure nothing, here or in ReMe: accepted with a warning.

- `http_service.*` (ReMe's MCP quick start: `http_service.port=8001`, `http_service.host=...`): no such section
  exists in ReMe either, so those values never took effect there; the ports are `http.port` and `mcp.port`.
- `op.*` (ReMe's tool-memory tuning section, ReMe 0.1's per-op settings): ReMe 0.2 reads op parameters from the
  flow expression only, and so does this service (`flow.<name>.flow_content="Op(param=value)"`).

Every other unknown key stays an error (`AppConfig` forbids extra keys), so a mistyped key is never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

NOOP_SECTIONS: Mapping[str, str] = MappingProxyType(
    {
        "http_service": "ReMe has no http_service section either (its MCP guide's example never took effect); "
        "the ports are http.port and mcp.port",
        "op": "op parameters are given in the flow expression, e.g. "
        'flow.add_tool_call_result.flow_content="ParseToolCallResultOp(max_history_tool_call_cnt=100)"',
    }
)


def drop_noop_keys(data: dict[str, Any]) -> list[str]:
    """Remove ReMe's no-op sections from the raw config `data` (in place); one warning per key removed, naming it
    and why it is ignored."""
    warnings: list[str] = []
    for section, why in NOOP_SECTIONS.items():
        if section in data:
            for key in _leaves(section, data.pop(section)):
                warnings.append(f"config key {key!r} is ignored: {why}")
    return warnings


def _leaves(prefix: str, value: Any) -> list[str]:
    if isinstance(value, Mapping) and value:
        return [leaf for key, child in value.items() for leaf in _leaves(f"{prefix}.{key}", child)]
    return [prefix]
