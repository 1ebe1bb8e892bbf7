#!/usr/bin/env bash
# Set up .venv with the test extras, lint, type-check (mypy, configured in pyproject.toml), and run the whole test suite; then the HTTP service tests once more
# with a real Chroma server as the store (REME_TEST_STORE=chroma), so the service is proven on both backends.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# chromium + chromedriver for tests/browser (Debian packages; never fails the run: the tests skip, saying why)
bash scripts/install_browser.sh || true
.venv/bin/ruff check reme_service tests cookbook
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
if [ "$#" -eq 0 ]; then
  echo "== service tests again on the chroma backend"
  # (the tests that choose their own backend are left out: they ran in the first pass)
  REME_TEST_STORE=chroma .venv/bin/python -m pytest tests/service -q -m "not own_backend" \
    --deselect tests/service/test_http_backends.py
fi
