"""`PersonalOp[P]`: the base of the personal ops that write prompts. The personal flows let a request choose the
prompt language (`language`: `en`, `zh`, or empty for the service's), so these ops render in that language
rather than the service's, and declare the field."""

from __future__ import annotations

from typing import Any, ClassVar

from reme_service.flow.context import Input
from reme_service.flow.op import P
from reme_service.ops.common.context import ServiceContext
from reme_service.ops.common.op import ServiceOp
from reme_service.ops.personal import fields
from reme_service.ops.personal.memories import language


class PersonalOp(ServiceOp[P]):
    """Not registered itself. Subclasses extend `inputs` (`(*PersonalOp.inputs, ...)`)."""

    inputs: ClassVar[tuple[Input[Any], ...]] = (fields.LANGUAGE,)

    def render(self, ctx: ServiceContext, name: str, **values: object) -> str:
        """The template `name` of this op's prompt file in the request's language, filled with `values`."""
        return ctx.services.prompts.render(self.prompt_file, name, language(ctx), **values)
