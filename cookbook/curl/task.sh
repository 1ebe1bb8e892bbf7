#!/usr/bin/env bash
# Task memory: learn from a scored trajectory, retrieve the experience for a similar task, count its use, prune.
# Usage: cookbook/curl/task.sh [BASE_URL]
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows summary_task_memory retrieve_task_memory retrieve_task_memory_simple record_task_memory \
  delete_task_memory summary_task_memory_simple vector_store
WS="curl_task_$RUN_ID"

# 1. An agent run, scored 1.0 (success), becomes task memory. Without an LLM the service keeps the task and the
#    key steps as a raw experience (metadata.no_llm_ops says so); with one it extracts success patterns.
post summary_task_memory '{
  "workspace_id": "'"$WS"'",
  "trajectories": [{
    "task_id": "t1",
    "score": 1.0,
    "metadata": {"query": "List every invoice of March, the API returns 20 per page"},
    "messages": [
      {"role": "user", "content": "List every invoice of March, the API returns 20 per page"},
      {"role": "assistant", "content": "Calling list_invoices(month=3, page=1), then page=2 until a page is empty."},
      {"role": "assistant", "content": "Found 47 invoices across 3 pages."}
    ]
  }]
}'
expect '"memory_type":"task"' "a stored task memory"

# 2. A similar task retrieves it: the answer is ready to paste into a prompt, metadata.memory_list has the memories
#    (each with its stored score and a separate relevance).
post retrieve_task_memory '{"workspace_id": "'"$WS"'", "query": "Fetch all invoices of April from the paged API", "top_k": 3}'
expect "When to use" "formatted memories in the answer"
MEMORIES="$(field metadata.memory_list)"

# 3. The same retrieval merged into one text block.
post retrieve_task_memory_simple '{"workspace_id": "'"$WS"'", "query": "Fetch all invoices of April", "top_k": 3}'

# 4. Tell the service the memories were used and helped: freq + 1 and utility + 1 on the stored memories.
post record_task_memory '{"workspace_id": "'"$WS"'", "memory_dicts": '"$MEMORIES"', "update_utility": true}'

# 5. The one-call-per-trajectory summariser, for a failed run this time.
post summary_task_memory_simple '{
  "workspace_id": "'"$WS"'",
  "trajectories": [{"score": 0.0, "metadata": {"query": "Delete the duplicate contacts"},
    "messages": [{"role": "user", "content": "Delete the duplicate contacts"},
                 {"role": "assistant", "content": "Deleted every contact named Smith."}]}]
}'

# 6. Prune memories used at least 5 times that helped in fewer than half of the uses (none yet).
post delete_task_memory '{"workspace_id": "'"$WS"'", "freq_threshold": 5, "utility_threshold": 0.5}'

post vector_store '{"workspace_id": "'"$WS"'", "action": "delete"}'
echo "OK: task memory"
