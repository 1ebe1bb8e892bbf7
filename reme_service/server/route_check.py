"""The route of a request, decided from its head alone: `EdgeGuard` asks `route_refusal` before it reads a body, so
a request for a path no route serves (404) or with a method its route does not take (405) is answered without
its body being read (and the connection closed, `declares_body`). The answers are the router's own
(`http_errors.no_route`, `wrong_method`); a path that only differs by a trailing slash from a served one is left
to the router, which redirects it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from reme_service.errors import ReMeError
from reme_service.server.http_errors import allowed_methods, no_route, wrong_method


def _match(routes: Sequence[BaseRoute], scope: Scope) -> tuple[Match, BaseRoute | None]:
    partial: BaseRoute | None = None
    for route in routes:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return match, route
        if match is Match.PARTIAL and partial is None:
            partial = route
    return (Match.PARTIAL, partial) if partial is not None else (Match.NONE, None)


def route_refusal(
    routes: Sequence[BaseRoute], scope: Scope, flows: Iterable[str]
) -> tuple[ReMeError, list[tuple[bytes, bytes]]] | None:
    """None when a route serves `scope`'s method and path (or the router will redirect it), else the 404 or 405
    with the headers to send (`Allow` of a 405). OPTIONS is left to CORS and the router."""
    method = str(scope.get("method", ""))
    path = str(scope.get("path", ""))
    if method == "OPTIONS":
        return None
    match, route = _match(routes, scope)
    if match is Match.FULL:
        return None
    if match is Match.PARTIAL:
        allowed = allowed_methods(routes, scope)
        return wrong_method(method, path, allowed), [(b"allow", allowed.encode())] if allowed else []
    if path != "/":  # the router redirects `/x/` to `/x` (and back) when that one is served
        other = path[:-1] if path.endswith("/") else path + "/"
        if _match(routes, {**scope, "path": other})[0] is not Match.NONE:
            return None
    return no_route(method, path, flows), []
