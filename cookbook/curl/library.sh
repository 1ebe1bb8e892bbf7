#!/usr/bin/env bash
# Memory libraries: load a published library (docs/library/*.jsonl) into a workspace, use it, copy it, dump it.
# Usage: cookbook/curl/library.sh [BASE_URL]
# Paths name files in the server's library roots: `docs/library/...` the libraries that ship with it (read-only),
# anything else its own `<data_dir>/libraries/` (where dumps go). No path reaches outside them.
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows vector_store retrieve_task_memory
LIBRARY="docs/library/agent_basics.jsonl"
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

# 4. Dump a workspace as a library file: <data_dir>/libraries/reme_library_dumps/<workspace_id>.jsonl on the server
#    (with an API key for some workspaces: under <data_dir>/libraries/workspaces/<workspace_id>/, the key's own folder).
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "dump", "path": "reme_library_dumps"}'

post vector_store '{"workspace_id": "'"$WS"'", "action": "delete"}'
post vector_store '{"workspace_id": "'"$WS"'_copy", "action": "delete"}'
echo "OK: memory library"
