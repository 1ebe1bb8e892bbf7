"""The memory browser at `/ui`: one HTML page, one script and one style sheet, served from package data.

The files hold no data and need no key (`AuthGate` leaves `UI_PATHS` open); the page asks for the API key and sends
it with every call to the management API and the flows. A strict Content-Security-Policy allows only this origin's
script and style and no inline code, a second line of defence behind the page's rule of rendering memory text with
`textContent` only.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

_FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
UI_PATHS = frozenset({"/ui", "/ui/", *(f"/ui/{name}" for name in _FILES)})
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self' blob:; img-src 'self' blob: data:; "
    "form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
)


@cache
def _content(name: str) -> bytes:
    return (files(__package__) / name).read_bytes()


def _serve(name: str) -> Response:
    headers = {
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
        "cache-control": "no-cache",
    }
    return Response(_content(name), media_type=_FILES[name], headers=headers)


def ui_router() -> APIRouter:
    """`GET /ui` (the page) and its two assets; left out of the OpenAPI document."""
    router = APIRouter(include_in_schema=False)

    @router.get("/ui")
    async def page() -> Response:
        return _serve("index.html")

    @router.get("/ui/")
    async def redirect() -> Response:
        return RedirectResponse("/ui")

    for name in ("app.js", "app.css"):

        async def asset(name: str = name) -> Response:
            return _serve(name)

        router.add_api_route(f"/ui/{name}", asset, methods=["GET"])
    return router
