"""`vector_store` `load` with `"async": true` reports its progress in `GET /jobs/{id}` (`progress: {done, total,
unit: "rows"}`) while it embeds, and the Python client shows it (`wait_job(progress=...)`).

The embedder is the fake OpenAI server with its embedding requests held after the first step's
(`FakeOpenAI.hold_embeddings`), so the job is seen half done on a condition, not a clock."""

from __future__ import annotations

import json
from pathlib import Path

from reme_service.client import JobView, ReMeClient
from reme_service.jobs.files import JobFiles
from reme_service.ops.vector_store.vector_store_action_op import PROGRESS_ROWS
from reme_service.testing.openai_server import FakeOpenAI
from tests.conditions import until_sync
from tests.service.conftest import ServeFn

ROWS = PROGRESS_ROWS * 2 + 7  # three steps: 500, 500, 7


def test_a_load_job_shows_rows_done_of_total(serve: ServeFn, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    library = tmp_path / "data" / "libraries" / "ws.jsonl"
    library.parent.mkdir(parents=True)
    lines = (json.dumps({"when_to_use": f"situation {i}", "content": f"advice {i}"}) for i in range(ROWS))
    library.write_text("\n".join(lines) + "\n")
    overrides = (
        "embedding_model.default.backend=openai_compatible",
        f"embedding_model.default.base_url={fake_openai.base_url}",
        "embedding_model.default.params.dimensions=64",
        f"embedding_model.default.params.max_batch_size={PROGRESS_ROWS}",  # one embedding request a step
    )
    gate = fake_openai.hold_embeddings(after=1)
    try:
        with serve(*overrides) as http:
            with ReMeClient(str(http.base_url)) as client:  # 202 accepted: the result names the job
                load = {"workspace_id": "ws", "action": "load", "path": "./", "async": True}
                job_id = client.call("vector_store", **load).job_id
            assert job_id is not None

            def progress() -> dict[str, object] | None:
                answer: dict[str, object] | None = http.get(f"/jobs/{job_id}").json()["progress"]
                return answer

            until_sync(lambda: progress() == {"done": PROGRESS_ROWS, "total": ROWS, "unit": "rows"}, limit=30)
            assert http.get(f"/jobs/{job_id}").json()["status"] == "running"
            # another worker or node reads the job from the job store, not from this process's memory
            stored = JobFiles(tmp_path / "data" / "jobs")
            until_sync(lambda: _stored_progress(stored, job_id) == (PROGRESS_ROWS, ROWS), limit=30)
            seen: list[JobView] = []
            with ReMeClient(str(http.base_url)) as client:
                running = client.job(job_id)
                assert running.progress is not None and (running.progress.done, running.progress.total) == (500, ROWS)
                gate.set()
                done = client.wait_job(job_id, progress=seen.append, poll=5)
            assert done.status == "done" and done.result is not None and done.result["success"] is True
            assert done.progress is not None and done.progress.done == done.progress.total == ROWS  # kept when it ended
            assert seen[-1].finished and all(view.progress is not None for view in seen)
            assert http.get("/workspaces/ws/memories?limit=1").json()["total"] == ROWS
    finally:
        gate.set()  # a failed check must not leave the service's shutdown waiting on a held request


def _stored_progress(files: JobFiles, job_id: str) -> tuple[int, int | None] | None:
    job = files.load(job_id)
    return None if job is None or job.progress is None else (job.progress.done, job.progress.total)
