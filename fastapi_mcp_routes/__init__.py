"""Expose a FastAPI app's marked routes as MCP tools: `app.include_router(mcp_routes(app))`."""

from __future__ import annotations

from fastapi_mcp_routes._metadata import mcp_tool
from fastapi_mcp_routes._router import mcp_routes

__all__ = ["mcp_routes", "mcp_tool"]
