"""TEMPORARY re-export while the op families move to `ops.common.keys`; deleted when the last one has."""

from reme_service.ops.common.keys import DELETED_MEMORY_IDS, EMBEDDED, MEMORY_LIST, QUERY

__all__ = ["DELETED_MEMORY_IDS", "EMBEDDED", "MEMORY_LIST", "QUERY"]
