#!/usr/bin/env bash
# Set up .venv with the test extras, lint, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check reme_service tests cookbook
.venv/bin/python -m pytest "$@"
