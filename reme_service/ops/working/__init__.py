"""Working ops."""

from __future__ import annotations

from reme_service.flow.op import Op

WORKING_OPS: tuple[type[Op], ...] = ()
