"""cookbook/bench/run_all.py end to end at tiny sizes: it runs, and its report has every section and row.

Timings are not asserted (the machine is shared); the structure of the report is.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "cookbook" / "bench"
SIZES = (20, 40)
CLIENTS = (1, 4)
TARGETS_HEADING = "Targets (DESIGN §8, issue 9)"
MULTIPROCESS_HEADING = "Several service processes on one Chroma server"
MULTIPROCESS_TARGET = "lost writes, 2 processes on one Chroma server (shared lock)"


def load_script(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    path = BENCH / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


# a bench run of the real servers (a minute or two on a quiet machine, several on a busy one; BENCH_LIMIT is the
# subprocess's own limit): slow, and longer than the default timeout
BENCH_LIMIT = 540


def bench_run(test: Callable[..., None]) -> Callable[..., None]:
    return pytest.mark.slow(pytest.mark.timeout(600)(test))


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], str]:
    output = tmp_path_factory.mktemp("bench") / "report.md"
    command = [
        sys.executable,
        str(BENCH / "run_all.py"),
        "--quick",
        "--sizes",
        ",".join(map(str, SIZES)),
        "--clients",
        ",".join(map(str, CLIENTS)),
        "--requests",
        "10",
        "--duration",
        "0.3",
        "--stores",
        "memory,local",
        "--skip",
        "embedder,locomo,multiprocess",  # multiprocess: its own test
        "--summary-requests",
        "1",
        "--summary-batches",
        "1",
        "--ann-memories",
        "300",
        "--output",
        str(output),
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=BENCH_LIMIT, check=False)
    text = output.read_text(encoding="utf-8") if output.exists() else ""
    return result, text


def section(text: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section {heading!r} in:\n{text}"
    return match.group(1)


def rows(block: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in block.splitlines() if line[:1] == "|"]


@bench_run
def test_quick_run_completes_and_writes_the_report(quick_report: tuple[subprocess.CompletedProcess[str], str]) -> None:
    result, text = quick_report
    # 0: every target held, 1: one missed (the tiny sizes leave most "not measured"); 2 would be a broken run
    assert result.returncode in (0, 1), result.stdout[-3000:] + result.stderr[-3000:]
    assert text.startswith("# Performance report, ")
    assert "## Problems" not in text, text


@bench_run
def test_report_names_the_machine_and_the_load(quick_report: tuple[subprocess.CompletedProcess[str], str]) -> None:
    machine = {row[0]: row[1] for row in rows(section(quick_report[1], "Machine"))}
    for key in ("CPU", "cores", "RAM", "Python", "packages", "load average before (1/5/15 min)"):
        assert machine.get(key) not in (None, "", "n/a"), machine
    assert re.fullmatch(r"[\d.]+ / [\d.]+ / [\d.]+", machine["load average after (1/5/15 min)"])
    assert machine["1-min load average during the run"].startswith("min ")
    for package in ("numpy", "fastapi", "uvicorn"):
        assert package in machine["packages"]


@bench_run
def test_targets_table_lists_every_target(quick_report: tuple[subprocess.CompletedProcess[str], str]) -> None:
    table = rows(section(quick_report[1], TARGETS_HEADING))
    labels = [row[0] for row in table[2:]]
    assert len(labels) == 9 and "p50 latency, 10k, 1 client" in labels and "local MiniLM, batch 64" in labels
    verdicts = {row[0]: row[3] for row in table[2:]}
    assert verdicts["p50 latency, 10k, 1 client"] == "not measured"  # 10k is not among the sizes
    assert verdicts["summary overhead (worst batch)"] in ("ok", "**MISS**")
    assert verdicts[MULTIPROCESS_TARGET] == "not measured"  # skipped


@bench_run
def test_floors_are_measured_for_every_size_and_client_count(
    quick_report: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    floors = rows(section(quick_report[1], "Floors"))
    echo = [row for row in floors if len(row) == 5 and row[0].isdigit()]
    assert [int(row[0]) for row in echo] == list(CLIENTS)
    assert all(float(row[4].replace(",", "")) > 0 for row in echo)
    topk = [row for row in floors if len(row) == 4 and row[0].replace(",", "").isdigit()]
    assert [int(row[0]) for row in topk] == list(SIZES)


@bench_run
def test_retrieval_rows_cover_each_store_size_and_client_count_with_ratios(
    quick_report: tuple[subprocess.CompletedProcess[str], str],
) -> None:
    table = rows(section(quick_report[1], "Retrieval: `retrieve_task_memory` over HTTP"))
    measured = {(row[0], int(row[1]), int(row[2])): row for row in table[2:] if row[1].isdigit()}
    assert set(measured) == {(store, n, c) for store in ("memory", "local") for n in SIZES for c in CLIENTS}
    for row in measured.values():
        assert float(row[3]) > 0 and float(row[6].replace(",", "")) > 0  # p50 ms, req/s
        assert row[7].endswith("x") and row[8].endswith("x")  # ratios to the floors
    chroma = [row for row in table if row[0] == "chroma"]
    assert len(chroma) == 1 and "not requested" in chroma[0][-1]


@bench_run
def test_load_rss_and_the_optional_parts(quick_report: tuple[subprocess.CompletedProcess[str], str]) -> None:
    text = quick_report[1]
    load = rows(section(text, "Library load and server memory"))
    measured = [row for row in load[2:] if row[1].isdigit()]
    assert sorted((row[0], int(row[1])) for row in measured) == sorted(
        (store, n) for store in ("memory", "local") for n in SIZES
    )
    assert all(float(row[2]) >= 0 and "per 100k" in row[10] for row in measured)  # load s (0.00 at 20)
    for row in measured:  # growth after the load, then after the searches (which may build the BM25 index)
        assert row[7].endswith("x") and row[9].endswith("x") and math.isfinite(float(row[8]))
    assert "skipped (--skip embedder)" in section(text, "Embedders")
    assert "skipped (--skip locomo)" in section(text, "LoCoMo dev retrieval quality")
    assert "skipped (--skip multiprocess)" in section(text, MULTIPROCESS_HEADING)
    assert rows(section(text, "Availability under abuse"))  # its table (the part ran)
    big = rows(section(text, "One big workspace: the approximate index"))
    assert [row[0] for row in big[2:7]] == [
        "open (snapshot + index file)", "RSS after open", "approximate p50", "recall@10 vs exact", "exact p50"
    ]  # fmt: skip
    assert all(row[3] == "(targets at 1M)" for row in big[2:7])  # 300 memories: no verdicts
    summary = section(text, "Summary framework overhead")
    if "Not available" not in summary:  # the script may not exist yet; then the section says so
        flows = [row[0] for row in rows(summary)[2:]]
        assert flows == ["summary_task_memory", "summary_task_memory_simple"]


@pytest.fixture
def chroma_available() -> None:
    """Skips unless run_all.py's chroma_reason() is empty (chromadb and its `chroma` command installed)."""
    probe = "import run_all; print(run_all.chroma_reason())"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=BENCH, capture_output=True, text=True, timeout=60, check=True
    )
    if reason := result.stdout.strip():
        pytest.skip(f"the multiprocess part cannot run here: {reason}")


