"""Client-supplied file paths that the file system can take: one check, shared by the edge and the file ops.

A path with a NUL character, a `/`-separated part longer than the file system allows (255 bytes on ext4, xfs,
btrfs, tmpfs) or an overall length past `MAX_PATH_BYTES` made the OS call itself fail (`ValueError: embedded null
byte`, `OSError: File name too long`) — a 500. `check_path_text` refuses them with a message naming the field;
`FilePath` is the request-field type (a 422 at the edge) and the file ops call the same check on paths that do
not come through a request model (an agent's tool calls), turning it into a 400.

Where a path may point (inside the allowed roots) is judged later, by the ops, once it is resolved.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024


def path_problem(path: str) -> str | None:
    """Why `path` cannot name a file (a sentence), or None when the file system can take it."""
    if "\x00" in path:
        return "contains a NUL character"
    encoded = path.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_PATH_BYTES:
        return f"is {len(encoded)} bytes long; at most {MAX_PATH_BYTES} bytes (UTF-8) are allowed"
    for part in encoded.split(b"/"):
        if len(part) > MAX_COMPONENT_BYTES:
            return (
                f"has a part of {len(part)} bytes ({part[:20].decode('utf-8', 'replace')}...); each '/'-separated "
                f"part may have at most {MAX_COMPONENT_BYTES} bytes (UTF-8)"
            )
    return None


def check_path_text(path: str) -> str:
    """`path` unchanged when the file system can take it; else a `PydanticCustomError` (HTTP 422 at the edge)."""
    problem = path_problem(path)
    if problem is not None:
        raise PydanticCustomError("file_path", "path {problem}", {"problem": problem})
    return path


# The request-field type of every client file path (`items: FilePath` on a `string` field of a flow's
# input_schema). The JSON schema shows the limits: no NUL (pattern), the length, and the per-part rule in words.
FilePath = Annotated[
    str,
    AfterValidator(check_path_text),
    Field(
        max_length=MAX_PATH_BYTES,
        json_schema_extra={"pattern": "^[^\\x00]*$"},
    ),
]
