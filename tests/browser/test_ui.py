"""The memory browser (/ui) in a real headless chromium against the service as its own process, with an API key:
load a library, page (newest first, with the total), sort, search, open, create, edit, delete, history, export,
live updates from another client's writes, hostile text shown as text. One service and one browser for the module.
A screenshot per step goes to tests/.artifacts/ui/ (docs/ui/ holds copies)."""

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
            "time_created": f"2026-10-01 10:{i:02d}:00",
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
            "time_created": "2026-10-02 09:00:00",
        }
    )
    memories.append(
        {
            "memory_id": "t001",
            "memory_type": "tool",
            "when_to_use": "search_catalog",
            "content": "Pass the product name as query; an empty query fails.",
            "time_created": "2026-09-30 09:00:00",
        }
    )
    return memories


# newest first: p001 (created last), m059 ... m000, t001 (created first)
NEWEST_FIRST = ["p001", *(f"m{i:03d}" for i in range(59, -1, -1)), "t001"]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    root = tmp_path_factory.mktemp("ui")
    _, key = create_key(root / "data" / "auth" / "keys.json", workspaces=["team", "other", "solo"], scope="write")
    with running_service(root, f"data_dir={root / 'data'}", "embedding_model.default.backend=hash") as url:
        body = "".join(json.dumps(m) + "\n" for m in library())
        headers = {"Authorization": f"Bearer {key}"}
        for workspace, memories in (("team", library()), ("other", library()[:3]), ("solo", library()[:1])):
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


def ids_shown(browser: Browser) -> list[str]:
    return list(browser.execute("return [...document.querySelectorAll('#memories li')].map(li => li.dataset.memoryId)"))


def choose(browser: Browser, css: str, value: str) -> None:
    """Pick `value` in the select `css` as a person does (the page hears `change`)."""
    browser.execute(
        "const s = document.querySelector(arguments[0]); s.value = arguments[1]; s.dispatchEvent(new Event('change'));",
        css,
        value,
    )


def hidden_but_shown(browser: Browser) -> list[str]:
    """Elements marked `hidden` that a style rule displays anyway."""
    return list(
        browser.execute(
            "return [...document.querySelectorAll('[hidden]')]"
            ".filter(e => getComputedStyle(e).display !== 'none').map(e => e.id || e.tagName)"
        )
    )


def fields_shown(browser: Browser) -> dict[str, str]:
    return dict(
        browser.execute(
            "return Object.fromEntries([...document.querySelectorAll('#detail-fields dd')]"
            ".map(dd => [dd.dataset.field, dd.textContent]))"
        )
    )


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