@pytest.mark.usefixtures("chroma_available")
@bench_run
def test_multiprocess_part_reports_both_modes_and_its_target(tmp_path: Path) -> None:
    output = tmp_path / "report.md"
    command = [
        sys.executable,
        str(BENCH / "run_all.py"),
        "--quick",
        "--multiprocess-requests",
        "6",
        "--only",  # the other parts are run by quick_report (at their smallest sizes)
        "multiprocess",
        "--output",
        str(output),
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=BENCH_LIMIT, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = output.read_text(encoding="utf-8")
    table = rows(section(text, MULTIPROCESS_HEADING))
    header = ["mode", "workload", "requests", "failures", "lost", "stored/expected", "p50 ms", "p95 ms", "req/s"]
    assert table[0] == header
    measured = {(row[0], row[1]): row for row in table[2:]}
    workloads = ("counters", "tool appends", "inserts")
    assert set(measured) == {(mode, w) for mode in ("on", "off") for w in workloads}
    assert all(row[2] == "6" for row in measured.values())
    for workload in workloads:  # with the shared lock nothing is lost and nothing fails
        row = measured["on", workload]
        assert row[3] == "0" and row[4] == "0", row
    assert measured["on", "counters"][5] == "18/18"
    targets = {row[0]: row for row in rows(section(text, TARGETS_HEADING))[2:]}
    assert targets[MULTIPROCESS_TARGET][1:4] == ["0", "0", "ok"]
    assert f"{MULTIPROCESS_TARGET}: 0 (target 0) ok" in result.stdout


def test_lean_client_reads_chunked_and_sized_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    http_load = load_script("http_load", monkeypatch)

    async def parse(raw: bytes) -> tuple[int, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await http_load.read_response(reader)

    chunked = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
    sized = b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\n{}"
    assert asyncio.run(parse(chunked)) == (200, b'{"a":1}')
    assert asyncio.run(parse(sized)) == (404, b"{}")
