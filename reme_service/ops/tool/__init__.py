"""Tool ops."""

from __future__ import annotations

from reme_service.flow.op import Op

TOOL_OPS: tuple[type[Op], ...] = ()
