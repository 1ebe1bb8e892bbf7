#!/usr/bin/env bash
# Tool memory: record tool calls, summarise usage guidelines per tool, retrieve them by exact tool name.
# Usage: cookbook/curl/tool.sh [BASE_URL]
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows add_tool_call_result summary_tool_memory retrieve_tool_memory vector_store
WS="curl_tool_$RUN_ID"

# 1. Record what happened when the agent called its tools (judged, deduplicated, appended per tool).
post add_tool_call_result '{
  "workspace_id": "'"$WS"'",
  "tool_call_results": [
    {"tool_name": "web_search", "input": {"query": "weather in Lyon", "max_results": 5},
     "output": "5 results: Lyon weather today 14C, light rain ...", "success": true, "time_cost": 1.4},
    {"tool_name": "web_search", "input": {"query": "", "max_results": 5},
     "output": "error: empty query", "success": false, "time_cost": 0.1},
    {"tool_name": "calculator", "input": {"expression": "47 * 3"}, "output": "141", "success": true, "time_cost": 0.01}
  ]
}'
expect "web_search" "the tool in the summary"

# 2. Write usage guidelines (success patterns, common issues, statistics) for the tools.
post summary_tool_memory '{"workspace_id": "'"$WS"'", "tool_names": "web_search,calculator"}'

# 3. Before using a tool, fetch its guidelines (by exact name, never by similarity).
post retrieve_tool_memory '{"workspace_id": "'"$WS"'", "tool_names": ["web_search"]}'
expect "web_search" "the tool's memory"

post vector_store '{"workspace_id": "'"$WS"'", "action": "delete"}'
echo "OK: tool memory"
