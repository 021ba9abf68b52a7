"""What an MCP endpoint serves, left on its route's endpoint so that tools outside the request
path (the command line: `fastapi-mcp-routes list|check|call`) can find it in an app's route
table without serving the app.

`mcp_routes` builds the registry and the policies it serves with (building.py); the app only
holds the route. So the route's endpoint carries a small frozen record of them, read back
by walking the app's routes (FastAPI's `iter_route_contexts`, which also gives the path the
endpoint has once included, under any prefix).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.features import Listing
from fastapi_mcp_routes.server.urls.policy import UrlPolicy
from fastapi_mcp_routes.tools.registry import ToolRegistry

# The attribute of the endpoint function that holds the record; namespaced, as it lives on a
# function FastAPI and the app's own code may also look at.
_ATTRIBUTE: Final = "__fastapi_mcp_routes_served__"


@dataclass(frozen=True, slots=True)
class ServedEndpoint:
    """What one `mcp_routes` router serves, and how."""

    registry: ToolRegistry  # the tools, resources, prompts and completions, discovered lazily
    urls: UrlPolicy  # which URL arguments calls may pass (its startup warnings)
    deployment: Deployment  # where confirmation tokens and other state live
    visible_only: bool  # lists hide what a caller statically cannot use (`list_visible_only`)
    listings: tuple[Listing, ...] = ()  # the lists the features declare, in order


def mark_served(endpoint: Callable[..., Any], served: ServedEndpoint) -> None:
    """Leave `served` on the endpoint function the router's route calls."""
    setattr(endpoint, _ATTRIBUTE, served)


def served_by(route: Any) -> ServedEndpoint | None:
    """The record of the MCP endpoint this route serves, or None for any other route."""
    served = getattr(getattr(route, "endpoint", None), _ATTRIBUTE, None)
    return served if isinstance(served, ServedEndpoint) else None


def served_endpoints(app: FastAPI) -> list[tuple[str, ServedEndpoint]]:
    """Every MCP endpoint in the app's route table: the path it answers on (with the prefixes of
    its inclusions) and what it serves."""
    return [
        (context.path, served)
        for context in iter_route_contexts(app.routes)
        if (served := served_by(context.original_route)) is not None and isinstance(context.path, str)
    ]


def check_served_once(app: FastAPI) -> None:
    """One endpoint per app, included once; `ValueError` otherwise. A second endpoint would
    serve the same routes with sessions, tokens and subscriptions of its own, and the routes'
    writes would notify both; the same router included twice would start its background work
    twice. Checked at startup (router.py) and by `fastapi-mcp-routes check`."""
    paths = [path for path, _ in served_endpoints(app)]
    if len(paths) > 1:
        raise ValueError(
            f"the app serves {len(paths)} MCP endpoints ({', '.join(map(repr, paths))}): one endpoint serves "
            "every marked route, so build it once with mcp_routes(app, ...) and include it once, "
            "app.include_router(mcp_routes(app)); to serve it under another path, pass path= to mcp_routes"
        )
