"""What an MCP endpoint serves, left on its route's endpoint so that tools outside the request
path (the command line: `fastapi-mcp-routes list|check|call`) can find it in an app's route
table without serving the app.

`mcp_routes` builds the registry and the policies it serves with inside its closure; the app
only holds the route. So the route's endpoint carries a small frozen record of them, read back
by walking the app's routes (FastAPI's `iter_route_contexts`, which also gives the path the
endpoint has once included, under any prefix).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.url_policy import UrlPolicy
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


def mark_served(endpoint: Callable[..., Any], served: ServedEndpoint) -> None:
    """Leave `served` on the endpoint function the router's route calls."""
    setattr(endpoint, _ATTRIBUTE, served)


def served_by(route: Any) -> ServedEndpoint | None:
    """The record of the MCP endpoint this route serves, or None for any other route."""
    served = getattr(getattr(route, "endpoint", None), _ATTRIBUTE, None)
    return served if isinstance(served, ServedEndpoint) else None
