"""Expose a FastAPI app's marked routes as MCP tools: `app.include_router(mcp_routes(app))`."""

from __future__ import annotations

from fastapi_mcp_routes._audit import ToolCallEvent
from fastapi_mcp_routes._content import (
    ContentResponse,
    audio_content,
    image_content,
    resource_content,
    text_content,
)
from fastapi_mcp_routes._context import ElicitationResult, InputRequest, ToolContext, ToolContextError
from fastapi_mcp_routes._jwt import JWTBearer, Principal
from fastapi_mcp_routes._metadata import mcp_tool
from fastapi_mcp_routes._resource import ProtectedResource
from fastapi_mcp_routes._router import mcp_routes

__all__ = [
    "ContentResponse",
    "ElicitationResult",
    "InputRequest",
    "JWTBearer",
    "Principal",
    "ProtectedResource",
    "ToolCallEvent",
    "ToolContext",
    "ToolContextError",
    "audio_content",
    "image_content",
    "mcp_routes",
    "mcp_tool",
    "resource_content",
    "text_content",
]
