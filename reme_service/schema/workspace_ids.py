"""Workspace ids: which are valid, and how one becomes a file or folder name, reversibly.

An id is 1-256 printable Unicode characters (spaces allowed) other than `/` and `\\`, not made of dots only:
e-mail addresses and user names in any script are ids, as ReMe 0.2 accepted them. (Control characters, line
separators and lone surrogates are not printable.)

`file_name` turns an id into a name any file system takes: the characters the ids of earlier versions were made
of (`[A-Za-z0-9._-]`) stay as they are, so data written under such an id keeps its file name; every other
character becomes `%XX` per UTF-8 byte (`%` itself never stood in an old id). A name longer than
`MAX_FILE_NAME_BYTES` is cut at an escape boundary and completed by `~` and a hash of the id (`~` never appears in an
encoded name); such a name is not reversible, so whoever needs the id back keeps it beside the data (the local
store writes it in its snapshot header). Chroma and Elasticsearch have names of their own: `stores/names.py`.

`WorkspaceId` is an id that passed `validate_workspace_id`. Every function that turns an id into a name reaching a
file system or a server (`file_name` here, the collection, index and table names of `stores/names.py`) takes one,
so mypy proves that no unchecked string becomes such a name. The service validates where a request enters (the
`auth.policy.RequestScope` of the request, the management routes) and each store at the entry of each public
operation (whose contract keeps `workspace_id: str`); inside, only `WorkspaceId`s travel.
"""

from __future__ import annotations

import hashlib
import re
from typing import NewType
from urllib.parse import unquote

from reme_service.errors import InvalidRequestError

MAX_ID_CHARS = 256
MAX_FILE_NAME_BYTES = 200  # leaves room for suffixes (".snap.tmp") under the 255-byte limit of file names
HASH_MARK = "~"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_ENCODED = re.compile(r"^(?:[A-Za-z0-9._-]|%[0-9A-F]{2})+$")

#: a workspace id that passed `validate_workspace_id` (or was read back from a name made of one)
WorkspaceId = NewType("WorkspaceId", str)

#: what the request model shows in OpenAPI (the service's own check, `validate_workspace_id`, says more)
WORKSPACE_ID_PATTERN = r"^[^/\\\x00-\x1f\x7f]{0,256}$"
DESCRIPTION = "1-256 printable characters (spaces allowed) other than '/' and '\\', not only dots"


def validate_workspace_id(workspace_id: str) -> WorkspaceId:
    """The id itself, as a `WorkspaceId`, when valid; else a 400 naming the field and the rule."""
    problem = _problem(workspace_id)
    if problem is not None:
        shown = workspace_id if len(workspace_id) <= 80 else workspace_id[:80] + "…"
        raise InvalidRequestError(
            f"invalid workspace_id {shown!r}: {problem}; use {DESCRIPTION}", details={"field": "workspace_id"}
        )
    return WorkspaceId(workspace_id)


def parse_workspace_id(raw: str) -> WorkspaceId | None:
    """`raw` as a `WorkspaceId` when valid, else None: for ids read back from storage (a name's metadata, a
    snapshot header), where an invalid one is skipped rather than refused."""
    return WorkspaceId(raw) if _problem(raw) is None else None


def _problem(workspace_id: str) -> str | None:
    if not workspace_id:
        return "it is empty"
    if len(workspace_id) > MAX_ID_CHARS:
        return f"it has {len(workspace_id)} characters"
    if "/" in workspace_id or "\\" in workspace_id:
        return "it holds a path separator"
    if not workspace_id.isprintable():
        return "it holds a control or other non-printable character"
    if set(workspace_id) == {"."}:
        return "it is made of dots only"
    return None


def file_name(workspace_id: WorkspaceId) -> str:
    """The id as a file or folder name (see the module docstring), e.g. `alice@example.com` ->
    `alice%40example.com`, `team-1` -> `team-1`."""
    pieces = [ch if ch in _SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8")) for ch in workspace_id]
    return shortened(pieces, workspace_id, MAX_FILE_NAME_BYTES, HASH_MARK)


def shortened(pieces: list[str], workspace_id: str, budget: int, mark: str) -> str:
    """The encoded `pieces` (one per character of the id) joined; when longer than `budget`, cut at a piece boundary
    (never inside an escape) and completed by `mark` and 16 hex digits of the id's SHA-256: short enough for the
    backend, distinct per id, not reversible. Every encoding of workspace ids shortens this way."""
    whole = "".join(pieces)
    if len(whole) <= budget:
        return whole
    digest = hashlib.sha256(workspace_id.encode("utf-8")).hexdigest()[:16]
    room = budget - len(mark) - len(digest)
    kept, used = [], 0
    for piece in pieces:
        if used + len(piece) > room:
            break
        kept.append(piece)
        used += len(piece)
    return f"{''.join(kept)}{mark}{digest}"


def workspace_from_file_name(name: str) -> WorkspaceId | None:
    """The id a file name stands for; None for a hashed (long-id) name or a name that is not an encoded id."""
    if not _ENCODED.fullmatch(name):
        return None
    try:
        workspace_id = unquote(name, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return None
    valid = parse_workspace_id(workspace_id)
    if valid is None or file_name(valid) != name:
        return None
    return valid
