"""Library file roots: dumps go to <data_dir>/libraries, the shipped libraries are read-only, the server's working
directory is not a root, a symlink out of a root is refused (also when swapped in after the check), and no answer
names a server path."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.errors import PathNotAllowedError
from reme_service.file_roots import PACKAGED_LIBRARIES, FileRoots
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service


def action(client: httpx.Client, workspace: str, name: str, **fields: Any) -> httpx.Response:
    return client.post("/vector_store", json={"workspace_id": workspace, "action": name, **fields})


def insert(client: httpx.Client, workspace: str) -> None:
    memory = {"when_to_use": "when paging", "content": "follow the next link"}
    assert action(client, workspace, "insert", memory_dicts=[memory]).status_code == 200


def test_the_readme_example_loads_the_shipped_library(serve: ServeFn) -> None:
    with serve() as client:
        loaded = action(client, "agent_basics", "load", path="docs/library")
        assert loaded.status_code == 200, loaded.text
        expected = (PACKAGED_LIBRARIES / "agent_basics.jsonl").read_text().count("\n")
        assert loaded.json()["metadata"]["action_result"] == {"size": expected}


def test_dumps_go_to_the_data_dir_and_the_shipped_libraries_are_read_only(serve: ServeFn, tmp_path: Path) -> None:
    shipped = PACKAGED_LIBRARIES / "agent_runs.jsonl"
    before = shipped.read_bytes()
    with serve() as client:
        insert(client, "agent_runs")
        for path in ("docs/library", "docs/library/agent_runs.jsonl", str(PACKAGED_LIBRARIES)):
            refused = action(client, "agent_runs", "dump", path=path)
            assert refused.status_code == 403, (path, refused.text)
            assert "read-only" in refused.json()["metadata"]["error"]["message"]
        dumped = action(client, "agent_runs", "dump", path="exports")
        assert dumped.status_code == 200
        assert dumped.json()["metadata"]["action_result"]["path"] == "libraries/exports/agent_runs.jsonl"
        assert (tmp_path / "data" / "libraries" / "exports" / "agent_runs.jsonl").is_file()
        again = action(client, "copy_of_runs", "load", path="libraries/exports/agent_runs.jsonl")
        assert again.json()["metadata"]["action_result"] == {"size": 1}
    assert shipped.read_bytes() == before


def test_the_working_directory_is_not_a_root(serve: ServeFn, tmp_path: Path) -> None:
    (tmp_path / "cwd_library.jsonl").write_text('{"when_to_use": "a", "content": "b"}\n')  # serve chdirs here
    with serve() as client:
        insert(client, "ws")
        for path in (str(tmp_path / "cwd_library.jsonl"), "../cwd_library.jsonl", "../../etc", "/etc/passwd"):
            response = action(client, "ws", "load", path=path)
            assert response.status_code == 403, (path, response.text)
        assert action(client, "ws", "dump", path=str(tmp_path)).status_code == 403
        assert not (tmp_path / "ws.jsonl").exists()


def test_a_symlink_out_of_a_root_is_refused(serve: ServeFn, tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"when_to_use": "secret", "content": "outside the roots"}\n')
    libraries = tmp_path / "data" / "libraries"
    libraries.mkdir(parents=True)
    (libraries / "linked.jsonl").symlink_to(outside)
    (libraries / "linked_dir").symlink_to(tmp_path)
    with serve() as client:
        for path in ("linked.jsonl", "linked_dir/outside.jsonl", "libraries/linked.jsonl"):
            response = action(client, "ws", "load", path=path)
            assert response.status_code == 403, (path, response.text)
            assert str(tmp_path) not in response.text


def test_a_file_swapped_for_a_symlink_after_the_check_is_refused_when_opened(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    secret = tmp_path / "secret.jsonl"
    secret.write_text("{}\n")
    roots = FileRoots.configured([str(root)])
    with open(secret, "rb") as handle, pytest.raises(PathNotAllowedError):  # what a swap would have opened
        roots.check_open(handle.fileno(), "lib.jsonl")
    inside = root / "lib.jsonl"
    inside.write_text("{}\n")
    with open(inside, "rb") as handle:
        roots.check_open(handle.fileno(), "lib.jsonl")


def test_no_answer_names_a_server_path(serve: ServeFn, tmp_path: Path) -> None:
    with serve() as client:
        insert(client, "ws")
        answers = [
            client.get("/health"),
            action(client, "ws", "load", path="missing.jsonl"),
            action(client, "ws", "dump", path="d"),
            action(client, "ws", "load", path="/etc"),
        ]
        (tmp_path / "data" / "libraries" / "bad.jsonl").write_text("{not json\n")
        answers.append(action(client, "ws", "load", path="bad.jsonl"))
    texts = [answer.text for answer in answers]
    assert [answer.status_code for answer in answers] == [200, 404, 200, 403, 400]
    for text in texts:
        assert str(tmp_path) not in text and os.getcwd() not in text, text
    assert json.loads(texts[1])["metadata"]["error"]["message"].endswith("'libraries/missing.jsonl' does not exist")
