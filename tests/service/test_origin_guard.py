"""Web pages cannot drive a loopback service through the user's browser (`server/origin_guard.py`): a cross-site
request (`Origin` of another site, or `Sec-Fetch-Site: cross-site`) is a 403 `cross_origin` and changes nothing, a
DNS-rebinding Host is a 421 `misdirected_request` on every route, while the service's own origin, the origins of
`http.cors_origins`, the loopback names and `http.allowed_hosts` pass, and clients that send no `Origin` (curl,
ReMe 0.2 clients) are served as before, with or without a Content-Type."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from reme_service.server.origin_guard import OriginGuard, OriginPolicy, allowed_host, host_patterns, same_origin
from tests.service.conftest import ServeFn

pytestmark = pytest.mark.service

EVIL = "https://evil.example"
MEMORY = {"when_to_use": "when deploying", "content": "the deployment secret"}


def insert(workspace: str) -> dict[str, Any]:
    return {"workspace_id": workspace, "action": "insert", "memory_dicts": [MEMORY]}


def text_plain(body: dict[str, Any]) -> dict[str, Any]:
    """What a page's `fetch(url, {method: "POST", body: JSON.stringify(...)})` sends: no preflight needed."""
    return {"content": json.dumps(body).encode(), "headers": {"content-type": "text/plain;charset=UTF-8"}}


def listed(client: httpx.Client, workspace: str) -> list[dict[str, Any]]:
    response = client.post("/vector_store", json={"workspace_id": workspace, "action": "list"})
    assert response.status_code == 200, response.text
    memories: list[dict[str, Any]] = response.json()["metadata"]["action_result"]
    return memories


def port_of(client: httpx.Client) -> int:
    port = urlsplit(str(client.base_url)).port
    assert port is not None
    return port


