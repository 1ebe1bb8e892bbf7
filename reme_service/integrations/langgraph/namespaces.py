"""LangGraph namespaces and keys as the service's workspace ids and memory ids, reversibly.

A namespace `("users", "alice", "memories")` is the workspace `lg:users.alice.memories`: the store's `prefix`
(default `lg:`) and the labels joined by `.`. LangGraph forbids `.` in a label (and empty labels), so the join is
unambiguous; the characters a workspace id may not hold (`/`, `\\`, control characters) and `%` itself are written
`%XX` per UTF-8 byte. A namespace whose id would pass the service's 256 characters is an `InvalidNamespaceError`.
Workspaces without the prefix are not LangGraph's and are never listed as namespaces.

A key is the memory id, `%XX`-escaped the same way (ids travel in URL paths, where `/` cannot stand).
"""

from __future__ import annotations

from urllib.parse import unquote

from langgraph.store.base import InvalidNamespaceError

from reme_service.schema.workspace_ids import MAX_ID_CHARS, validate_workspace_id

DEFAULT_PREFIX = "lg:"
SEPARATOR = "."
_ESCAPED = frozenset("%/\\")


def _escape(text: str) -> str:
    return "".join(
        "".join(f"%{byte:02X}" for byte in ch.encode("utf-8")) if ch in _ESCAPED or not ch.isprintable() else ch
        for ch in text
    )


def namespace_to_workspace(namespace: tuple[str, ...], prefix: str = DEFAULT_PREFIX) -> str:
    """The workspace id of `namespace` (a valid one, or `InvalidNamespaceError`)."""
    if not namespace or any(not label or SEPARATOR in label for label in namespace):
        raise InvalidNamespaceError(f"namespace labels must be non-empty and hold no '.': {namespace!r}")
    workspace_id = prefix + SEPARATOR.join(_escape(label) for label in namespace)
    if len(workspace_id) > MAX_ID_CHARS:
        raise InvalidNamespaceError(
            f"namespace {namespace!r} is too long: as a workspace id it has {len(workspace_id)} characters "
            f"(at most {MAX_ID_CHARS}, the prefix {prefix!r} included)"
        )
    validate_workspace_id(workspace_id)
    return workspace_id


def workspace_to_namespace(workspace_id: str, prefix: str = DEFAULT_PREFIX) -> tuple[str, ...] | None:
    """The namespace a workspace id stands for, or None when it is not one of this prefix's."""
    if not workspace_id.startswith(prefix) or len(workspace_id) == len(prefix):
        return None
    labels = tuple(unquote(label) for label in workspace_id[len(prefix) :].split(SEPARATOR))
    return labels if all(labels) else None


def key_to_memory_id(key: str) -> str:
    return _escape(key)


def memory_id_to_key(memory_id: str) -> str:
    return unquote(memory_id)
