"""The TypeScript client (`clients/typescript`): built with tsc, its node tests run against a live service, packed.

`npm test` starts its own service from this checkout (this interpreter, a temporary data dir, the hash embedder,
an admin API key) and stops it; so one run covers the Bearer key, 401/403/413 and the rest.
"""

from __future__ import annotations

import json
import re
import sys

import pytest

from tests.clients.typescript import built_client, run_npm

pytestmark = pytest.mark.slow  # npm ci + tsc + a service started by the node tests: ~40 s on 2 cores


def test_typescript_client_builds_and_passes_its_tests_against_a_live_service() -> None:
    with built_client():
        result = run_npm("test", env={"REME_PYTHON": sys.executable, "REME_BASE_URL": "", "REME_API_KEY": ""})
    output = result.stdout + result.stderr
    assert re.search(r"^# pass [1-9]", output, re.M), output
    assert re.search(r"^# fail 0$", output, re.M) and re.search(r"^# skipped 0$", output, re.M), output


def test_typescript_client_packs_with_its_types_and_esm_entry() -> None:
    with built_client():
        packed = json.loads(run_npm("pack", "--dry-run", "--json", "--ignore-scripts").stdout)
    files = {entry["path"] for entry in packed[0]["files"]}
    assert {"package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/client.d.ts"} <= files
    assert not any(path.startswith(("src/", "test/", "node_modules/", "build-test/")) for path in files)
