"""MCP methods: what each request means, independent of HTTP and of sessions.

The transport hands over a classified request and a `CallContext`; the dispatcher answers with
a result or raises a typed `McpError`. Session bookkeeping stays in the transport, so the
session era and the stateless revision share this one dispatcher.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp

from fastapi_mcp_routes import _constants as c
from fastapi_mcp_routes._errors import InvalidParams, MethodNotFound, ToolError
from fastapi_mcp_routes._invoke import Caller, invoke
from fastapi_mcp_routes._json import RawJSON
from fastapi_mcp_routes._registry import ToolRegistry, decode_cursor
from fastapi_mcp_routes._results import crash_result, error_result, tool_result
from fastapi_mcp_routes._wire import truncate

Result = Mapping[str, Any] | RawJSON


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    name: str
    version: str
    instructions: str | None


@dataclass(frozen=True, slots=True)
class CallContext:
    """What a method handler may know about the request besides its params."""

    protocol_version: str
    caller: Caller


class Dispatcher:
    """Answers MCP requests and takes MCP notifications."""

    def __init__(self, app: ASGIApp, registry: ToolRegistry, identity: ServerIdentity) -> None:
        self._app = app
        self._registry = registry
        self._identity = identity
        self._methods: dict[str, Callable[[Mapping[str, Any], CallContext], Awaitable[Result]]] = {
            "initialize": self._initialize,
            "ping": self._ping,
            "tools/list": self._list_tools,
            "tools/call": self._call_tool,
        }

    async def request(self, method: str, params: Mapping[str, Any], ctx: CallContext) -> Result:
        """Answer one request; raises `McpError` for protocol errors."""
        handler = self._methods.get(method)
        if handler is None:
            raise MethodNotFound(f"Method not found: {truncate(method)!r}.")
        return await handler(params, ctx)

    async def notification(self, method: str, params: Mapping[str, Any], ctx: CallContext) -> None:
        """Take one notification. `notifications/initialized` needs nothing from us; unknown
        notifications are ignored, as JSON-RPC asks."""

    async def _initialize(self, params: Mapping[str, Any], ctx: CallContext) -> Result:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: 'protocolVersion' must be a string.")
        for key in ("capabilities", "clientInfo"):
            if key in params and not isinstance(params[key], dict):
                raise InvalidParams(f"Invalid params: {key!r} must be an object.")
        result: dict[str, Any] = {
            "protocolVersion": negotiate_version(requested),
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self._identity.name, "version": self._identity.version},
        }
        if self._identity.instructions:
            result["instructions"] = self._identity.instructions
        return result

    async def _ping(self, params: Mapping[str, Any], ctx: CallContext) -> Result:
        return {}

    async def _list_tools(self, params: Mapping[str, Any], ctx: CallContext) -> Result:
        table = self._registry.table()
        cursor = params.get("cursor")
        if cursor is None:
            return table.pages[0]
        index = decode_cursor(cursor, len(table.pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return table.pages[index]

    async def _call_tool(self, params: Mapping[str, Any], ctx: CallContext) -> Result:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("Invalid params: 'name' must be a string.")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        elif not isinstance(arguments, dict):
            raise InvalidParams("Invalid params: 'arguments' must be an object.")
        tool = self._registry.lookup(name)
        if tool is None:
            raise InvalidParams(f"Unknown tool: {truncate(name)!r}.")
        try:
            response = await invoke(self._app, tool, arguments, ctx.caller)
        except ToolError as exc:
            return error_result(str(exc))
        except Exception:
            return crash_result(tool.name)
        return tool_result(tool, response)


def negotiate_version(requested: str) -> str:
    """Echo a supported session-era version, else offer the newest."""
    return requested if requested in c.SESSION_ERA_VERSIONS else c.LATEST_SESSION_VERSION
