"""`current_op`: the name of the op running in the current task (`""` outside ops).

The flow runner sets it around each op; each `|` branch runs in its own task, so the value is exact under
concurrency. The OpenAI-compatible LLM client sends it as the `X-ReMe-Op` header, so a gateway or proxy in front of
the provider can attribute calls and tokens to the step that made them; test doubles choose their scripted replies
by it.
"""

from __future__ import annotations

from contextvars import ContextVar

current_op: ContextVar[str] = ContextVar("current_op", default="")
