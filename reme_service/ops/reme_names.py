"""ReMe's names for what this service does, so that flow expressions copied from ReMe's configs start.

- `OP_ALIASES`: op names ReMe's configs use for an op this service has under another name. `SimpleReactOp`
  (ReMe's `react` demo agent) is `ReactSearchOp`.
- `reme_flow_content`: whole ReMe flow expressions whose ops this service merged into one. ReMe's
  `record_task_memory` chain `UpdateMemoryFreqOp() >> UpdateMemoryUtilityOp() >> UpdateVectorStoreOp()` is
  `UpdateMemoryFreqOp()` here: that op counts the use, adds the utility when asked and writes the memory back
  under the workspace lock (a lock cannot span ops, and ReMe's split lost increments).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from reme_service.flow.op import AnyOp
from reme_service.ops.working.react_search_op import ReactSearchOp

OP_ALIASES: Mapping[str, type[AnyOp]] = MappingProxyType({"SimpleReactOp": ReactSearchOp})

_MERGED_FLOWS: Mapping[str, str] = MappingProxyType(
    {"UpdateMemoryFreqOp()>>UpdateMemoryUtilityOp()>>UpdateVectorStoreOp()": "UpdateMemoryFreqOp()"}
)
_SPACE = re.compile(r"\s+")


def reme_flow_content(flow_content: str) -> str | None:
    """This service's expression for a ReMe flow expression whose ops it merged (spaces do not matter); None for
    any other expression."""
    return _MERGED_FLOWS.get(_SPACE.sub("", flow_content))
