"""The memory browser (/ui) in a real headless chromium against the service as its own process, with an API key:
load a library, page, search, open, edit, delete, export, and hostile text shown as text. A screenshot per step
goes to tests/.artifacts/ui/ (docs/ui/ holds copies)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reme_service.auth.keyfile import create_key
from tests.browser.webdriver import Browser, browser_missing, chromium
from tests.fakes.service_process import running_service

pytestmark = [pytest.mark.service, pytest.mark.slow]
if (reason := browser_missing()) is not None:
    pytestmark.append(pytest.mark.skip(reason=reason))

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts" / "ui"
SCRIPT = "<script>window.__pwned = 'script'</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'\">"


def library() -> list[dict[str, Any]]:
    memories = [
        {
            "memory_id": f"m{i:03d}",
            "memory_type": "task",
            "when_to_use": f"When deploying service {i} to the staging cluster",
            "content": f"Run the migrations of service {i} first, then roll the pods one by one.",
            "time_modified": f"2026-11-{1 + i % 20:02d} 10:00:00",
            "score": round(i / 100, 2),
        }
        for i in range(60)
    ]
    memories.append(
        {
            "memory_id": "p001",
            "memory_type": "personal",
            "when_to_use": "user drinks",
            "content": "The user likes green tea in the afternoon",
            "target": "user",
        }
    )
    return memories


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("ui")
    _, key = create_key(root / "data" / "auth" / "keys.json", workspaces=["team", "other"], scope="write")
    with running_service(root, f"data_dir={root / 'data'}", "embedding_model.default.backend=hash") as url:
        body = "".join(json.dumps(m) + "\n" for m in library())
        headers = {"Authorization": f"Bearer {key}"}
        for workspace, memories in (("team", library()), ("other", library()[:3])):
            insert = {"workspace_id": workspace, "action": "insert", "memory_dicts": memories}
            httpx.post(f"{url}/vector_store", json=insert, headers=headers, timeout=30).raise_for_status()
        assert body
        yield url, key


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    with chromium(tmp_path_factory.mktemp("downloads")) as session:
        yield session


def shot(browser: Browser, name: str) -> None:
    browser.screenshot(ARTIFACTS / f"{name}.png")


def no_script_ran(browser: Browser) -> None:
    assert browser.execute("return window.__pwned === undefined") is True


def open_library(browser: Browser, url: str, key: str, workspace: str = "team") -> None:
    browser.get(f"{url}/ui")
    browser.execute("sessionStorage.clear()")
    browser.get(f"{url}/ui")
    browser.wait_for("return document.getElementById('error').textContent.includes('401')")
    browser.type("#api-key", key)
    browser.click("#key-save")
    browser.wait_for("return document.querySelector(`button.ws[data-workspace='${args[0]}']`)", workspace)
    browser.click(f"button.ws[data-workspace='{workspace}']")
    browser.wait_for("return document.querySelectorAll('#memories li').length > 0")


def test_browse_page_search_edit_delete_export(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    browser.resize(1280, 900)
    open_library(browser, url, key)
    assert browser.execute("return sessionStorage.getItem('reme_api_key')") == key
    assert browser.wait_for("return document.querySelector('#status dd[data-status]').textContent") == "healthy"
    assert browser.text("button.ws[data-workspace='team'] .ws-counts") == "61 memories (60 task, 1 personal)"
    ids = browser.execute("return [...document.querySelectorAll('#memories li')].map(li => li.dataset.memoryId)")
    assert ids == [f"m{i:03d}" for i in range(25)]
    shot(browser, "01-library")

    # page forward twice and back: by id, nothing twice
    browser.click("#next")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm025'")
    browser.click("#next")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm050'")
    last = browser.execute("return [...document.querySelectorAll('#memories li')].map(li => li.dataset.memoryId)")
    assert last == [*(f"m{i:03d}" for i in range(50, 60)), "p001"]
    assert browser.execute("return document.getElementById('next').disabled") is True
    shot(browser, "02-last-page")
    browser.click("#prev")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm025'")

    # search by meaning: the retrieval flow, relevance shown
    browser.type("#search-q", "When deploying service 42 to the staging cluster")
    browser.click("#search-go")
    browser.wait_for("return document.getElementById('list-info').textContent.includes('results for')")
    first = browser.execute("return document.querySelector('#memories li')")
    assert first is not None
    assert browser.execute("return document.querySelector('#memories li').dataset.memoryId") == "m042"
    assert "relevance" in browser.text("#memories li .meta")
    shot(browser, "03-search")

    # open a memory: every field
    browser.click("#memories li[data-memory-id='m042'] button.open")
    browser.wait_for("return document.getElementById('detail').open")
    fields = browser.execute(
        "return Object.fromEntries([...document.querySelectorAll('#detail-fields dd')]"
        ".map(dd => [dd.dataset.field, dd.textContent]))"
    )
    assert fields["memory_id"] == "m042" and fields["score"] == "0.42" and fields["workspace_id"] == "team"
    assert fields["content"].startswith("Run the migrations of service 42")
    shot(browser, "04-memory")

    # edit: content changes on the server
    browser.click("#edit")
    browser.wait_for("return !document.getElementById('edit-form').hidden")
    browser.type("#edit-content", "Roll back first if the canary fails.")
    shot(browser, "05-edit")
    browser.click("#save")
    browser.wait_for("return document.getElementById('notice').textContent === 'Saved m042'")
    headers = {"Authorization": f"Bearer {key}"}
    stored = httpx.get(f"{url}/workspaces/team/memories/m042", headers=headers).json()
    assert stored["content"] == "Roll back first if the canary fails." and stored["score"] == 0.42

    # delete, with a confirmation that can be refused
    browser.click("#delete")
    browser.wait_for("return document.getElementById('confirm').open")
    shot(browser, "06-confirm-delete")
    browser.click("#confirm-no")
    browser.wait_for("return !document.getElementById('confirm').open")
    assert httpx.get(f"{url}/workspaces/team/memories/m042", headers=headers).status_code == 200
    browser.click("#delete")
    browser.wait_for("return document.getElementById('confirm').open")
    browser.click("#confirm-yes")
    browser.wait_for("return document.getElementById('notice').textContent === 'Deleted m042'")
    assert browser.execute("return document.getElementById('detail').open") is False
    assert httpx.get(f"{url}/workspaces/team/memories/m042", headers=headers).status_code == 404

    # export: the JSONL the API streams, offered as a download
    browser.click("#export")
    browser.wait_for("return document.getElementById('notice').textContent.startsWith('Exported 60 memories')")
    link = browser.execute("const a = document.getElementById('export-link'); return [a.href, a.download]")
    assert link[0].startswith("blob:") and link[1] == "team.jsonl"
    text = browser.wait_for(  # what the download link holds
        "if (!window.__export) { window.__export = 'pending';"
        " fetch(document.getElementById('export-link').href).then(r => r.text()).then(t => { window.__export = t; }); }"
        " return window.__export !== 'pending' && window.__export;"
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 60 and "m042" not in {m["memory_id"] for m in lines}
    assert next(m for m in lines if m["memory_id"] == "p001")["target"] == "user"
    shot(browser, "07-export")
    no_script_ran(browser)


def test_the_page_lists_the_workspaces_of_the_key(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    open_library(browser, url, key, workspace="other")
    listed = browser.execute("return [...document.querySelectorAll('button.ws')].map(b => b.dataset.workspace)")
    assert listed == ["other", "team"]  # the key's workspaces, never anyone else's


def test_hostile_text_is_shown_as_text_and_never_runs(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    hostile = {
        "memory_id": "xss",
        "memory_type": "task",
        "when_to_use": SCRIPT,
        "content": IMG,
        "author": IMG,
        "metadata": {"note": SCRIPT},
    }
    body = {"workspace_id": "other", "action": "insert", "memory_dicts": [hostile]}
    httpx.post(f"{url}/vector_store", json=body, headers={"Authorization": f"Bearer {key}"}).raise_for_status()
    open_library(browser, url, key, workspace="other")
    browser.wait_for("return document.querySelector(\"#memories li[data-memory-id='xss']\")")
    assert browser.text("#memories li[data-memory-id='xss'] button.open") == SCRIPT
    assert browser.text("#memories li[data-memory-id='xss'] .preview") == IMG
    browser.click("#memories li[data-memory-id='xss'] button.open")
    browser.wait_for("return document.getElementById('detail').open")
    fields = browser.execute(
        "return Object.fromEntries([...document.querySelectorAll('#detail-fields dd')]"
        ".map(dd => [dd.dataset.field, dd.textContent]))"
    )
    assert fields["when_to_use"] == SCRIPT and fields["content"] == IMG and fields["author"] == IMG
    assert SCRIPT in fields["metadata"]
    # the DOM holds no element made from the data: no img at all, and only the page's own script element
    assert browser.execute("return document.querySelectorAll('img').length") == 0
    assert browser.execute("return [...document.scripts].map(s => s.getAttribute('src'))") == ["/ui/app.js"]
    shot(browser, "08-hostile-text")
    browser.click("#close")
    no_script_ran(browser)


def test_phone_width_has_no_sideways_scroll(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    browser.resize(390, 844)
    open_library(browser, url, key)
    width = browser.execute("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], width
    shot(browser, "09-phone")
    browser.click("#memories li button.open")
    browser.wait_for("return document.getElementById('detail').open")
    shot(browser, "10-phone-memory")
    browser.click("#close")
    browser.resize(1280, 900)


def test_the_first_load_is_small_and_keyboard_reachable(service: tuple[str, str], browser: Browser) -> None:
    url, _ = service
    sizes = [len(httpx.get(f"{url}{path}").content) for path in ("/ui", "/ui/app.js", "/ui/app.css")]
    assert sum(sizes) <= 300 * 1024
    page = httpx.get(f"{url}/ui")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    browser.get(f"{url}/ui")
    browser.wait_for("return document.readyState === 'complete'")
    unlabeled = browser.execute(
        "return [...document.querySelectorAll('input, select, textarea')]"
        ".filter(e => !e.labels || e.labels.length === 0).map(e => e.id)"
    )
    assert unlabeled == []
    clickable_divs = browser.execute("return document.querySelectorAll('div[onclick], span[onclick]').length")
    assert clickable_divs == 0
