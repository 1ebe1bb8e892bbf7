"""Request fields of the working-memory ops.

The offload knobs are read by `offload.read_request`, so every op that offloads (`MessageOffloadOp`,
`AgenticRetrieveOp`) declares `OFFLOAD_INPUTS`. Defaults are those of ReMe 0.2's code (see `offload.py`); the
flows' `input_schema` declares the same ones, so they only apply to a flow that leaves a knob out.
"""

from __future__ import annotations

from reme_service.flow.context import Input

WORKING_SUMMARY_MODE: Input[str] = Input("working_summary_mode", str, default="auto")
COMPACT_RATIO_THRESHOLD: Input[float] = Input("compact_ratio_threshold", float, default=0.75)
MAX_TOTAL_TOKENS: Input[int] = Input("max_total_tokens", int, default=20000)
MAX_TOOL_MESSAGE_TOKENS: Input[int] = Input("max_tool_message_tokens", int, default=2000)
GROUP_TOKEN_THRESHOLD: Input[int | None] = Input("group_token_threshold", int)
KEEP_RECENT_COUNT: Input[int] = Input("keep_recent_count", int, default=10)
STORE_DIR: Input[str] = Input("store_dir", str, default="")
CHAT_ID: Input[str] = Input("chat_id", str, default="")
PREVIEW_CHAR_LENGTH: Input[int] = Input("preview_char_length", int, default=0)

OFFLOAD_INPUTS = (
    WORKING_SUMMARY_MODE,
    COMPACT_RATIO_THRESHOLD,
    MAX_TOTAL_TOKENS,
    MAX_TOOL_MESSAGE_TOKENS,
    GROUP_TOKEN_THRESHOLD,
    KEEP_RECENT_COUNT,
    STORE_DIR,
    CHAT_ID,
    PREVIEW_CHAR_LENGTH,
)

#: a working-memory file, relative to the root (grep and read)
FILE_PATH: Input[str] = Input("file_path", str, default="")
