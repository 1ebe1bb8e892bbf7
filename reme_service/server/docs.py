"""The OpenAPI pages, offline: `/docs` (Swagger UI) and `/redoc` load their scripts and styles from `/docs/static/`,
served from the `fastapi-offline` package's copy, so the pages work without reaching a CDN. No other site may frame
them (`FRAMING`: a framed page can be clickjacked into sending requests the user did not mean)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_PREFIX = "/docs/static"
#: the pages' inline scripts rule out a script policy; framing is what is refused
FRAMING = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def _unframed(page: HTMLResponse) -> HTMLResponse:
    page.headers.update(FRAMING)
    return page


def install_offline_docs(api: FastAPI) -> None:
    static = Path(str(files("fastapi_offline") / "static"))
    api.mount(STATIC_PREFIX, StaticFiles(directory=static), name="docs-static")
    title = f"{api.title} - docs"

    @api.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return _unframed(
            get_swagger_ui_html(
                openapi_url=api.openapi_url or "/openapi.json",
                title=title,
                oauth2_redirect_url="/docs/oauth2-redirect",
                swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
                swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
                swagger_favicon_url=f"{STATIC_PREFIX}/favicon.png",
            )
        )

    @api.get("/docs/oauth2-redirect", include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return _unframed(get_swagger_ui_oauth2_redirect_html())

    @api.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return _unframed(
            get_redoc_html(
                openapi_url=api.openapi_url or "/openapi.json",
                title=title,
                redoc_js_url=f"{STATIC_PREFIX}/redoc.standalone.js",
                redoc_favicon_url=f"{STATIC_PREFIX}/favicon.png",
                with_google_fonts=False,
            )
        )
