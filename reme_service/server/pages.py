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
#: the orders a memory page may be listed in: a field, ascending, or descending with a leading `-`; ties (equal
#: times) are broken by memory id in the same direction, so every order is total and a cursor resumes it exactly
SORTS = ("memory_id", "-memory_id", "time_created", "-time_created", "time_modified", "-time_modified")
DEFAULT_SORT = "memory_id"
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2})?)?$")


@dataclass(frozen=True)
class ListQuery:
    limit: int
    memory_type: str | None
    q: str | None
    since: str | None
    until: str | None
    sort: str = DEFAULT_SORT
    after: str | None = None  # where the previous page ended (from the cursor): `SortKey.encode` of its last memory

    @property
    def filtered(self) -> bool:
        return bool(self.memory_type or self.q or self.since or self.until)

    @property
    def by_id(self) -> bool:
        """Whether the order is by memory id alone, so a page can be cut from the ids without reading memories."""
        return self.sort.lstrip("-") == "memory_id"

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def signature(self) -> str:
        # a cursor is bound to the filters and the order: it never resumes a page of another listing
        fields: list[str | None] = [self.memory_type, self.q, self.since, self.until]
        if self.sort != DEFAULT_SORT:
            fields.append(self.sort)
        return orjson.dumps(fields).decode()

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


def parse_sort(raw: str | None) -> str:
    if raw is None or raw == "":
        return DEFAULT_SORT
    if raw not in SORTS:
        raise InvalidRequestError(
            f"sort must be one of {', '.join(SORTS)}, not {raw[:40]!r}", details={"field": "sort"}
        )
    return raw


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


@dataclass(frozen=True)
class Page:
    """One page of a listing: its memories (or ids), whether more follow, how many match in all, and the key to
    issue a cursor for (`None` on an empty page)."""

    items: list[Any]
    more: bool
    total: int
    last: str | None


def _window(keys: list[Any], after: Any | None, limit: int, descending: bool) -> tuple[int, int, bool]:
    """The slice `[start, end)` of the ascending `keys` that is the next page after `after`, and whether more follow.
    Descending pages are the slice read backwards: from just before `after` down."""
    if not descending:
        start = bisect.bisect_right(keys, after) if after is not None else 0
        return start, min(start + limit, len(keys)), start + limit < len(keys)
    end = bisect.bisect_left(keys, after) if after is not None else len(keys)
    return max(0, end - limit), end, end - limit > 0


def page_of_ids(ids: list[str], query: ListQuery) -> Page:
    """A page of the unfiltered listing by memory id, cut from the ids alone."""
    ids.sort()
    start, end, more = _window(ids, query.after, query.limit, query.descending)
    page = ids[start:end]
    if query.descending:
        page.reverse()
    return Page(page, more, len(ids), page[-1] if page else None)


def _time_key(node: VectorNode, field: str) -> tuple[str, str]:
    return str(node.metadata.get(field, "")), node.unique_id


def page_of_nodes(nodes: list[VectorNode], query: ListQuery) -> Page:
    """A page of the listing of `nodes` (one workspace's memories): filtered, ordered by `query.sort`, after the
    cursor's position; the items are memory dicts. A time order's cursor position is `[time, memory_id]`."""
    kept = [node for node in nodes if query.keeps(node)]
    if query.by_id:
        kept.sort(key=lambda node: node.unique_id)
        keys: list[Any] = [node.unique_id for node in kept]
        after: Any | None = query.after
    else:
        field = query.sort.lstrip("-")
        kept.sort(key=lambda node: _time_key(node, field))
        keys = [_time_key(node, field) for node in kept]
        after = _time_position(query.after) if query.after is not None else None
    start, end, more = _window(keys, after, query.limit, query.descending)
    page = kept[start:end]
    if query.descending:
        page.reverse()
    last: str | None = None
    if page:
        last_key = keys[start] if query.descending else keys[end - 1]
        last = last_key if query.by_id else orjson.dumps(list(last_key)).decode()
    return Page([memory_dict(node) for node in page], more, len(kept), last)


def _time_position(after: str) -> tuple[str, str]:
    """A time order's cursor position, `[time, memory_id]` (the cursor's HMAC has vouched for it: it is ours)."""
    try:
        time, memory_id = orjson.loads(after)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        raise InvalidRequestError(
            "invalid cursor: it was issued for another order", details={"field": "cursor"}
        ) from None
    return str(time), str(memory_id)


async def off_loop(size: int, fn: Callable[[], Any]) -> Any:
    """Sorting and filtering `size` ids or nodes: in a worker thread above `OFF_LOOP_ITEMS`."""
    return await off_loop_if(size > OFF_LOOP_ITEMS, fn)


#: the "filters" of a workspace-list cursor, issued for workspace "" (never a workspace id): a memory page's cursor
#: never opens as one, nor the other way round
WORKSPACES = ListQuery(limit=0, memory_type=None, q=None, since=None, until=None)
