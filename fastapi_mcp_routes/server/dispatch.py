"""MCP methods: what each request means, independent of HTTP and of the protocol era.

The transport hands over a classified message and the `ClientChannel` of its request; the
dispatcher looks the method up in one table, answers with a result or raises a typed
`McpError`, and lets the channel shape the result for its era. `tools/call` is the
`ToolCallPipeline`'s (server/pipeline.py); resources, prompts and completion have their own
modules (server/resources/methods.py, server/prompts/methods.py); the lists are `Lists`' (server/listing.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.server.call import LOG_LEVELS
from fastapi_mcp_routes.server.channel import CANCELLED, ClientChannel, Result
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS
from fastapi_mcp_routes.server.listing import LIST_METHODS, Generations, Lists
from fastapi_mcp_routes.server.pipeline import ToolCallPipeline
from fastapi_mcp_routes.server.prompts.methods import PromptMethods
from fastapi_mcp_routes.server.resources.methods import ResourceMethods
from fastapi_mcp_routes.server.resources.updates import ResourceUpdates
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.server.tasks.records import TASKS_EXTENSION
from fastapi_mcp_routes.tools.catalog import Catalog
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import InvalidParams, MethodNotFound
from fastapi_mcp_routes.wire.jsonrpc import Reply, Request, truncate

TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"
RESOURCE_UPDATED: Final = "notifications/resources/updated"
# Both eras: tools, logging, and list-change notifications (the GET stream in a session,
# subscriptions/listen in the stateless revision); resources, prompts and completions when the
# app has them (`capabilities`).
CAPABILITIES: Final = {"logging": {}, "tools": {"listChanged": True}}
# Results a client may cache only for itself: a read runs the route as this caller.
_PRIVATE: Final = frozenset({"resources/read"})
_Handler = Callable[[Request, ClientChannel], Awaitable[Result]]


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    name: str
    version: str
    instructions: str | None


class Dispatcher:
    """Answers MCP requests and takes MCP notifications and client replies."""

    def __init__(
        self,
        *,
        identity: ServerIdentity,
        lists: Lists,
        calls: ToolCallPipeline,
        resources: ResourceMethods,
        prompts: PromptMethods,
        updates: ResourceUpdates,
        tasks: TaskMethods,
        catalog: Callable[[], Catalog],
        offers_tasks: Callable[[], bool] = lambda: False,
    ) -> None:
        self._identity = identity
        self._lists = lists
        self._catalog = catalog
        self._offers_tasks = offers_tasks
        self.updates = updates  # what listening streams hear resource updates from
        self.resources = resources  # what a subscriptions/listen asks which resources it may hear of
        self.tasks = tasks  # and which tasks
        self._methods: dict[str, _Handler] = {
            "initialize": self._initialize,
            "server/discover": self._discover,
            "ping": self._ping,
            "logging/setLevel": self._set_log_level,
            "tools/call": calls,
            "resources/read": resources.read,
            "resources/subscribe": resources.subscribe,
            "resources/unsubscribe": resources.unsubscribe,
            "prompts/get": prompts.get,
            "completion/complete": prompts.complete,
            "tasks/get": tasks.get,
            "tasks/update": tasks.update,
            "tasks/cancel": tasks.cancel,
            **dict.fromkeys(LIST_METHODS, self._list),
        }

    async def request(self, request: Request, channel: ClientChannel) -> Result:
        """Answer one request; raises `McpError` for protocol errors, `CallCancelled` when the
        client cancelled it."""
        handler = self._methods.get(request.method) if request.method in channel.methods else None
        if handler is None:
            raise MethodNotFound(f"Method not found: {truncate(request.method)!r}.", truncate(request.method))
        result = await handler(request, channel)
        # A list that depends on who asks must not be cached for anyone else.
        method = request.method
        private = method in _PRIVATE or (method in LIST_METHODS and self._lists.personal(method))
        return channel.shape(method, result, private)

    async def notification(self, method: str, params: Mapping[str, Any], channel: ClientChannel) -> None:
        """Take one notification; unknown ones are ignored, as JSON-RPC asks."""
        if method == CANCELLED:
            await channel.cancel(params)

    async def reply(self, reply: Reply, channel: ClientChannel) -> None:
        """Hand a client's reply to the call waiting for it; unknown ids are ignored."""
        await channel.deliver(reply.id, reply.payload)

    def listening_from(self) -> Generations:
        """Where a new listener starts: it has missed nothing so far."""
        return self._lists.generation()

    async def changes_after(self, seen: Generations) -> tuple[Generations, list[dict[str, Any]]]:
        """Wait for what a listener that saw `seen` has not heard yet: the generations then,
        and the notifications to send (one per list that changed)."""
        now = await self._lists.generation_after(seen)
        moved = zip(now, seen, (TOOLS_LIST_CHANGED, RESOURCES_LIST_CHANGED, PROMPTS_LIST_CHANGED), strict=True)
        return now, [{"jsonrpc": c.JSONRPC_VERSION, "method": method} for a, b, method in moved if a != b]

    def capabilities(self) -> dict[str, Any]:
        """What the server offers now: resources, prompts and completions when the app has them."""
        catalog = self._catalog()
        offered: dict[str, Any] = dict(CAPABILITIES)
        if catalog.resources or catalog.templates:
            offered["resources"] = {"subscribe": True, "listChanged": True}
        if catalog.prompts:
            offered["prompts"] = {"listChanged": True}
        if catalog.completes:
            offered["completions"] = {}
        return offered

    async def _initialize(self, request: Request, channel: ClientChannel) -> Result:
        params = request.params
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("Invalid params: 'protocolVersion' must be a string.")
        for key in ("capabilities", "clientInfo"):
            if key in params and not isinstance(params[key], dict):
                raise InvalidParams(f"Invalid params: {key!r} must be an object.")
        result: dict[str, Any] = {
            "protocolVersion": negotiate_version(requested),
            "capabilities": self.capabilities(),
            "serverInfo": {"name": self._identity.name, "version": self._identity.version},
        }
        return self._with_instructions(result)

    async def _discover(self, request: Request, channel: ClientChannel) -> Result:
        capabilities = self.capabilities()
        if self._offers_tasks():  # an extension of the stateless revision only (SEP-2663)
            capabilities["extensions"] = {TASKS_EXTENSION: {}}
        return self._with_instructions({"supportedVersions": list(MODERN_VERSIONS), "capabilities": capabilities})

    def _with_instructions(self, result: dict[str, Any]) -> dict[str, Any]:
        if self._identity.instructions:
            result["instructions"] = self._identity.instructions
        return result

    async def _ping(self, request: Request, channel: ClientChannel) -> Result:
        return {}

    async def _set_log_level(self, request: Request, channel: ClientChannel) -> Result:
        level = request.params.get("level")
        if level not in LOG_LEVELS:
            raise InvalidParams(f"Invalid params: 'level' must be one of {', '.join(LOG_LEVELS)}.")
        await channel.set_log_level(level)
        return {}

    async def _list(self, request: Request, channel: ClientChannel) -> Result:
        return self._lists.page(request.method, request.params.get("cursor"), channel)


def negotiate_version(requested: str) -> str:
    """Echo a supported session-era version, else offer the newest."""
    return requested if requested in c.SESSION_ERA_VERSIONS else c.LATEST_SESSION_VERSION
