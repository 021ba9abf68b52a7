"""Expose a FastAPI app's marked routes as MCP tools: `app.include_router(mcp_routes(app))`."""

from __future__ import annotations

from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal
from fastapi_mcp_routes.auth.protected_resource import ProtectedResource
from fastapi_mcp_routes.options import Limits, Sessions
from fastapi_mcp_routes.router import mcp_routes
from fastapi_mcp_routes.server.audit import ToolCallEvent, log_tool_call
from fastapi_mcp_routes.server.context import ElicitationResult, InputRequest, ToolContext, ToolContextError
from fastapi_mcp_routes.tools.content import (
    ContentResponse,
    audio_content,
    image_content,
    resource_content,
    text_content,
)
from fastapi_mcp_routes.tools.marking import auth_guard, mcp_tool

__all__ = [
    "ContentResponse",
    "ElicitationResult",
    "InputRequest",
    "JWTBearer",
    "Limits",
    "Principal",
    "ProtectedResource",
    "Sessions",
    "ToolCallEvent",
    "ToolContext",
    "ToolContextError",
    "audio_content",
    "auth_guard",
    "image_content",
    "log_tool_call",
    "mcp_routes",
    "mcp_tool",
    "resource_content",
    "text_content",
]
