"""The OpenAPI pages, offline: `/docs` (Swagger UI) and `/redoc` load their scripts and styles from `/docs/static/`,
served from the `fastapi-offline` package's copy, so the pages work without reaching a CDN. No other site may frame
them (`FRAMING`: a framed page can be clickjacked into sending requests the user did not mean)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter
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


def docs_static() -> StaticFiles:
    """The pages' scripts and styles, for the app to mount at `STATIC_PREFIX` (a mount, not a route)."""
    return StaticFiles(directory=Path(str(files("fastapi_offline") / "static")))


def docs_router(api_title: str, openapi_url: str) -> APIRouter:
    """`/docs`, `/docs/oauth2-redirect` and `/redoc`, of the OpenAPI document at `openapi_url`; not in it."""
    router = APIRouter(include_in_schema=False)
    title = f"{api_title} - docs"

    @router.get("/docs")
    async def swagger() -> HTMLResponse:
        return _unframed(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=title,
                oauth2_redirect_url="/docs/oauth2-redirect",
                swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
                swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
                swagger_favicon_url=f"{STATIC_PREFIX}/favicon.png",
            )
        )

    @router.get("/docs/oauth2-redirect")
    async def oauth2_redirect() -> HTMLResponse:
        return _unframed(get_swagger_ui_oauth2_redirect_html())

    @router.get("/redoc")
    async def redoc() -> HTMLResponse:
        return _unframed(
            get_redoc_html(
                openapi_url=openapi_url,
                title=title,
                redoc_js_url=f"{STATIC_PREFIX}/redoc.standalone.js",
                redoc_favicon_url=f"{STATIC_PREFIX}/favicon.png",
                with_google_fonts=False,
            )
        )

    return router
