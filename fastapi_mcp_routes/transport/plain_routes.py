"""The MCP endpoint served as plain Starlette routes where nothing but its Origin check guards
it: FastAPI's request handler and inclusion layer have nothing to do then, and their cost is
spared (`serve_plainly`). Done by the router at startup, undone at shutdown."""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI, params
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, NoMatchFound, Route
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.transport.http import FreshRequest

# The endpoint takes every method HTTP defines (RFC 9110 section 9, and PATCH), so those it does
# not serve get its own 405: a JSON-RPC error and an Allow header, not the framework's
# {"detail": ...}. A CORS middleware still answers preflights first: it runs before routing.
ENDPOINT_METHODS: Final = ["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]


class PlainRoute(Route):
    """The endpoint's plain route: a request for any other path is turned away by one string
    test, so the REST requests matched after it pay almost nothing for it (`make bench-writes`:
    the Python calls of a REST request with and without the library)."""

    def __init__(self, path: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(path, *args, **kwargs)
        # What every path it serves ends with: the text after its last parameter (all of it
        # when it has none; nothing when it ends with one, say a tenant under a prefix).
        self.literal_end = path[path.rfind("}") + 1 :]

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path")
        if isinstance(path, str) and not path.endswith(self.literal_end):
            return Match.NONE, {}
        return super().matches(scope)


class AsgiEndpoint:
    """The endpoint as the ASGI app of its plain route: its request and its response, without
    the layer Starlette wraps around a function endpoint to hand its exceptions to the app's
    exception handlers, which the app's `ExceptionMiddleware` does all the same, with the same
    handlers, for any exception that reaches it (`benchmarks/profile_tool_call.py` under
    callgrind shows the saving)."""

    __slots__ = ("endpoint",)

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.endpoint(FreshRequest(scope, receive, send))
        await response(scope, receive, send)


class PlainRoutes(BaseRoute):
    """Plain routes standing in for an inclusion's other routes (the explorer's, the metadata):
    a request for a path none of them ends with is turned away by one string test, however
    many they are, rather than by each in turn (`count_calls` in benchmarks/rest_writes.py)."""

    def __init__(self, routes: list[PlainRoute]) -> None:
        self.routes = routes
        self.literal_ends = tuple(route.literal_end for route in routes)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        path = scope.get("path")
        if isinstance(path, str) and not path.endswith(self.literal_ends):
            return Match.NONE, {}
        found = self._route(scope)
        return found.matches(scope) if found is not None else (Match.NONE, {})

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self._route(scope)
        if found is not None:  # the router hands over only what `matches` took
            await found.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                pass
        raise NoMatchFound(name, path_params)

    def _route(self, scope: Scope) -> PlainRoute | None:
        """The route that takes the request: the first that fully matches, else the first that
        matches but for the method (which answers 405)."""
        partial = None
        for route in self.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route
            if match is Match.PARTIAL and partial is None:
                partial = route
        return partial


@dataclass(slots=True)
class Swap:
    """What serving the endpoint plainly changed in the app's route table, undone at shutdown."""

    plain: Route
    inclusion: Any = None  # the inclusion's own entry, taken out while the plain route serves
    index: int = 0
    others: PlainRoutes | None = None  # its other routes, served plainly in its place

    def undo(self, app: FastAPI) -> None:
        app.router.routes.remove(self.plain)
        if self.others is not None:
            app.router.routes.remove(self.others)
        if self.inclusion is not None:
            app.router.routes.insert(self.index, self.inclusion)


def serve_plainly(
    app: FastAPI,
    route: Any,
    guards: list[params.Depends],
    endpoint: Callable[[Request], Awaitable[Response]],
    plain_endpoints: Mapping[int, Callable[[Request], Awaitable[Response]]],
) -> Swap | None:
    """Serve the endpoint as a plain Starlette route, where nothing but the Origin check guards it.

    FastAPI's request handler and inclusion layer are a large share of a tool call's cost
    (`make bench`), and have nothing to do when no dependency and no body limit applies: the
    endpoint checks the Origin itself and caps its body by `Limits.max_body_bytes`. So when the
    inclusion (and the app and the routers around it) added neither, a plain route with the same
    path and endpoint is put at the front, or just before the inclusion when a route ahead could
    take its path: routes match in the same order as before. An inclusion that holds nothing
    else it cannot serve plainly too is taken out meanwhile, so the REST requests matched after
    it do not test it (`count_calls` in benchmarks/rest_writes.py): its other routes (the
    explorer's, the RFC 9728 metadata) take its place as plain routes, which turn a REST request
    away with one string test. It is done at startup, so an app that never includes the router
    never serves it, and undone at shutdown."""
    for index, top in enumerate(app.routes):
        contexts = list(iter_route_contexts([top]))
        for context in contexts:
            if context.original_route is not route or not isinstance(context.path, str):
                continue
            if not _guarded_plainly(context, guards):
                return None
            served = AsgiEndpoint(endpoint)
            plain = PlainRoute(context.path, served, methods=ENDPOINT_METHODS, include_in_schema=False, name="mcp")
            swap = Swap(plain)
            others = _plain_others(contexts, route, guards, plain_endpoints)
            if others is not None and top is not route:
                swap.inclusion, swap.index = top, index
                app.router.routes.remove(top)
                if others:
                    swap.others = PlainRoutes(others)
                    app.router.routes.insert(index, swap.others)
            # At the very front when no route ahead could take a request for it: the same
            # order of matching, without testing those routes on every MCP request.
            ahead = app.routes[:index]
            app.router.routes.insert(0 if not _any_takes(ahead, context.path) else index, plain)
            return swap
    return None


def _guarded_plainly(context: Any, guards: list[params.Depends]) -> bool:
    """Whether nothing but the endpoint's own guards and no body limit apply to a route here."""
    dependencies = list(getattr(context, "dependencies", None) or ())
    own = len(dependencies) == len(guards) and all(map(operator.is_, dependencies, guards))
    return own and getattr(context, "max_body_size", None) is None


def _plain_others(
    contexts: list[Any],
    route: Any,
    guards: list[params.Depends],
    plain_endpoints: Mapping[int, Callable[[Request], Awaitable[Response]]],
) -> list[PlainRoute] | None:
    """The inclusion's routes besides the endpoint as plain routes at their paths, in order: a
    Starlette route as it is, a FastAPI route guarded by the endpoint's guards alone as the
    endpoint `plain_endpoints` gives it; None when one of them cannot be served plainly."""
    others: list[PlainRoute] = []
    for context in contexts:
        original = context.original_route
        if original is route:
            continue
        if isinstance(original, APIRoute):
            plain_endpoint = plain_endpoints.get(id(original))
            if plain_endpoint is None or not _guarded_plainly(context, guards):
                return None
        elif type(original) is Route:
            plain_endpoint = original.endpoint
        else:
            return None
        if not isinstance(context.path, str):
            return None
        methods = sorted(original.methods or ())
        plain = PlainRoute(context.path, plain_endpoint, methods=methods, include_in_schema=False, name=original.name)
        others.append(plain)
    return others


def _any_takes(routes: Sequence[Any], path: str) -> bool:
    """Whether one of these routes fully matches a request for `path` with one of our methods
    (a partial match, another method, never wins over a full one). In doubt: yes."""
    for method in ENDPOINT_METHODS:
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": [], "query_string": b""}
        for route in routes:
            try:
                match, _ = route.matches(scope)
            except Exception:
                return True
            if match is Match.FULL:
                return True
    return False
