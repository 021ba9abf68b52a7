"""Expose a FastAPI app's marked routes as MCP tools, resources and prompts:
`app.include_router(mcp_routes(app))`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal
from fastapi_mcp_routes.auth.protected_resource import ProtectedResource
from fastapi_mcp_routes.options import (
    Limits,
    Origins,
    ServerCard,
    ServerInfo,
    Sessions,
    Skills,
    Streaming,
    Tasks,
    Telemetry,
    ToolCalls,
)
from fastapi_mcp_routes.router import mcp_routes
from fastapi_mcp_routes.server.audit import ToolCallEvent, log_tool_call
from fastapi_mcp_routes.server.context import ElicitationResult, InputRequest, ToolContext, ToolContextError
from fastapi_mcp_routes.server.resources.updates import notify_resource_updated
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.tools.catalog.marks import mcp_completion, mcp_prompt, mcp_resource
from fastapi_mcp_routes.tools.content import (
    ContentResponse,
    PromptMessage,
    PromptResponse,
    audio_content,
    image_content,
    resource_content,
    resource_link,
    text_content,
)
from fastapi_mcp_routes.tools.credentials import Credentials
from fastapi_mcp_routes.tools.marking import auth_guard, mcp_tool

if TYPE_CHECKING:
    from fastapi_mcp_routes.store.redis.store import RedisStore

__all__ = [
    "ContentResponse",
    "Credentials",
    "ElicitationResult",
    "InputRequest",
    "JWTBearer",
    "Limits",
    "Origins",
    "Principal",
    "PromptMessage",
    "PromptResponse",
    "ProtectedResource",
    "RedisStore",
    "ServerCard",
    "ServerInfo",
    "Sessions",
    "Skills",
    "Store",
    "Streaming",
    "Tasks",
    "Telemetry",
    "ToolCallEvent",
    "ToolCalls",
    "ToolContext",
    "ToolContextError",
    "audio_content",
    "auth_guard",
    "image_content",
    "log_tool_call",
    "mcp_completion",
    "mcp_prompt",
    "mcp_resource",
    "mcp_routes",
    "mcp_tool",
    "notify_resource_updated",
    "resource_content",
    "resource_link",
    "text_content",
]

# The installed distribution's own: pyproject.toml is its one place, so the two cannot disagree.
# A source tree put on the path without installing it has no version to read.
try:
    __version__ = version("fastapi-mcp-routes")
except PackageNotFoundError:
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    # RedisStore is imported on first use: the package itself does not need redis (an extra).
    if name == "RedisStore":
        from fastapi_mcp_routes.store.redis.store import RedisStore

        return RedisStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
