"""Personal ops."""

from __future__ import annotations

from reme_service.flow.op import Op

PERSONAL_OPS: tuple[type[Op], ...] = ()
