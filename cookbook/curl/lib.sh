#!/usr/bin/env bash
# Helpers shared by the curl cookbook scripts. Source it after setting BASE_URL (default $REME_BASE_URL or
# http://127.0.0.1:8002). Needs curl, and jq or python3 to read fields out of responses. With $REME_API_KEY set,
# every request carries it as `Authorization: Bearer <key>` (see "Securing the service" in the README).

BASE_URL="${BASE_URL:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
BASE_URL="${BASE_URL%/}"
# One suffix per run, so repeated runs (and runs against a shared server) never see each other's memories.
RUN_ID="${REME_RUN_ID:-$(date +%s)_$$}"
LAST_BODY=""
AUTH_HEADER=()
if [ -n "${REME_API_KEY:-}" ]; then AUTH_HEADER=(-H "Authorization: Bearer $REME_API_KEY"); fi

# post FLOW JSON: POST the body to /FLOW; prints the response and stops the script unless it is HTTP 200 with
# "success": true. The body is kept in LAST_BODY for `field`.
post() {
  local flow="$1" body="$2" out status
  echo "--> POST /$flow"
  out="$(curl -sS -X POST "$BASE_URL/$flow" -H 'content-type: application/json' "${AUTH_HEADER[@]}" -d "$body" -w $'\n%{http_code}')" || {
    echo "FAIL: could not reach $BASE_URL" >&2
    exit 1
  }
  status="${out##*$'\n'}"
  LAST_BODY="${out%$'\n'*}"
  echo "<-- HTTP $status: ${LAST_BODY:0:400}"
  if [ "$status" != "200" ] || [ "$(field success)" != "true" ]; then
    echo "FAIL: /$flow answered HTTP $status without success" >&2
    exit 1
  fi
}

# field PATH: a value of LAST_BODY by dotted path (numbers index lists), printed as JSON for objects and lists.
# e.g. `field metadata.memory_list`, `field metadata.memory_list.0.memory_id`
field() {
  local path="$1"
  if command -v jq >/dev/null 2>&1; then
    local expr
    expr="$(echo ".$path" | sed -E 's/\.([0-9]+)/[\1]/g')"
    printf '%s' "$LAST_BODY" | jq -rc "$expr"
  else
    printf '%s' "$LAST_BODY" | python3 -c '
import json, sys
value = json.load(sys.stdin)
for part in sys.argv[1].split("."):
    value = value[int(part)] if isinstance(value, list) else value[part]
print(value if isinstance(value, str) else json.dumps(value))' "$path"
  fi
}

# expect TEXT DESCRIPTION: stop unless LAST_BODY contains TEXT.
expect() {
  if [[ "$LAST_BODY" != *"$1"* ]]; then
    echo "FAIL: expected $2 (\"$1\") in the response" >&2
    exit 1
  fi
}

# require_flows FLOW...: skip this script (exit 3) when the server does not offer one of the flows.
require_flows() {
  local health
  health="$(curl -sS "$BASE_URL/health")" || { echo "FAIL: could not reach $BASE_URL/health" >&2; exit 1; }
  for flow in "$@"; do
    if [[ "$health" != *"\"$flow\""* ]]; then
      echo "SKIP: the server does not offer $flow"
      exit 3
    fi
  done
}
