"""Read and write memory-library JSONL files (one memory dict per line), off the event loop.

Reading a big library logs its progress on the logger `reme_service.library` every `PROGRESS_SECONDS`: bytes
read of the file's size and memories per second, then the total when it took longer than that. (Embedding the
memories, the long part of a load with the local model, logs its own progress: `reme_service.embedding.local`.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from reme_service.errors import InvalidRequestError, NotFoundError, describe_validation_errors
from reme_service.schema.memory import BaseMemory, memory_from_dict
from reme_service.schema.vector_node import VectorNode
from reme_service.stores.packed import pack_nodes

logger = logging.getLogger("reme_service.library")

PROGRESS_SECONDS = 5.0
# Memories parsed between two voluntary GIL hand-offs (~2 ms of work). Without them the event loop's thread waited
# 25-100 ms at a time for the GIL while a 10,000-memory library was parsed (2 busy cores); with them, never 20 ms.
YIELD_EVERY = 200


def library_file(path: Path, workspace_id: str) -> Path:
    """A path naming a `.jsonl` file is used as is; a directory holds `<workspace_id>.jsonl` (ReMe's rule)."""
    return path if path.suffix == ".jsonl" else path / f"{workspace_id}.jsonl"


def _memories(file: Path) -> Iterator[BaseMemory]:
    """The file's memories one by one; a malformed line is a 400 naming it, a missing file a 404."""
    if not file.is_file():
        raise NotFoundError(f"memory library {str(file)!r} does not exist")
    total = file.stat().st_size
    started = logged = time.monotonic()
    done = count = 0
    with file.open("rb") as handle:
        for number, line in enumerate(handle, 1):
            done += len(line)
            if not line.strip():
                continue
            now = time.monotonic()
            if now - logged >= PROGRESS_SECONDS:
                logged = now
                logger.info(
                    "reading %s: %d memories, %d/%d bytes (%.0f%%), %.0f memories/s",
                    file.name,
                    count,
                    done,
                    total,
                    100.0 * done / max(total, 1),
                    count / (now - started),
                )
            try:
                data: Any = orjson.loads(line)
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
                    f"{file.name} line {number}: {reason}", details={"file": str(file), "line": number}
                ) from None
            count += 1
            if not count % YIELD_EVERY:
                time.sleep(0)  # hand the GIL to the event loop's thread now rather than when it insists
            yield memory
    elapsed = time.monotonic() - started
    if elapsed >= PROGRESS_SECONDS:
        logger.info("read %s: %d memories in %.1f s (%.0f memories/s)", file.name, count, elapsed, count / elapsed)


def _write(file: Path, memories: Sequence[BaseMemory]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    # A fixed short temp name: `.{file.name}.xxxxxxxx` would pass the 255-byte limit for a name that fits it.
    fd, tmp = tempfile.mkstemp(prefix=".library-", suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            for memory in memories:
                handle.write(orjson.dumps(memory.model_dump(mode="json")) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, file)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def read_library(file: Path) -> list[BaseMemory]:
    """Every memory of the file; a malformed line is a 400 naming the line, a missing file a 404."""
    return await asyncio.to_thread(lambda: list(_memories(file)))


def _parse_nodes(file: Path, workspace_id: str) -> Sequence[VectorNode]:
    return pack_nodes((memory.to_vector_node() for memory in _memories(file)), workspace_id)


async def read_library_nodes(file: Path, workspace_id: str) -> Sequence[VectorNode]:
    """The library as vector nodes of `workspace_id`, parsed and converted line by line in a worker thread and
    kept packed (`stores.packed.pack_nodes`): a 100k-memory library is ~60 MiB this way, ~230 as `VectorNode`s."""
    return await asyncio.to_thread(_parse_nodes, file, workspace_id)


async def write_library(file: Path, memories: Sequence[BaseMemory]) -> None:
    """Write atomically (temp file, fsync, rename): readers never see a half-written library."""
    await asyncio.to_thread(_write, file, memories)