def assert_refused(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    envelope = response.json()
    assert envelope["success"] is False and envelope["answer"] == ""
    assert envelope["metadata"]["error"]["code"] == code, envelope
    assert envelope["metadata"]["error"]["request_id"] == response.headers["x-request-id"]


# -- cross-site requests -------------------------------------------------------------------------------------------


def test_a_cross_site_text_plain_post_is_refused_and_inserts_nothing(serve: ServeFn) -> None:
    with serve() as client:
        refused = client.post("/vector_store", **_with(text_plain(insert("victim")), origin=EVIL))
        assert_refused(refused, 403, "cross_origin")
        assert "http.cors_origins" in refused.json()["metadata"]["error"]["message"]
        assert "access-control-allow-origin" not in refused.headers
        # Origin: null (a sandboxed frame, a file:// page) is another origin too
        assert_refused(
            client.post("/vector_store", **_with(text_plain(insert("victim")), origin="null")), 403, "cross_origin"
        )
        # without Origin, the fetch metadata of a cross-site request is enough
        fetched = client.post("/vector_store", **_with(text_plain(insert("victim")), sec_fetch_site="cross-site"))
        assert_refused(fetched, 403, "cross_origin")
        # another port of this machine is another origin (a local dev server's page)
        other_port = f"http://127.0.0.1:{port_of(client) + 1}"
        assert_refused(
            client.post("/vector_store", **_with(text_plain(insert("victim")), origin=other_port)), 403, "cross_origin"
        )
        assert listed(client, "victim") == []


def test_a_cross_site_import_does_not_replace_a_workspace(serve: ServeFn) -> None:
    with serve() as client:
        assert client.post("/vector_store", json=insert("victim")).json()["success"] is True
        line = json.dumps({"workspace_id": "victim", "memory_id": "planted", "when_to_use": "x", "content": "evil"})
        refused = client.post(
            "/workspaces/victim/import",
            content=line.encode(),
            headers={"content-type": "text/plain", "origin": EVIL},
        )
        assert_refused(refused, 403, "cross_origin")
        assert [m["content"] for m in listed(client, "victim")] == [MEMORY["content"]]


def test_a_cross_site_read_is_refused_too(serve: ServeFn) -> None:
    """A page's fetch of a management read carries its Origin: refused (the browser would hide the answer anyway)."""
    with serve() as client:
        client.post("/vector_store", json=insert("victim"))
        assert_refused(client.get("/workspaces/victim/export", headers={"origin": EVIL}), 403, "cross_origin")
        # a top-level navigation sends no Origin: a link to the page or an export still works
        navigated = client.get("/workspaces/victim/export", headers={"sec-fetch-site": "cross-site"})
        assert navigated.status_code == 200 and "the deployment secret" in navigated.text


def test_the_services_own_origin_is_allowed(serve: ServeFn) -> None:
    """The memory browser's requests: `Origin` is the page's, which is the service's own (as the Host names it)."""
    with serve() as client:
        port = port_of(client)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            own = client.post(
                "/vector_store",
                content=json.dumps(insert("mine")).encode(),
                headers={"content-type": "text/plain", "origin": f"http://{host}", "host": host},
            )
            assert own.status_code == 200 and own.json()["success"] is True, (host, own.text)
        # the same origin, but the page was served by another Host (a rebinding page would be, too)
        crossed = client.post(
            "/vector_store",
            json=insert("mine"),
            headers={"origin": f"http://localhost:{port}", "host": f"127.0.0.1:{port}"},
        )
        assert_refused(crossed, 403, "cross_origin")
        assert len(listed(client, "mine")) == 3


def test_an_origin_listed_in_cors_origins_is_allowed(serve: ServeFn) -> None:
    with serve('http.cors_origins=["https://app.example"]') as client:
        allowed = client.post("/vector_store", json=insert("shared"), headers={"origin": "https://app.example"})
        assert allowed.status_code == 200 and allowed.json()["success"] is True
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert_refused(
            client.post("/vector_store", json=insert("shared"), headers={"origin": EVIL}), 403, "cross_origin"
        )
        assert len(listed(client, "shared")) == 1


def test_clients_without_origin_are_served_as_before(serve: ServeFn) -> None:
    """curl, requests, httpx and the ReMe 0.2 clients send no Origin, and often no Content-Type."""
    with serve() as client:
        body = json.dumps(insert("curl")).encode()
        assert client.post("/vector_store", content=body).json()["success"] is True  # no Content-Type at all
        assert client.post("/vector_store", content=body, headers={"content-type": "text/plain"}).status_code == 200
        assert client.post("/vector_store", json=insert("curl")).json()["success"] is True
        assert client.post("/vector_store", json=insert("curl"), headers={"sec-fetch-site": "none"}).status_code == 200
        assert len(listed(client, "curl")) == 4


# -- DNS rebinding -------------------------------------------------------------------------------------------------


def test_a_rebinding_host_is_refused_on_every_route(serve: ServeFn) -> None:
    with serve() as client:
        assert client.post("/vector_store", json=insert("victim")).json()["success"] is True
        evil = {"host": f"evil.example:{port_of(client)}"}
        delete = {"workspace_id": "victim", "action": "delete"}
        assert_refused(client.post("/vector_store", json=delete, headers=evil), 421, "misdirected_request")
        assert_refused(client.get("/workspaces/victim/export", headers=evil), 421, "misdirected_request")
        assert_refused(client.get("/workspaces", headers=evil), 421, "misdirected_request")
        assert_refused(client.get("/ui", headers=evil), 421, "misdirected_request")
        assert_refused(client.get("/health", headers=evil), 421, "misdirected_request")
        # the page's own Origin does not help: it is the rebinding name's
        same = {**evil, "origin": f"http://evil.example:{port_of(client)}"}
        assert_refused(client.post("/vector_store", json=delete, headers=same), 421, "misdirected_request")
        assert len(listed(client, "victim")) == 1


def test_the_loopback_names_are_allowed_on_any_port(serve: ServeFn) -> None:
    with serve() as client:
        client.post("/vector_store", json=insert("mine"))
        port = port_of(client)
        for host in (
            f"localhost:{port}",
            f"127.0.0.1:{port}",
            f"[::1]:{port}",
            f"0.0.0.0:{port}",
            "LOCALHOST",
            "127.0.0.2:80",
        ):
            exported = client.get("/workspaces/mine/export", headers={"host": host})
            assert exported.status_code == 200 and "the deployment secret" in exported.text, (host, exported.text)


def test_allowed_hosts_adds_names_for_http_and_mcp(serve: ServeFn) -> None:
    with serve('http.allowed_hosts=["reme.lan:*", "box:8080"]') as client:
        client.post("/vector_store", json=insert("mine"))
        port = port_of(client)
        for host in (f"reme.lan:{port}", "reme.lan", "box:8080", "REME.LAN:1"):
            assert client.get("/workspaces/mine/export", headers={"host": host}).status_code == 200, host
        for host in ("box:8081", "box", f"evil.example:{port}"):
            assert_refused(client.get("/workspaces/mine/export", headers={"host": host}), 421, "misdirected_request")
        # MCP on the same port takes the same list (its SDK checks Host and Origin again)
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-03-26",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        accept = {"accept": "application/json, text/event-stream"}
        mcp = client.post("/mcp", json=initialize, headers={**accept, "host": f"reme.lan:{port}"})
        assert mcp.status_code == 200 and mcp.json()["result"]["serverInfo"]["name"] == "ReMe", mcp.text
        refused = client.post("/mcp", json=initialize, headers={**accept, "host": f"evil.example:{port}"})
        assert_refused(refused, 421, "misdirected_request")


def test_a_service_bound_to_a_routable_address_checks_no_host(serve: ServeFn) -> None:
    """`http.host: 0.0.0.0` is reached by names this process cannot know (and keys guard it): no Host check. The
    cross-origin check stays."""
    with serve("http.host=0.0.0.0", "auth.mode=off") as client:
        evil = {"host": f"evil.example:{port_of(client)}"}
        assert client.post("/vector_store", json=insert("open"), headers=evil).json()["success"] is True
        assert client.get("/workspaces/open/export", headers=evil).status_code == 200
        assert_refused(client.post("/vector_store", json=insert("open"), headers={"origin": EVIL}), 403, "cross_origin")


# -- the middleware and its rules, in process ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_guard_decides_by_its_policy_alone() -> None:
    """No server, no config: an ASGI app behind the guard, driven with scopes."""
    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call(guard: OriginGuard, method: str, headers: dict[str, str]) -> int:
        statuses: list[int] = []

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        async def receive() -> Any:
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {
            "type": "http",
            "method": method,
            "path": "/vector_store",
            "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        }
        await guard(scope, receive, send)
        return statuses[0]

    loopback = OriginGuard(app, OriginPolicy.of("127.0.0.1", [], []))
    routable = OriginGuard(app, OriginPolicy.of("10.0.0.5", [], []))
    assert await call(loopback, "POST", {"host": "evil.example"}) == 421
    assert await call(routable, "POST", {"host": "evil.example"}) == 204
    assert await call(routable, "POST", {"host": "evil.example", "origin": "http://evil.example"}) == 204  # its own
    assert await call(routable, "POST", {"host": "reme.example", "origin": EVIL}) == 403
    assert await call(loopback, "POST", {}) == 204  # no Host, no Origin: not a browser
    assert await call(loopback, "DELETE", {"host": "localhost", "sec-fetch-site": "same-site"}) == 403
    assert await call(loopback, "GET", {"host": "localhost", "sec-fetch-site": "cross-site"}) == 204
    assert reached == ["/vector_store"] * 4


def test_the_host_and_origin_rules() -> None:
    patterns = host_patterns(["reme.lan:*", "Box:8080"])
    assert "127.0.0.1:*" in patterns and "0.0.0.0:*" in patterns and "reme.lan" in patterns and "box:8080" in patterns
    assert allowed_host("127.0.0.1:8002", patterns) and allowed_host("[::1]:1", patterns)
    assert allowed_host("127.9.9.9", patterns) and allowed_host("localhost", patterns)
    assert not allowed_host("evil.example:8002", patterns) and not allowed_host("localhost.evil.example", patterns)
    assert not allowed_host("box:8081", patterns) and not allowed_host("reme.lan.evil:1", patterns)
    assert same_origin("http://127.0.0.1:8002", "127.0.0.1:8002") and same_origin("http://[::1]:8", "[::1]:8")
    assert same_origin("https://reme.example", "reme.example") and same_origin("http://h:80", "h")
    assert not same_origin("http://127.0.0.1:8003", "127.0.0.1:8002")
    assert not same_origin("https://reme.example.evil", "reme.example")
    assert not same_origin("null", "127.0.0.1:8002") and not same_origin("ftp://h", "h")
    assert not same_origin("http://h:x", "h") and not same_origin("http://h", "h:abc")


def _with(kwargs: dict[str, Any], *, origin: str | None = None, sec_fetch_site: str | None = None) -> dict[str, Any]:
    headers = dict(kwargs.get("headers", {}))
    if origin is not None:
        headers["origin"] = origin
    if sec_fetch_site is not None:
        headers["sec-fetch-site"] = sec_fetch_site
    return {**kwargs, "headers": headers}
