"""Context keys of the working-memory ops."""

from __future__ import annotations

from reme_service.flow.context import Key

#: files the offload step produced, `{root-relative POSIX path: text}`; BatchWriteFileOp writes them
WRITE_FILE_DICT: Key[dict[str, str]] = Key("write_file_dict")
