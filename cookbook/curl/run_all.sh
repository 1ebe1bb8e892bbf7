#!/usr/bin/env bash
# Run every curl cookbook script against a live server; exits non-zero when any of them fails.
# Usage: cookbook/curl/run_all.sh [BASE_URL]     (default: $REME_BASE_URL, else http://127.0.0.1:8002)
# A script whose flows the server does not offer (disabled by config) is reported as skipped.
set -uo pipefail
BASE_URL="${1:-${REME_BASE_URL:-http://127.0.0.1:8002}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
passed=0 failed=0 skipped=0 failures=()
for script in task personal tool working library; do
  echo "=== $script"
  bash "$HERE/$script.sh" "$BASE_URL"
  case $? in
    0) passed=$((passed + 1)) ;;
    3) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); failures+=("$script") ;;
  esac
done
[ "$failed" -eq 0 ] || echo "failed: ${failures[*]}"
echo "curl cookbook: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
