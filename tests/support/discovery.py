"""Tool discovery as the router does it, with the credential headers it keeps out by default."""

from __future__ import annotations

from fastapi import FastAPI

from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolRegistry

# The credential headers `mcp_routes` uses by default.
CREDENTIALS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"})


def registry_of(app: FastAPI, credential_headers: frozenset[str] = CREDENTIALS) -> ToolRegistry:
    """The tool registry of `app`, keeping `credential_headers` out of the tools' arguments."""
    return ToolRegistry(app, credential_headers)


def tool_of(app: FastAPI, name: str, credential_headers: frozenset[str] = CREDENTIALS) -> Tool:
    """The tool `name` as discovered in `app` now."""
    return registry_of(app, credential_headers).table().by_name[name]