def test_browse_page_search_edit_history_delete_export(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    headers = {"Authorization": f"Bearer {key}"}
    browser.resize(1280, 900)
    open_library(browser, url, key)
    assert browser.execute("return sessionStorage.getItem('reme_api_key')") == key
    assert browser.wait_for("return document.querySelector('#status dd[data-status]').textContent") == "healthy"
    assert browser.text("button.ws[data-workspace='team'] .ws-counts") == "62 memories (60 task, 1 personal, 1 tool)"
    # newest first by default, with the total over every page
    assert ids_shown(browser) == NEWEST_FIRST[:25]
    assert browser.text("#list-info") == "62 memories, newest first · page 1 of 3"
    shot(browser, "01-library")

    # page forward twice and back: newest first, nothing twice
    browser.click("#next")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm035'")
    assert ids_shown(browser) == NEWEST_FIRST[25:50]
    browser.click("#next")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm010'")
    assert ids_shown(browser) == NEWEST_FIRST[50:]
    assert browser.execute("return document.getElementById('next').disabled") is True
    shot(browser, "02-last-page")
    browser.click("#prev")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm035'")

    # the other orders: oldest first, by id
    choose(browser, "#sort", "time_created")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 't001'")
    assert ids_shown(browser)[:3] == ["t001", "m000", "m001"]
    assert browser.text("#list-info") == "62 memories, oldest first · page 1 of 3"
    choose(browser, "#sort", "memory_id")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'm000'")
    assert ids_shown(browser) == [f"m{i:03d}" for i in range(25)]
    choose(browser, "#sort", "-time_created")
    browser.wait_for("return document.querySelector('#memories li').dataset.memoryId === 'p001'")

    # search by meaning: the retrieval flow, relevance shown
    browser.type("#search-q", "When deploying service 42 to the staging cluster")
    browser.click("#search-go")
    browser.wait_for("return document.getElementById('list-info').textContent.includes('results for')")
    assert browser.execute("return document.querySelector('#memories li').dataset.memoryId") == "m042"
    assert "relevance" in browser.text("#memories li .meta")
    shot(browser, "03-search")

    # open a memory: every field, and nothing hidden shows (the edit form, the history)
    browser.click("#memories li[data-memory-id='m042'] button.open")
    browser.wait_for("return document.getElementById('detail').open")
    fields = fields_shown(browser)
    assert fields["memory_id"] == "m042" and fields["score"] == "0.42" and fields["workspace_id"] == "team"
    assert fields["content"].startswith("Run the migrations of service 42")
    assert hidden_but_shown(browser) == []
    shot(browser, "04-memory")

    # edit: content changes on the server
    browser.click("#edit")
    browser.wait_for("return !document.getElementById('edit-form').hidden")
    browser.type("#edit-content", "Roll back first if the canary fails.")
    shot(browser, "05-edit")
    browser.click("#save")
    browser.wait_for("return document.getElementById('notice').textContent === 'Saved m042'")
    stored = httpx.get(f"{url}/workspaces/team/memories/m042", headers=headers).json()
    assert stored["content"] == "Roll back first if the canary fails." and stored["score"] == 0.42

    # history: the edit (content before and after) above the ADD
    browser.click("#show-history")
    browser.wait_for("return document.querySelectorAll('#history-entries li.entry').length === 2")
    events = browser.execute("return [...document.querySelectorAll('#history-entries li')].map(li => li.dataset.event)")
    assert events == ["UPDATE", "ADD"]
    change = browser.execute(
        "const row = document.querySelector(\"#history-entries li[data-event='UPDATE'] tr[data-field='content']\");"
        " return [...row.querySelectorAll('td')].map(td => td.textContent)"
    )
    assert change == [
        "Run the migrations of service 42 first, then roll the pods one by one.",
        "Roll back first if the canary fails.",
    ]
    assert browser.text("#history-entries li[data-event='UPDATE'] .kind") == "UPDATE"
    assert "manage" in browser.text("#history-entries li[data-event='UPDATE'] .head")
    shot(browser, "11-history")

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
    browser.wait_for("return document.getElementById('list-info').dataset.total === '61'")

    # export: the JSONL the API streams, offered as a download
    browser.click("#export")
    browser.wait_for("return document.getElementById('notice').textContent.startsWith('Exported 61 memories')")
    link = browser.execute("const a = document.getElementById('export-link'); return [a.href, a.download]")
    assert link[0].startswith("blob:") and link[1] == "team.jsonl"
    text = browser.wait_for(  # what the download link holds
        "if (!window.__export) { window.__export = 'pending';"
        " fetch(document.getElementById('export-link').href).then(r => r.text()).then(t => { window.__export = t; }); }"
        " return window.__export !== 'pending' && window.__export;"
    )
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 61 and "m042" not in {m["memory_id"] for m in lines}
    assert next(m for m in lines if m["memory_id"] == "p001")["target"] == "user"
    shot(browser, "07-export")
    no_script_ran(browser)


def test_create_a_memory_with_the_fields_of_its_type(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    browser.resize(1280, 900)
    open_library(browser, url, key, workspace="solo")
    assert browser.text("button.ws[data-workspace='solo'] .ws-counts") == "1 memory (1 task)"
    assert browser.text("#list-info") == "1 memory, newest first"
    browser.click("#new-memory")
    browser.wait_for("return document.getElementById('create').open")
    assert browser.execute("return document.getElementById('create-target')") is None  # a task has no target
    choose(browser, "#create-type", "personal")
    browser.wait_for("return document.getElementById('create-target')")
    browser.type("#create-when_to_use", "what the user drinks")
    browser.type("#create-content", "likes green tea, no sugar")
    browser.type("#create-target", "user")
    browser.execute("document.getElementById('create').scrollTop = 0")
    shot(browser, "12-create")
    browser.type("#create-metadata", "{not json")
    browser.click("#create-save")  # refused in the page: nothing is sent
    assert browser.wait_for("return document.getElementById('create-error').textContent").startswith("metadata:")
    assert browser.execute("return document.getElementById('create').open") is True
    browser.type("#create-metadata", '{"source": "ui"}')
    browser.click("#create-save")
    notice = browser.wait_for(
        "const t = document.getElementById('notice').textContent; return t.startsWith('Created ') && t"
    )
    memory_id = notice.removeprefix("Created ")
    stored = httpx.get(f"{url}/workspaces/solo/memories/{memory_id}", headers={"Authorization": f"Bearer {key}"})
    assert stored.status_code == 200
    memory = stored.json()
    assert memory["memory_type"] == "personal" and memory["target"] == "user"
    assert memory["content"] == "likes green tea, no sugar" and memory["metadata"] == {"source": "ui"}
    # newest first: the new memory heads the list, and the totals count it ("2 memories", not "1 memories")
    browser.wait_for("return document.getElementById('list-info').dataset.total === '2'")
    assert ids_shown(browser)[0] == memory_id
    assert browser.text("#list-info") == "2 memories, newest first"
    browser.wait_for(
        "return document.querySelector(\"button.ws[data-workspace='solo'] .ws-counts\").textContent"
        " === '2 memories (1 task, 1 personal)'"
    )
    # one match is "1 memory"
    choose(browser, "#filter-type", "personal")
    browser.click("#filter-apply")
    browser.wait_for("return document.getElementById('list-info').dataset.total === '1'")
    assert browser.text("#list-info") == "1 memory match, newest first"


def test_live_updates_show_another_clients_writes(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    headers = {"Authorization": f"Bearer {key}"}
    browser.resize(1280, 900)
    open_library(browser, url, key, workspace="other")
    browser.wait_for("return document.getElementById('live').dataset.state === 'open'")  # subscribed: none missed
    before = int(browser.execute("return document.getElementById('list-info').dataset.total"))
    new = {"memory_id": "live1", "when_to_use": "added by another client", "content": "seen without a reload"}
    assert httpx.post(f"{url}/workspaces/other/memories", json=new, headers=headers).status_code == 201
    browser.wait_for("return document.querySelector(\"#memories li[data-memory-id='live1']\")")
    assert ids_shown(browser)[0] == "live1"  # newest first
    assert browser.execute("return document.querySelector(\"#memories li[data-memory-id='live1']\").className") == (
        "memory fresh"
    )
    browser.wait_for("return document.getElementById('list-info').dataset.total === args[0]", str(before + 1))
    assert browser.text("#live").startswith("live · ADD 1 memory")
    shot(browser, "13-live-update")

    # the open memory follows a change made elsewhere, and says when it is deleted
    browser.click("#memories li[data-memory-id='live1'] button.open")
    browser.wait_for("return document.getElementById('detail').open")
    patch = {"content": "changed by another client"}
    assert httpx.patch(f"{url}/workspaces/other/memories/live1", json=patch, headers=headers).status_code == 200
    browser.wait_for(
        "return document.querySelector(\"#detail-fields dd[data-field='content']\").textContent"
        " === 'changed by another client'"
    )
    browser.wait_for(
        "return document.querySelector(\"#memories li[data-memory-id='live1'] .preview\").textContent"
        " === 'changed by another client'"
    )
    assert httpx.delete(f"{url}/workspaces/other/memories/live1", headers=headers).status_code == 200
    browser.wait_for("return !document.getElementById('detail-note').hidden")
    assert browser.text("#detail-note") == "This memory has been deleted."
    assert browser.execute("return document.getElementById('edit').disabled") is True
    browser.wait_for("return !document.querySelector(\"#memories li[data-memory-id='live1']\")")
    browser.click("#close")
    # a write to a workspace not open changes nothing shown
    other = {"memory_id": "elsewhere", "when_to_use": "team only", "content": "x"}
    assert httpx.post(f"{url}/workspaces/team/memories", json=other, headers=headers).status_code == 201
    assert httpx.delete(f"{url}/workspaces/team/memories/elsewhere", headers=headers).status_code == 200
    assert "elsewhere" not in ids_shown(browser)


# counts the page's open GET /events fetches: +1 when one starts, -1 when it is aborted or fails
COUNT_STREAMS = """
window.__streams = 0;
const realFetch = window.fetch;
window.fetch = function (input, init) {
  if (!String(input).startsWith('/events')) return realFetch.apply(this, arguments);
  window.__streams += 1;
  let open = true;
  const end = () => { if (open) { open = false; window.__streams -= 1; } };
  if (init && init.signal) init.signal.addEventListener('abort', end);
  return realFetch.apply(this, arguments).catch((err) => { end(); throw err; });
};
"""


def test_the_page_holds_one_event_stream(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    script = browser.on_new_document(COUNT_STREAMS)
    try:
        open_library(browser, url, key, workspace="team")
        for workspace in ("other", "solo", "team", "other"):
            browser.click(f"button.ws[data-workspace='{workspace}']")
            browser.wait_for("return document.getElementById('live').dataset.state === 'open'")
        browser.click("#key-save")  # the same key again: its stream is opened anew, the old one ended
        browser.wait_for("return document.getElementById('live').dataset.state === 'open'")
        assert browser.execute("return window.__streams") == 1
    finally:
        browser.forget_script(script)


def test_page_tools_stay_hidden_until_a_workspace_is_picked(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    browser.get(f"{url}/ui")
    browser.execute("sessionStorage.clear()")
    browser.get(f"{url}/ui")
    browser.type("#api-key", key)
    browser.click("#key-save")
    browser.wait_for("return document.querySelector(\"button.ws[data-workspace='team']\")")
    # the page buttons (a `.pager { display: flex }` rule used to win over `hidden`) and the rest stay hidden
    assert browser.execute("return getComputedStyle(document.getElementById('pager')).display") == "none"
    assert browser.execute("return document.getElementById('next').getClientRects().length") == 0
    assert hidden_but_shown(browser) == []


def test_tool_filter_finds_tool_memories_by_name(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    open_library(browser, url, key)
    choose(browser, "#filter-type", "tool")
    assert browser.text("#search-label") == "Find tool memories by exact tool name"
    browser.type("#search-q", "search_catalog")
    browser.click("#search-go")
    # the tool memory flow answered: the task search never returns a tool memory
    browser.wait_for("return document.getElementById('list-info').textContent.includes('exact name')")
    assert ids_shown(browser) == ["t001"]
    assert browser.text("#list-info") == "1 tool memory for the tool name “search_catalog” (found by exact name)"
    browser.type("#search-q", "send_email")
    browser.click("#search-go")
    browser.wait_for("return document.getElementById('list-info').textContent.includes('none for send_email')")
    assert ids_shown(browser) == []


def test_the_page_lists_the_workspaces_of_the_key(service: tuple[str, str], browser: Browser) -> None:
    url, key = service
    open_library(browser, url, key, workspace="other")
    listed = browser.execute("return [...document.querySelectorAll('button.ws')].map(b => b.dataset.workspace)")
    assert listed == ["other", "solo", "team"]  # the key's workspaces, never anyone else's


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
