"""`ServiceOp[P]`: the base of every op the service ships — an engine `Op` over `ServiceContext`, with its prompt
file derived once from the module that defines it (`rerank_memory_op.py` → `rerank_memory_prompt.yaml`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, ClassVar

from reme_service.flow.op import Op, P
from reme_service.ops.common.context import ServiceContext
from reme_service.prompts.loader import prompt_file_for


class ServiceOp(Op[P, ServiceContext]):
    """An op of the service. `prompts` names the templates the op renders and the fields it passes to each; the
    app checks them against the prompt file (English and Chinese) at start-up."""

    prompts: ClassVar[dict[str, set[str]]] = {}
    prompt_file: ClassVar[Path] = Path()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        module_file = sys.modules[cls.__module__].__file__
        if module_file is not None:
            cls.prompt_file = prompt_file_for(module_file)

    def render(self, ctx: ServiceContext, name: str, **values: object) -> str:
        """The template `name` of this op's prompt file, in the request's language, filled with `values`."""
        return ctx.services.prompts.render(self.prompt_file, name, ctx.language, **values)
