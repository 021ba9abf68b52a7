"""The explorer's routes: a static page beside the endpoint (`{path}/explorer`), its script and
style sheet, and its JSON (`{path}/explorer/about`).

Deliberate choices:
- The page, script and style sheet are files shipped in the package and served as they are: no
  build step, nothing fetched from elsewhere, so the page works offline and behind a firewall.
  They are served like the app's own `/docs`, to anyone: they hold nothing about the caller.
  Everything the page shows comes from the endpoint and from the JSON, which run the
  endpoint's guards.
- A strict Content-Security-Policy: scripts and styles from this origin only (no inline script
  or style), requests to this origin only (`connect-src 'self'`); images and audio a tool
  returns are shown from `data:` URLs.
- The page finds the endpoint from its own address (`…/explorer` without `/explorer`), so it
  follows include prefixes, `root_path` and a proxy's path; only the docs' address, which the
  page cannot guess, is written into it, as data attributes.
- Two paths in all: the page and its files at `{path}/explorer` (a file by `?file=`), the JSON
  at `{path}/explorer/about`. Each route beside the endpoint's is one more route a REST request
  may be tested against; served plainly (transport/plain_routes.py, `serve_plainly`), each costs that request
  one string test.
"""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from fastapi import APIRouter, Depends, FastAPI, params
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from fastapi_mcp_routes.explorer.about import About
from fastapi_mcp_routes.wire import constants as c

PAGE: Final = "/explorer"
ABOUT: Final = "/about"
FILE_PARAMETER: Final = "file"  # `{path}/explorer?file=explorer.js`
# The page's route name, by which the app finds where it is served (`app.url_path_for`).
PAGE_ROUTE: Final = "mcp_explorer"
CONTENT_SECURITY_POLICY: Final = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "media-src 'self' data:",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    )
)
_SECURITY_HEADERS: Final = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    # Shipped with the package: a new release may change them, so a browser asks again.
    "cache-control": "no-cache",
}
# What the JSON says is this caller's alone: no cache keeps it for anyone else.
_PRIVATE: Final = {"cache-control": "no-store"}
_ASSETS: Final = (("explorer.js", "text/javascript; charset=utf-8"), ("explorer.css", "text/css; charset=utf-8"))
_HTML: Final = "text/html; charset=utf-8"
Endpoint = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ExplorerRoutes:
    """The explorer's routes in the endpoint's router, and how to serve its JSON without
    FastAPI's request handling where the Origin check is its only guard."""

    about: BaseRoute  # the JSON, behind the endpoint's guards
    plain_about: Endpoint  # the JSON behind the Origin check alone


@dataclass(frozen=True, slots=True)
class Asset:
    """One static file of the page, read once from the package."""

    body: bytes
    media_type: str

    def response(self) -> Response:
        return Response(self.body, media_type=self.media_type, headers=_SECURITY_HEADERS)


def serves_explorer(app: FastAPI, explorer: bool | None) -> bool:
    """Whether the explorer is served: as `explorer` says, else where the app serves its docs."""
    if explorer is not None and not isinstance(explorer, bool):
        raise ValueError(
            f"explorer must be True (serve the MCP explorer page), False (do not) or None "
            f"(serve it where the app serves /docs), got {explorer!r}"
        )
    if explorer is None:
        return bool(app.docs_url and app.openapi_url)
    return explorer


def page_path(endpoint_path: str) -> str:
    """Where the page of the endpoint served at `endpoint_path` is."""
    return endpoint_path.rstrip("/") + PAGE


def add_explorer_routes(
    router: APIRouter,
    app: FastAPI,
    endpoint_path: str,
    about: About,
    guards: Sequence[params.Depends],
    auth: Callable[..., Any] | params.Depends | None,
    check_origin: Callable[[Request], None],
) -> ExplorerRoutes:
    """Add the page, its files and its JSON to the endpoint's router, behind `guards` and
    `auth` as the endpoint is; `check_origin` is the endpoint's Origin check."""
    where = page_path(endpoint_path)
    template = _read("explorer.html").decode()
    assets = {name: Asset(_read(name), media_type) for name, media_type in _ASSETS}

    async def page(request: Request) -> Response:
        name = request.query_params.get(FILE_PARAMETER)
        if name is None:
            return Response(_render(template, app, request), media_type=_HTML, headers=_SECURITY_HEADERS)
        asset = assets.get(name)
        return asset.response() if asset is not None else Response(status_code=404)

    router.add_route(where, page, methods=["GET"], include_in_schema=False, name=PAGE_ROUTE)
    router.add_api_route(
        where + ABOUT,
        _about_endpoint(about, auth),
        methods=["GET"],
        include_in_schema=False,
        dependencies=list(guards),
        name="mcp_explorer_about",
    )

    async def plain_about(request: Request) -> Response:
        check_origin(request)
        return JSONResponse(await about.document(request), headers=_PRIVATE)

    return ExplorerRoutes(router.routes[-1], plain_about)


def _about_endpoint(
    about: About, auth: Callable[..., Any] | params.Depends | None
) -> Callable[..., Awaitable[Response]]:
    """The JSON's endpoint, behind `auth` as the MCP endpoint is: what it returns is the
    caller's principal, which the lists' visibility reads."""
    if auth is None:

        async def about_anyone(request: Request) -> Response:
            return JSONResponse(await about.document(request), headers=_PRIVATE)

        return about_anyone
    principal_of = auth if isinstance(auth, params.Depends) else Depends(auth)

    async def about_caller(request: Request, principal: Any = principal_of) -> Response:
        request.scope[c.PRINCIPAL_SCOPE_KEY] = principal
        return JSONResponse(await about.document(request), headers=_PRIVATE)

    return about_caller


def _render(template: str, app: FastAPI, request: Request) -> str:
    """The page, told where the app's docs and OpenAPI document are (behind `root_path` too)."""
    root = str(request.scope.get("root_path", "")).rstrip("/")
    docs = root + app.docs_url if app.docs_url and app.openapi_url else ""
    openapi = root + app.openapi_url if app.openapi_url else ""
    return template.replace("{{docs}}", html.escape(docs)).replace("{{openapi}}", html.escape(openapi))


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()
