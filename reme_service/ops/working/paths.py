"""Safe file names and paths for working-memory files.

Where the files live and how client paths are confined to their root is the state layer's (`WorkingFiles`:
`state/working_folder.py` on this machine's disk, `state/pg/working.py` in PostgreSQL); `WorkingRoot`,
`write_files_atomically` and `existing_indices` (the disk's) are named here too, where the ops found them.

File names built from client values (`tool_call_id`, `chat_id`) go through `safe_stem`, so they can never hold a
path separator or start with a dot. Paths handed back to clients (placeholders, `write_file_dict` keys, grep
output) are POSIX paths relative to the root, which the grep/read tools accept as they are.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from reme_service.state.working_folder import WorkingRoot, existing_indices, write_files_atomically

__all__ = ["MAX_STEM_CHARS", "WorkingRoot", "existing_indices", "join", "safe_stem", "write_files_atomically"]

MAX_STEM_CHARS = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_stem(raw: str) -> str:
    """A file-name stem made of `[A-Za-z0-9_.-]` only, without leading dots, at most 120 characters.

    Runs of other characters become one `_`. Returns "" when nothing usable is left (the caller then picks a
    fresh name such as a uuid).
    """
    stem = _UNSAFE.sub("_", raw).lstrip(".")[:MAX_STEM_CHARS]
    return "" if stem.strip("_.") == "" else stem


def join(directory: str, name: str) -> str:
    """`directory/name` as a root-relative POSIX path (`directory` may be "")."""
    return str(PurePosixPath(directory) / name) if directory else name
