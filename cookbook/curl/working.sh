#!/usr/bin/env bash
# Working memory: offload large tool results of a long conversation to files, then grep and read them back.
# Usage: cookbook/curl/working.sh [BASE_URL]
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows summary_working_memory summary_working_memory_for_as grep_working_memory read_working_memory
DIR="curl_working_$RUN_ID"
BIG_LOG="$(for i in $(seq 1 60); do printf 'row %d: status=%s ' "$i" "$([ "$i" = 42 ] && echo FAILED || echo ok)"; done)"

MESSAGES='[
  {"role": "system", "content": "You are a log analyst."},
  {"role": "user", "content": "Which row of the import failed?"},
  {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "read_log", "arguments": "{\"file\": \"import.log\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "'"$BIG_LOG"'"},
  {"role": "user", "content": "Thanks. Now summarise the import."}
]'

# 1. Compact: tool results over max_tool_message_tokens go to files under the working-memory root; the answer is
#    the shortened message list, with a pointer to each file.
post summary_working_memory '{"messages": '"$MESSAGES"', "working_summary_mode": "compact",
  "max_total_tokens": 100, "max_tool_message_tokens": 50, "keep_recent_count": 1, "store_dir": "'"$DIR"'"}'
expect "$DIR/call_1.txt" "the offloaded file in the new message list"

# 2. Find the failed row in the offloaded output, then read the file.
post grep_working_memory '{"file_path": "'"$DIR"'/call_1.txt", "pattern": "row 42: status=FAILED", "literal": true}'
expect "row 42: status=FAILED" "the matching line"
post read_working_memory '{"file_path": "'"$DIR"'/call_1.txt", "offset": 0, "limit": 5}'

# 3. The AgentScope variant returns the files to write (metadata.write_file_dict) instead of writing them.
post summary_working_memory_for_as '{"messages": '"$MESSAGES"', "working_summary_mode": "compact",
  "max_total_tokens": 100, "max_tool_message_tokens": 50, "keep_recent_count": 1}'
expect "write_file_dict" "the files to write"
echo "OK: working memory"
