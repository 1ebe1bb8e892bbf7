"""Memory libraries: ours (docs/library) load and serve, the build script turns trajectories into a library, and
ReMe's published libraries load when the shared data is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reme_service.client import ReMeClient
from tests.conftest import REPO_ROOT, shared_data_dir
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

LIBRARY_DIR = REPO_ROOT / "docs" / "library"
FORMAT_KEYS = {
    "workspace_id",
    "memory_id",
    "memory_type",
    "when_to_use",
    "content",
    "score",
    "time_created",
    "time_modified",
    "author",
    "metadata",
}
OUR_LIBRARIES = sorted(LIBRARY_DIR.glob("*.jsonl"))
REME_LIBRARIES = {"appworld.jsonl": 193, "bfcl_v3.jsonl": 474}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _client(http: httpx.Client) -> ReMeClient:
    return ReMeClient(str(http.base_url).rstrip("/"))


def test_readme_lists_every_library_with_its_size() -> None:
    readme = (LIBRARY_DIR / "README.md").read_text(encoding="utf-8")
    assert OUR_LIBRARIES
    for path in OUR_LIBRARIES:
        assert f"| `{path.name}` | {len(_lines(path))} |" in readme, path.name


@pytest.mark.parametrize("path", OUR_LIBRARIES, ids=lambda p: p.name)
def test_our_libraries_follow_the_format_and_load(serve: ServeFn, path: Path) -> None:
    rows = _lines(path)
    for row in rows:
        assert set(row) == FORMAT_KEYS, row.get("memory_id")
        assert row["memory_type"] == "task" and row["when_to_use"] and row["content"]
        assert len(row["memory_id"]) == 32 and int(row["memory_id"], 16) >= 0
    assert len({row["memory_id"] for row in rows}) == len(rows)
    with serve(f"file_roots={json.dumps([str(LIBRARY_DIR)])}") as http, _client(http) as reme:
        loaded = reme.vector_store("load", path=str(path), workspace_id="lib")
        assert loaded.metadata["action_result"]["size"] == len(rows)
        first = rows[0]
        hit = reme.retrieve_task_memory(first["when_to_use"], top_k=1, workspace_id="lib")
        assert hit.memory_list[0]["memory_id"] == first["memory_id"]


def test_build_script_turns_trajectories_into_a_loadable_library(serve: ServeFn, tmp_path: Path) -> None:
    source = LIBRARY_DIR / "trajectories" / "agent_runs.jsonl"
    out = tmp_path / "built" / "support_runs.jsonl"
    result = subprocess.run(
        [
            sys.executable,
            str(LIBRARY_DIR / "build_library.py"),
            str(source),
            "--out",
            str(out),
            "--batch",
            "3",
            "embedding_model.default.backend=hash",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("FLOW_")},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "batch 3: 2 trajectories" in result.stderr  # 8 trajectories in batches of 3
    rows = _lines(out)
    runs = {t["metadata"]["query"]: t for t in _lines(source)}
    assert {row["workspace_id"] for row in rows} == {"support_runs"}
    assert all(set(row) == FORMAT_KEYS for row in rows)
    # offline, each memory is one run's task, outcome and key tool calls; every successful run is kept (failed
    # runs may be deduplicated against a similar successful one)
    assert {q for q, t in runs.items() if t["score"] >= 1.0} <= {row["when_to_use"] for row in rows}
    for row in rows:
        run = runs[row["when_to_use"]]
        assert row["content"].startswith("Outcome: succeeded" if run["score"] >= 1.0 else "Outcome: failed")
    assert f"wrote {len(rows)} memories from 8 trajectories" in result.stderr

    with serve() as http, _client(http) as reme:
        (tmp_path / "data" / "libraries" / "support_runs.jsonl").write_text(out.read_text())
        loaded = reme.vector_store("load", path="./", workspace_id="support_runs")
        assert loaded.metadata["action_result"]["size"] == len(rows)
        hit = reme.retrieve_task_memory("refund an order to the original card", top_k=1, workspace_id="support_runs")
        assert "login" in hit.memory_list[0]["content"]  # the experience: re-login when the token expires


def test_build_script_refuses_a_bad_line(tmp_path: Path) -> None:
    source = tmp_path / "runs.jsonl"
    source.write_text('{"messages": [], "score": 1}\nnot json\n')
    result = subprocess.run(
        [sys.executable, str(LIBRARY_DIR / "build_library.py"), str(source), "--out", str(tmp_path / "x.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode != 0 and f"{source}:2: not JSON" in result.stderr
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(("name", "size"), sorted(REME_LIBRARIES.items()))
def test_reme_published_libraries_load(serve: ServeFn, tmp_path: Path, name: str, size: int) -> None:
    path = shared_data_dir() / "reme_library" / name
    if not path.exists():
        pytest.skip(f"ReMe's library {path} is absent (set REME_SHARED_DATA to the shared data folder)")
    with serve(f"file_roots={json.dumps([str(path.parent)])}") as http, _client(http) as reme:
        loaded = reme.vector_store("load", path=str(path), workspace_id="reme_lib")
        assert loaded.metadata["action_result"]["size"] == size
        listed = reme.vector_store("list", workspace_id="reme_lib").metadata["action_result"]
        assert len(listed) == size and {m["memory_type"] for m in listed} == {"task"}
        hit = reme.retrieve_task_memory(listed[0]["when_to_use"], top_k=3, workspace_id="reme_lib")
        assert listed[0]["memory_id"] in {m["memory_id"] for m in hit.memory_list}


def test_a_load_logs_what_it_loaded_and_how_long_it_took(serve: ServeFn, caplog: pytest.LogCaptureFixture) -> None:
    path = OUR_LIBRARIES[0]
    with (
        serve(f"file_roots={json.dumps([str(LIBRARY_DIR)])}") as http,
        _client(http) as reme,
        caplog.at_level("INFO", logger="reme_service.library"),
    ):
        reme.vector_store("load", path=str(path), workspace_id="logged")
    lines = [r.getMessage() for r in caplog.records if r.name == "reme_service.library"]
    assert any(f"loaded {len(_lines(path))} memories into logged in " in line for line in lines), lines
