#!/usr/bin/env bash
# Set up .venv and start the service on the embedded default (local store, local MiniLM, no LLM) at 127.0.0.1:8002.
# Extra arguments are passed to `reme` (e.g. http.port=9000 llm.default.model_name=...).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/reme "$@"
