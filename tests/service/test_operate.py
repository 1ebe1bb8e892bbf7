"""Operating the service: metrics an operator scrapes, the log lines it writes, health an orchestrator polls, the
docs page offline, and a configuration made of environment variables alone (issue #18)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reme_service.auth.keyfile import create_key
from reme_service.testing.openai_server import FakeOpenAI
from reme_service.testing.ports import free_port
from tests.conditions import until_sync
from tests.fakes.service_process import service_process, wait_ready
from tests.service.conftest import ServeFn

pytestmark = [pytest.mark.service, pytest.mark.own_backend]

MEMORIES = [
    {"when_to_use": "book a flight ticket", "content": "compare prices before booking"},
    {"when_to_use": "send an email", "content": "look the contact up first"},
]


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text page, parsed by the reference client's parser."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(page: dict[tuple[str, frozenset[tuple[str, str]]], float], metric: str, **labels: str) -> float:
    return page.get((metric, frozenset(labels.items())), 0.0)


def test_metrics_count_requests_flows_clients_and_workspaces(serve: ServeFn) -> None:
    with serve("vector_store.default.backend=memory") as client:
        before = samples(client.get("/metrics").text)
        assert value(before, "reme_build_info", version=client.get("/health").json()["version"]) == 1
        r = client.post("/vector_store", json={"workspace_id": "a", "action": "insert", "memory_dicts": MEMORIES})
        assert r.status_code == 200
        for _ in range(3):
            r = client.post("/retrieve_task_memory", json={"workspace_id": "a", "query": "flight"})
            assert r.status_code == 200
        assert client.post("/retrieve_task_memory", json={"workspace_id": "a", "top_k": 3}).status_code == 422
        assert (
            client.post("/retrieve_task_memory", json={"workspace_id": "a", "query": "x", "top_k": 0}).status_code
            == 422
        )
        assert client.get("/workspaces/a/memories").status_code == 200
        assert client.get("/jobs/job_unknown").status_code == 404
        assert client.get("/no/such/path/1").status_code == 404
        assert client.get("/no/such/path/2").status_code == 404
        page = client.get("/metrics")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
        after = samples(page.text)

    requests = "reme_http_requests_total"
    assert value(after, requests, route="retrieve_task_memory", method="POST", status="200") == 3
    assert value(after, requests, route="retrieve_task_memory", method="POST", status="422") == 2
    assert value(after, requests, route="vector_store", method="POST", status="200") == 1
    assert value(after, requests, route="other", method="GET", status="404") == 2  # unknown paths: one series
    assert not any(name == requests and ("route", "/no/such/path/1") in labels for name, labels in after)
    # other routes count under their template, never their concrete path
    assert value(after, requests, route="/workspaces/{workspace_id}/memories", method="GET", status="200") == 1
    assert value(after, requests, route="/jobs/{job_id}", method="GET", status="404") == 1
    assert value(after, "reme_http_request_duration_seconds_count", route="retrieve_task_memory") == 5
    assert value(after, "reme_flow_runs_total", flow="retrieve_task_memory", status="200") == 3
    assert value(after, "reme_flow_run_duration_seconds_count", flow="retrieve_task_memory") == 3
    # the clients behind the flows: three query embeddings (plus the insert's), store searches, one upsert
    assert value(after, "reme_embedding_calls_total", embedding_model="default", operation="embed", outcome="ok") >= 4
    assert value(after, "reme_store_operations_total", store="default", operation="upsert", outcome="ok") == 1
    searches = sum(
        v
        for (name, labels), v in after.items()
        if name == "reme_store_operations_total"
        and ("operation", "search_vector") in labels
        or name == "reme_store_operations_total"
        and ("operation", "search") in labels
        or name == "reme_store_operations_total"
        and ("operation", "search_hybrid") in labels
    )
    assert searches >= 3
    assert value(after, "reme_resident_workspaces", store="default") == 1
    assert value(after, "process_open_fds") > 0 and value(after, "process_resident_memory_bytes") > 0


def test_failed_llm_calls_are_counted_and_health_says_unreachable(serve: ServeFn) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    env = {"FLOW_LLM_API_KEY": "k", "FLOW_LLM_BASE_URL": closed}
    with serve("llm.default.max_retries=0", "llm.default.timeout=2", env=env) as client:
        answer = client.get("/health")
        health = answer.json()
        assert health["llm"]["default"]["status"] == "unreachable"  # probed, not assumed
        assert closed in health["llm"]["default"]["reason"]
        assert answer.status_code == 200 and health["status"] == "degraded"  # storage and retrieval still work
        assert client.get("/health/ready").status_code == 200
        traj = [{"task_id": "t", "messages": [{"role": "user", "content": "book a flight"}], "score": 1.0}]
        r = client.post("/summary_task_memory", json={"workspace_id": "w", "trajectories": traj})
        assert r.status_code == 502 and r.json()["success"] is False
        page = samples(client.get("/metrics").text)
    assert value(page, "reme_llm_calls_total", llm="default", operation="chat", outcome="error") >= 1
    assert value(page, "reme_flow_runs_total", flow="summary_task_memory", status="502") == 1


def test_llm_reachable_is_ok(serve: ServeFn, fake_openai: FakeOpenAI) -> None:
    _, url = fake_openai, fake_openai.base_url
    with serve(env={"FLOW_LLM_API_KEY": "k", "FLOW_LLM_BASE_URL": url}) as client:
        health = client.get("/health").json()
    assert health["llm"]["default"]["status"] == "ok" and health["status"] == "healthy"


def test_metrics_need_a_key_when_keys_are_required_and_health_does_not(serve: ServeFn, tmp_path: Path) -> None:
    _, key = create_key(tmp_path / "data" / "auth" / "keys.json", workspaces=["w"], scope="read")
    with serve() as client:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 200
        for open_path in ("/health", "/health/live", "/health/ready", "/docs", "/docs/static/swagger-ui.css"):
            assert client.get(open_path).status_code == 200, open_path


def test_docs_work_offline_and_no_site_may_frame_them(serve: ServeFn) -> None:
    with serve() as client:
        for page, assets in (
            ("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
            ("/redoc", ("redoc.standalone.js",)),
            ("/docs/oauth2-redirect", ()),
        ):
            answer = client.get(page)
            assert answer.headers["x-frame-options"] == "DENY", page
            assert answer.headers["content-security-policy"] == "frame-ancestors 'none'", page
            assert answer.headers["x-content-type-options"] == "nosniff", page
            html = answer.text
            assert "cdn." not in html and "googleapis" not in html  # nothing from outside
            for asset in assets:
                assert f"/docs/static/{asset}" in html
                served = client.get(f"/docs/static/{asset}")
                assert served.status_code == 200 and len(served.content) > 10_000, asset
        assert client.get("/openapi.json").json()["paths"]["/retrieve_task_memory"]
        for answer in (client.get("/openapi.json"), client.get("/health"), client.post("/nowhere", json={})):
            assert answer.headers["x-content-type-options"] == "nosniff"  # every answer, JSON and errors alike


@pytest.fixture
def log_service(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    with service_process(
        tmp_path,
        "log_format=json",
        "embedding_model.default.backend=hash",
        "vector_store.default.backend=memory",
        f"data_dir={tmp_path / 'data'}",
    ) as service:
        yield service.base_url, service.log_path


def test_json_logs_carry_request_fields_and_always_show_failures(log_service: tuple[str, Path]) -> None:
    base_url, log_path = log_service
    with httpx.Client(base_url=base_url, timeout=10) as client:
        ok = client.post(
            "/retrieve_task_memory", json={"workspace_id": "ws1", "query": "q"}, headers={"x-request-id": "ok-1"}
        )
        bad = client.post("/retrieve_task_memory", json={"workspace_id": "ws1"}, headers={"x-request-id": "bad-1"})
        missing = client.get("/nowhere", headers={"x-request-id": "lost-1"})
    assert (ok.status_code, bad.status_code, missing.status_code) == (200, 422, 404)
    assert bad.headers["x-request-id"] == "bad-1"

    def lines() -> list[dict[str, object]]:
        return [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]

    until_sync(lambda: any(line.get("request_id") == "lost-1" for line in lines()), limit=10)
    records = lines()
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    by_id = {r.get("request_id"): r for r in records if r.get("logger") == "reme_service.access"}
    assert "ok-1" not in by_id  # successes only with http.access_log=true
    assert by_id["bad-1"]["status"] == 422 and by_id["bad-1"]["level"] == "warning"
    assert by_id["bad-1"]["path"] == "/retrieve_task_memory" and isinstance(by_id["bad-1"]["duration_ms"], float)
    assert by_id["lost-1"]["status"] == 404


def test_access_log_on_logs_successes_with_flow_and_workspace(tmp_path: Path) -> None:
    with service_process(
        tmp_path, "http.access_log=true", "embedding_model.default.backend=hash", f"data_dir={tmp_path / 'data'}"
    ) as service:
        r = httpx.post(f"{service.base_url}/retrieve_task_memory", json={"workspace_id": "ws9", "query": "q"})
        rid = r.headers["x-request-id"]  # made by the service, the same in the answer and the log
        until_sync(lambda: f"request_id={rid}" in service.log(), limit=10)
        line = next(line for line in service.log().splitlines() if f"request_id={rid}" in line)
        # a client id the service cannot use (not printable) is replaced by one id, the same in answer and log
        odd = httpx.post(
            f"{service.base_url}/retrieve_task_memory",
            json={"workspace_id": "ws8", "query": "q"},
            headers={"x-request-id": "bad\tid"},
        )
        made = odd.headers["x-request-id"]
        assert made != "bad\tid" and made.isprintable()
        until_sync(lambda: f"request_id={made}" in service.log(), limit=10)
    assert "POST /retrieve_task_memory 200" in line and "flow=retrieve_task_memory workspace=ws9" in line


def test_a_container_configured_by_environment_alone(tmp_path: Path) -> None:
    """No argument and no file: port, store, embedder and data_dir from REME_* variables."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLOW_", "REME_"))}
    env |= {
        "REME_HTTP__PORT": str(port),
        "REME_VECTOR_STORE__DEFAULT__BACKEND": "local",
        "REME_EMBEDDING_MODEL__DEFAULT__BACKEND": "hash",
        "REME_DATA_DIR": str(tmp_path / "state"),
        "REME_LOG_FORMAT": "json",
    }
    (tmp_path / "cwd").mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "reme_service"], cwd=tmp_path / "cwd", env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base)
        health = httpx.get(f"{base}/health").json()
        assert health["vector_store"]["default"]["backend"] == "local"
        assert health["embedding_model"]["default"]["backend"] == "hash"
        r = httpx.post(f"{base}/vector_store", json={"workspace_id": "e", "action": "insert", "memory_dicts": MEMORIES})
        assert r.json()["success"] is True
        assert any((tmp_path / "state" / "vector_store").iterdir())  # data where the environment said
        assert not (tmp_path / "cwd" / "reme_data").exists()
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert f"data in {tmp_path / 'state'}" in stderr


def test_a_client_that_leaves_mid_body_is_counted_as_499_not_a_server_error(tmp_path: Path) -> None:
    """Nothing failed on the server when a client hangs up before its body is sent: the request is logged and
    counted with nginx's 499, never as a 500."""
    import socket
    from urllib.parse import urlsplit

    with service_process(tmp_path, "embedding_model.default.backend=hash") as service:
        url = urlsplit(service.base_url)
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80), timeout=10) as sock:
            sock.sendall(b'POST /retrieve_task_memory HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{"q')

        def counted() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
            return samples(httpx.get(f"{service.base_url}/metrics", timeout=5).text)

        requests = "reme_http_requests_total"
        until_sync(lambda: value(counted(), requests, route="other", method="POST", status="499") == 1)
        assert value(counted(), requests, route="other", method="POST", status="500") == 0  # (never routed)
