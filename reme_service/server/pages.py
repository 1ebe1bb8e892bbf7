"""Paging for the management routes (`server/manage.py`): the list filters (`ListQuery`), their parsing, and the
opaque cursors. A cursor is HMAC-bound to the workspace and the filters, with a key kept in
`<data_dir>/auth/cursor.key`, so it survives restarts and is shared by the processes of one data directory.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from reme_service.concurrency import OFF_LOOP_ITEMS, off_loop_if
from reme_service.errors import InvalidRequestError
from reme_service.schema.vector_node import VectorNode
from reme_service.server.manage_models import memory_dict

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$")


@dataclass(frozen=True)
class ListQuery:
    limit: int
    memory_type: str | None
    q: str | None
    since: str | None
    until: str | None
    after: str | None = None  # the last memory id of the previous page (from the cursor)

    @property
    def filtered(self) -> bool:
        return bool(self.memory_type or self.q or self.since or self.until)

    def signature(self) -> str:
        return orjson.dumps([self.memory_type, self.q, self.since, self.until]).decode()

    def keeps(self, node: VectorNode) -> bool:
        meta = node.metadata
        if self.memory_type and meta.get("memory_type", "task") != self.memory_type:
            return False
        modified = str(meta.get("time_modified", ""))
        if self.since and modified < self.since:
            return False
        if self.until and modified > self.until:
            return False
        if self.q:
            needle = self.q.casefold()
            return needle in node.content.casefold() or needle in str(meta.get("content", "")).casefold()
        return True


def time_bound(name: str, value: str | None, *, end: bool) -> str | None:
    """`YYYY-MM-DD[ HH:MM[:SS]]` (or with `T`) as ReMe's `YYYY-MM-DD HH:MM:SS`; a day alone is its first second
    for `since` and its last for `until`. Both bounds are inclusive, on `time_modified`."""
    if value is None or value == "":
        return None
    if not _TIME.match(value):
        raise InvalidRequestError(
            f"{name} must be YYYY-MM-DD or YYYY-MM-DD HH:MM:SS, not {value[:40]!r}", details={"field": name}
        )
    value = value.replace("T", " ")
    if len(value) == 10:
        return value + (" 23:59:59" if end else " 00:00:00")
    return value if len(value) == 19 else value + (":59" if end else ":00")


def parse_limit(raw: str | None) -> int:
    if raw is None or raw == "":
        return DEFAULT_LIMIT
    try:
        limit = int(raw)
    except ValueError:
        raise InvalidRequestError(f"limit must be an integer, not {raw[:40]!r}", details={"field": "limit"}) from None
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequestError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}", details={"field": "limit"})
    return limit


class Cursors:
    """Opaque page cursors: `<base64url of the last id>.<HMAC-SHA256 of workspace, filters and id>`. The key lives
    in `<data_dir>/auth/cursor.key` (created once, mode 0600, by whichever process needs it first)."""

    def __init__(self, key_file: Path) -> None:
        self._file = key_file
        self._key: bytes | None = None

    def _load_key(self) -> bytes:
        if self._key is None:
            self._key = _read_or_create_key(self._file)
        return self._key

    def _mac(self, workspace_id: str, query: ListQuery, after: str) -> str:
        message = orjson.dumps([workspace_id, query.signature(), after])
        digest = hmac.new(self._load_key(), message, hashlib.sha256).digest()[:18]
        return base64.urlsafe_b64encode(digest).decode()

    async def issue(self, workspace_id: str, query: ListQuery, after: str) -> str:
        await asyncio.to_thread(self._load_key)
        body = base64.urlsafe_b64encode(after.encode()).decode().rstrip("=")
        return f"{body}.{self._mac(workspace_id, query, after)}"

    async def open(self, workspace_id: str, query: ListQuery, cursor: str) -> str:
        """The id the cursor continues after; 400 for a cursor not issued for this workspace and these filters."""
        await asyncio.to_thread(self._load_key)
        invalid = InvalidRequestError(
            "invalid cursor: use the next_cursor of a page of this workspace, with the same filters",
            details={"field": "cursor"},
        )
        body, _, mac = cursor.partition(".")
        try:
            after = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        except (ValueError, UnicodeDecodeError):
            raise invalid from None
        # compare_digest takes ASCII strings only (a TypeError, a 500, for `é`): compare the bytes
        expected = self._mac(workspace_id, query, after).encode()
        if not mac or not hmac.compare_digest(mac.encode("utf-8", "surrogatepass"), expected):
            raise invalid
        return after


def _read_or_create_key(path: Path) -> bytes:
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, secrets.token_hex(32).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # the first process to get here wins; the others read its key
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return bytes.fromhex(path.read_text().strip())


def page_of_ids(ids: list[str], after: str | None, limit: int) -> tuple[list[str], bool]:
    ids.sort()
    start = bisect.bisect_right(ids, after) if after is not None else 0
    return ids[start : start + limit], start + limit < len(ids)


def page_of_nodes(nodes: list[VectorNode], query: ListQuery) -> tuple[list[dict[str, Any]], bool]:
    kept = [node for node in nodes if query.keeps(node)]
    kept.sort(key=lambda node: node.unique_id)
    start = bisect.bisect_right([n.unique_id for n in kept], query.after) if query.after is not None else 0
    page = kept[start : start + query.limit]
    return [memory_dict(node) for node in page], start + query.limit < len(kept)


async def off_loop(size: int, fn: Callable[[], Any]) -> Any:
    """Sorting and filtering `size` ids or nodes: in a worker thread above `OFF_LOOP_ITEMS`."""
    return await off_loop_if(size > OFF_LOOP_ITEMS, fn)


#: the "filters" of a workspace-list cursor, issued for workspace "" (never a workspace id): a memory page's cursor
#: never opens as one, nor the other way round
WORKSPACES = ListQuery(limit=0, memory_type=None, q=None, since=None, until=None)
