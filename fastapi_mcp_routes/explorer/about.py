"""The explorer's JSON (`{path}/explorer/about`): what `tools/list` does not carry, for the
caller asking.

A tool's definition does not say which route runs it, nor where that route is documented; the
lists do not say how the server is configured. This document does, for the tools, resources,
templates and prompts the lists show this caller, and no others: each entry passes the lists'
own rule (`Lists.viewer`) for the request's principal and the headers a route would inherit of
it (the credentials its `visible` predicates read). It is served behind the endpoint's guards
(the Origin check, `auth=`, `dependencies=`), as the endpoint is.

Of what the lists hide from the caller, `hidden` says only what the app's OpenAPI document
already shows anyone, plus why: for a route documented there, that it is a tool, resource or
prompt and the credentials it needs (the schemes' names, the scopes), never its name, its
description or its schema. Without it, the page would call those routes "REST only", and a
developer looking anonymously would conclude their marks did not work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.requests import Request

from fastapi_mcp_routes.explorer.facts import ServerFacts
from fastapi_mcp_routes.server.features import Listed, Listing
from fastapi_mcp_routes.server.listing import Lists
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.invoke import caller_from_scope
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire import constants as c

# The tag Swagger UI files an operation without tags under, in its deep links too.
UNTAGGED = "default"

_Operations = Mapping[tuple[str, str], Mapping[str, Any]]


class About:
    """Builds the explorer's JSON for one request."""

    def __init__(
        self,
        *,
        app: FastAPI,
        registry: ToolRegistry,
        lists: Lists,
        listings: Sequence[Listing],
        facts: ServerFacts,
        forward_headers: frozenset[bytes],
    ) -> None:
        self._app = app
        self._forward_headers = forward_headers
        self._listings = tuple(listings)
        self._registry = registry
        self._lists = lists
        self._facts = facts

    async def document(self, request: Request) -> dict[str, Any]:
        """The server's options, and the routes behind what the lists show this caller."""
        principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
        viewer = self._lists.viewer(principal, caller_from_scope(request.scope, self._forward_headers))
        table = self._registry.table()
        docs = self._docs_url(request)
        route = _RouteLinks(self._operations(), docs)
        document: dict[str, Any] = {**self._facts.as_json(), "docs": docs}
        completed: set[tuple[str, str]] = set()
        hidden: list[dict[str, Any]] = []
        for listing in self._listings:
            shown_entries = []
            for entry in listing.entries(table):
                if await viewer.sees(entry.access):
                    shown_entries.append(entry)
                elif entry.access is not None and route.documents(entry.route):
                    hidden.append(_hidden(listing, entry.access, route(entry.route)))
            document[listing.key] = [_entry(listing, entry, route(entry.route)) for entry in shown_entries]
            # A completion names its prompt or template: listed only with what it completes.
            if listing.completed_as is not None:
                ref = listing.completed_as
                completed |= {(ref, str(entry.definition[listing.label])) for entry in shown_entries}
        document["completions"] = [
            {"ref": {"type": kind, "name": target}, "argument": argument, "route": route(call)}
            for (kind, target, argument), call in table.catalog.completions.items()
            if (kind, target) in completed
        ]
        document["hidden"] = hidden
        return document

    def _docs_url(self, request: Request) -> str | None:
        """Where the app's Swagger UI is, as the browser reaches it (behind `root_path` too)."""
        if not self._app.docs_url or not self._app.openapi_url:
            return None
        return str(request.scope.get("root_path", "")).rstrip("/") + self._app.docs_url

    def _operations(self) -> _Operations:
        """The app's OpenAPI operations by (method, path): where a route's operationId and tags are."""
        if not self._app.openapi_url:
            return {}
        paths = self._app.openapi().get("paths", {})
        return {
            (method.upper(), path): operation
            for path, item in paths.items()
            for method, operation in item.items()
            if isinstance(operation, Mapping)
        }


class _RouteLinks:
    """A recipe's route as the explorer shows it: method, path, and its entry in the docs."""

    def __init__(self, operations: _Operations, docs: str | None) -> None:
        self._operations = operations
        self._docs = docs

    def documents(self, tool: Tool) -> bool:
        """Whether the app's OpenAPI document shows the route to anyone."""
        return (tool.method, tool.path_format) in self._operations

    def __call__(self, tool: Tool) -> dict[str, Any]:
        operation = self._operations.get((tool.method, tool.path_format), {})
        operation_id = operation.get("operationId")
        tags = [str(tag) for tag in operation.get("tags", ())]
        return {
            "method": tool.method,
            "path": tool.path_format,
            "operationId": operation_id,
            "tags": tags,
            "docs": _deep_link(self._docs, tags, operation_id),
        }


def _entry(listing: Listing, entry: Listed, route: dict[str, Any]) -> dict[str, Any]:
    """An entry as the explorer shows it: what names it and its route; for a tool, its marks."""
    shown: dict[str, Any] = {listing.label: entry.definition[listing.label], "route": route}
    if listing.kind == "tool":
        tool = entry.route
        shown.update(confirm=tool.confirm, task=tool.task, stream=tool.stream)
    return shown


def _hidden(listing: Listing, access: Access, route: dict[str, Any]) -> dict[str, Any]:
    """A hidden entry as the explorer shows it: its kind, its route, and what it needs."""
    return {
        "kind": listing.noun,
        "route": route,
        "needs": {
            "credentials": access.needs_auth,
            "schemes": list(access.schemes),
            "scopes": sorted(access.scopes),
            "visibleRule": access.visible is not None,
        },
    }


def _deep_link(docs: str | None, tags: list[str], operation_id: object) -> str | None:
    """Swagger UI's link to one operation: `#/{tag}/{operationId}`, under its first tag (the one
    it is shown under first), each part percent-encoded as Swagger UI writes them."""
    if docs is None or not isinstance(operation_id, str):
        return None
    tag = tags[0] if tags else UNTAGGED
    return f"{docs}#/{quote(tag, safe='')}/{quote(operation_id, safe='')}"
