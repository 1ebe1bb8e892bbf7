"""The usage counters of a task memory: `freq` (times retrieved and used) and `utility` (times it helped).

Both live in the memory's inner `metadata` (ReMe's layout). Missing, negative or non-numeric values count as 0.
"""

from __future__ import annotations

from typing import Any


def counter(metadata: dict[str, Any], name: str) -> int:
    value = metadata.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        return 0
    return int(value)
