"""Finding the MCP endpoint in an app's route table: the route `mcp_routes` added, wherever the
router was included, and the record of what it serves (`fastapi_mcp_routes/served.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from fastapi import FastAPI

from fastapi_mcp_routes.cli.errors import CliError
from fastapi_mcp_routes.served import ServedEndpoint, check_served_once, served_endpoints

_HOW_TO_SERVE: Final = "app.include_router(mcp_routes(app))"


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The app's MCP endpoint: the app, the path the endpoint answers on (with any prefix of its
    inclusion) and what it serves."""

    app: FastAPI
    path: str
    served: ServedEndpoint


def find_endpoint(app: FastAPI, target: str) -> Endpoint:
    """The one MCP endpoint of `app` (`target` names the app in messages); `CliError` when it
    has none, or more than one."""
    found = [Endpoint(app, path, served) for path, served in served_endpoints(app)]
    if not found:
        raise CliError(
            f"{target!r} serves no MCP endpoint: add {_HOW_TO_SERVE} after creating the app "
            "(from fastapi_mcp_routes import mcp_routes)."
        )
    try:
        check_served_once(app)
    except ValueError as twice:
        raise CliError(f"{target!r}: {twice}.") from None
    return found[0]
