#!/usr/bin/env bash
# Memory libraries: load a published library (docs/library/*.jsonl) into a workspace, use it, copy it, dump it.
# Usage: cookbook/curl/library.sh [BASE_URL]
# The server resolves paths on its own machine and only inside its file roots (by default its working directory and
# data_dir): run the server from the repository root, or list the repository in `file_roots`.
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows vector_store retrieve_task_memory
LIBRARY="$(cd "$(dirname "$0")/../../docs/library" && pwd)/agent_basics.jsonl"
WS="curl_library_$RUN_ID"

# 1. Load the library file into a workspace (embedded first; the workspace is replaced only when all is ready).
post vector_store '{"workspace_id": "'"$WS"'", "action": "load", "path": "'"$LIBRARY"'"}'

# 2. Use it.
post retrieve_task_memory '{"workspace_id": "'"$WS"'", "query": "the API only returns the first page of results", "top_k": 2}'
expect "page" "a pagination experience"

# 3. Copy it into another workspace (for an agent of its own), list that one.
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "copy", "src_workspace_id": "'"$WS"'"}'
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "list"}'
expect "when_to_use" "the copied memories"

# 4. Dump a workspace as a library file (<dir>/<workspace_id>.jsonl, relative to the server's working directory).
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "dump", "path": "reme_library_dumps"}'

post vector_store '{"workspace_id": "'"$WS"'", "action": "delete"}'
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "delete"}'
echo "OK: memory library"
