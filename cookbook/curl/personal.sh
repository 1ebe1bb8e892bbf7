#!/usr/bin/env bash
# Personal memory: remember what a user says about themselves, recall it later, consolidate it into insights.
# Usage: cookbook/curl/personal.sh [BASE_URL]
set -euo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
source "$(dirname "$0")/lib.sh"
require_flows summary_personal_memory retrieve_personal_memory reflect_personal_memory vector_store
WS="curl_personal_$RUN_ID"

# 1. A conversation becomes observations about the user (with the time each was said).
post summary_personal_memory '{
  "workspace_id": "'"$WS"'",
  "user_name": "alice",
  "trajectories": [{"messages": [
    {"role": "user", "content": "I am vegetarian, so please never suggest meat dishes.", "time_created": "2026-11-02 12:00:00"},
    {"role": "assistant", "content": "Noted, vegetarian options only."},
    {"role": "user", "content": "I live in Lyon and I cycle to work every day.", "time_created": "2026-11-02 12:01:00"},
    {"role": "assistant", "content": "Great, thanks for telling me."}
  ]}]
}'
expect '"memory_type":"personal"' "stored personal memories"

# 2. Later, recall what matters for a question.
post retrieve_personal_memory '{"workspace_id": "'"$WS"'", "user_name": "alice", "query": "Which dishes should I suggest for vegetarian Alice?", "top_k": 3}'
expect "vegetarian" "the remembered diet"

# 3. Consolidate observations into insights (it says when there is not enough new material yet).
post reflect_personal_memory '{"workspace_id": "'"$WS"'", "user_name": "alice"}'

post vector_store '{"workspace_id": "'"$WS"'", "action": "delete"}'
echo "OK: personal memory"
