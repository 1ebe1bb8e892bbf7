"""Read and write memory-library JSONL files (one memory dict per line), off the event loop.

Reading a big library logs its progress on the logger `reme_service.library` every `PROGRESS_SECONDS`: bytes
read of the file's size and memories per second, then the total when it took longer than that. (Embedding the
memories, the long part of a load with the local model, logs its own progress: `reme_service.embedding.local`.)
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from reme_service.durable import atomic_write
from reme_service.errors import InvalidRequestError, NotFoundError, describe_validation_errors
from reme_service.schema.json_limits import MAX_JSON_DEPTH, check_json_values
from reme_service.schema.memory import BaseMemory, memory_from_dict
from reme_service.schema.strict_json import strict_loads
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.inproc.packed import pack_nodes

logger = logging.getLogger("reme_service.library")

#: vets the descriptor of a library file once it is open (`FileRoots.check_open`); raises to refuse it
OpenCheck = Callable[[int], None]

PROGRESS_SECONDS = 5.0
# Memories parsed between two voluntary GIL hand-offs (~2 ms of work). Without them the event loop's thread waited
# 25-100 ms at a time for the GIL while a 10,000-memory library was parsed (2 busy cores); with them, never 20 ms.
YIELD_EVERY = 200
_DIGITS_AS_ZERO = bytes(ord("0") if chr(b).isdigit() and b < 128 else b for b in range(256))
_LONG_DIGITS = b"0" * 19


#: the longest file name Linux file systems take, in bytes
NAME_MAX = 255
_HASHED_TAIL = 1 + 16 + len(".jsonl")  # "-" + 16 hex digits of the id's sha256 + ".jsonl"


def library_file(path: Path, workspace_id: str) -> Path:
    """A path naming a `.jsonl` file is used as is; a directory holds `<workspace_id>.jsonl` (ReMe's rule). A name
    that would pass `NAME_MAX` bytes (a workspace id of 90 CJK characters is 270) is the id cut to fit on a
    character boundary, then `-` and 16 hex digits of its sha256: one name per id, the same for dump and load. (A
    `.jsonl` name the client gave past that limit is refused with the request: `schema/paths.py`.)"""
    if path.suffix == ".jsonl":
        return path
    name = f"{workspace_id}.jsonl"
    if len(name.encode()) > NAME_MAX:
        head = workspace_id.encode()[: NAME_MAX - _HASHED_TAIL].decode(errors="ignore")
        name = f"{head}-{hashlib.sha256(workspace_id.encode()).hexdigest()[:16]}.jsonl"
    return path / name


def _memories(file: Path, shown: str = "", check: OpenCheck | None = None) -> Iterator[BaseMemory]:
    """The file's memories one by one; a malformed line is a 400 naming it, a missing file a 404. Messages name the
    file as `shown` (how the client named it), never by its server path; `check` vets the open descriptor."""
    shown = shown or file.name
    if not file.is_file():
        raise NotFoundError(f"memory library {shown!r} does not exist")
    total = file.stat().st_size
    with file.open("rb") as handle:
        if check is not None:
            check(handle.fileno())
        yield from parse_lines(handle, shown, total)


def _loads(line: bytes) -> Any:
    """One line's JSON, held to the limits of a request's values (`schema/json_limits.py`) where it could break them.
    orjson reads an integer past 64 bits as a rounded float, silently: a line with a run of 19 digits or more, the
    only kind that can hold one, is read by the stdlib parser, which keeps it exact, and checked. So is a line of
    more than `MAX_JSON_DEPTH` brackets, the only kind that can nest deeper. (orjson refuses lone surrogates itself.)
    Other lines, nearly all, cost ~1.3 µs more (20,000 lines of 600 bytes: 128 ms, now 155)."""
    if _LONG_DIGITS in line.translate(_DIGITS_AS_ZERO):  # (C speed; a regular expression took as long as orjson)
        try:
            data = strict_loads(line)
        except RecursionError:
            raise ValueError("nested too deeply") from None
    else:
        data = orjson.loads(line)
        if line.count(b"{") + line.count(b"[") <= MAX_JSON_DEPTH or not isinstance(data, dict):
            return data
    if isinstance(data, dict):
        check_json_values(data, "memory")
    return data


def parse_lines(lines: Iterable[bytes], shown: str, total: int) -> Iterator[BaseMemory]:
    """Library lines (`total` bytes in all, for the progress log) as memories; a malformed line is a 400 naming
    `shown` and the line number. Blank lines are skipped. A line is held to the limits of a request's values
    (`schema/json_limits.py`: 64-bit integers, 64 levels of nesting), as `vector_store insert` is: a memory nested
    250 levels deep was loaded, and every later `list` of its workspace answered 500, and an integer past 64 bits
    was stored rounded to a float."""
    started = logged = time.monotonic()
    done = count = 0
    for number, line in enumerate(lines, 1):
        done += len(line)
        if not line.strip():
            continue
        now = time.monotonic()
        if now - logged >= PROGRESS_SECONDS:
            logged = now
            logger.info(
                "reading %s: %d memories, %d/%d bytes (%.0f%%), %.0f memories/s",
                shown,
                count,
                done,
                total,
                100.0 * done / max(total, 1),
                count / (now - started),
            )
        try:
            data: Any = _loads(line)
            if not isinstance(data, dict):
                raise ValueError("a line must be a JSON object")
            memory = memory_from_dict(data)
        except (orjson.JSONDecodeError, ValueError, ValidationError) as exc:
            reason = (
                describe_validation_errors(exc, line="field '{loc}': {msg}", limit=1)
                if isinstance(exc, ValidationError)
                else str(exc).splitlines()[0]
            )
            raise InvalidRequestError(
                f"{shown} line {number}: {reason}", details={"file": shown, "line": number}
            ) from None
        count += 1
        if not count % YIELD_EVERY:
            time.sleep(0)  # hand the GIL to the event loop's thread now rather than when it insists
        yield memory
    elapsed = time.monotonic() - started
    if elapsed >= PROGRESS_SECONDS:
        logger.info("read %s: %d memories in %.1f s (%.0f memories/s)", shown, count, elapsed, count / elapsed)


def _write(file: Path, memories: Sequence[BaseMemory]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    # A unique short temp name: concurrent dumps to one file must not share it, and `.{file.name}.tmp` would pass
    # the 255-byte limit for a name that fits it.
    fd, tmp = tempfile.mkstemp(prefix=".library-", suffix=".tmp", dir=file.parent)
    os.close(fd)
    atomic_write(file, (memory_line(m) for m in memories), tmp=Path(tmp))


def memory_line(memory: BaseMemory) -> bytes:
    """One library line: the memory as JSON and a newline (what `dump` writes and the management export streams)."""
    return orjson.dumps(memory.model_dump(mode="json")) + b"\n"


async def read_library(file: Path, shown: str = "", check: OpenCheck | None = None) -> list[BaseMemory]:
    """Every memory of the file; a malformed line is a 400 naming the line, a missing file a 404."""
    return await asyncio.to_thread(lambda: list(_memories(file, shown, check)))


def _parse_nodes(file: Path, workspace_id: str, shown: str, check: OpenCheck | None) -> Sequence[VectorNode]:
    return pack_nodes((memory.to_vector_node() for memory in _memories(file, shown, check)), workspace_id)


async def read_library_nodes(
    file: Path, workspace_id: str, shown: str = "", check: OpenCheck | None = None
) -> Sequence[VectorNode]:
    """The library as vector nodes of `workspace_id`, parsed and converted line by line in a worker thread and
    kept packed (`stores.inproc.packed.pack_nodes`): a 100k-memory library is ~60 MiB this way, ~230 as
    `VectorNode`s."""
    return await asyncio.to_thread(_parse_nodes, file, workspace_id, shown, check)


async def write_library(file: Path, memories: Sequence[BaseMemory]) -> None:
    """Write atomically (`durable.atomic_write`: temp file, fsync, rename, directory fsync): readers never see a
    half-written library, and a dump that answered survives a crash."""
    await asyncio.to_thread(_write, file, memories)


async def parse_library_bytes(data: bytes, workspace_id: str, shown: str) -> Sequence[VectorNode]:
    """A library sent as bytes (the management API's import) as packed vector nodes of `workspace_id`, parsed in a
    worker thread exactly as a library file is; a malformed line is a 400 naming `shown` and the line number."""

    def parse() -> Sequence[VectorNode]:
        memories = parse_lines(io.BytesIO(data), shown, len(data))
        return pack_nodes((memory.to_vector_node() for memory in memories), workspace_id)

    return await asyncio.to_thread(parse)
