"""The link from the app's OpenAPI description (and so from `/docs`) to the explorer.

The link is added to what `app.openapi()` returns, never to `app.description` nor to the
schema FastAPI caches in `app.openapi_schema`: the app's own description stays as written, a
schema generated (or set) before `mcp_routes` was called gets the link too, and the link is
worked out on each call from where the page is served then (include prefixes change with
`include_router`).

The link is relative to the docs page, so it also holds behind a `root_path` or a proxy's
path prefix, which the schema cannot know: from `/docs`, `./mcp/explorer`. Swagger UI and
ReDoc render the description as Markdown, where it is an ordinary link.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any, Final

from fastapi import FastAPI
from starlette.routing import NoMatchFound

from fastapi_mcp_routes.explorer.pages import PAGE_ROUTE

LINK_TEXT: Final = "MCP explorer"
# What the link leads to, said after it: a reader of /docs may not know what MCP is.
LINK_NOTE: Final = (
    "the tools, resources and prompts this API serves over MCP (Model Context Protocol), as each caller sees them"
)


def link_docs_to(app: FastAPI) -> None:
    """Append a Markdown link to the explorer's page to the app's OpenAPI `info.description`."""
    generate: Callable[[], dict[str, Any]] = app.openapi

    def openapi_with_link() -> dict[str, Any]:
        schema = generate()
        where = served_path(app)
        if where is None:
            return schema
        info = dict(schema.get("info") or {})
        line = f"[{LINK_TEXT}]({link_from_docs(app, where)}): {LINK_NOTE}."
        described = str(info.get("description") or "")
        info["description"] = f"{described}\n\n{line}" if described else line
        return {**schema, "info": info}

    app.openapi = openapi_with_link  # type: ignore[method-assign]


def served_path(app: FastAPI) -> str | None:
    """The path the page is served at in the app now (wherever the router was included, and
    however the route table was arranged at startup); None when it is not served, or its path
    holds a parameter (a tenant's prefix), which no one link fills."""
    try:
        return str(app.url_path_for(PAGE_ROUTE))
    except NoMatchFound:
        return None


def link_from_docs(app: FastAPI, page_path: str) -> str:
    """The page's address relative to the app's docs page, else its path."""
    docs = app.docs_url or app.redoc_url
    if not docs:
        return page_path
    relative = posixpath.relpath(page_path, posixpath.dirname(docs) or "/")
    # "./" keeps a first segment with a colon from reading as a URL scheme.
    return relative if relative.startswith(".") else "./" + relative
