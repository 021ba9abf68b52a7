"""MCP methods: what each request means, independent of HTTP and of the protocol era.

The transport hands over a classified message and the `ClientChannel` of its request; the
dispatcher looks the method up in the table the features declared (server/features.py), answers
with a result or raises a typed `McpError`, and lets the channel shape the result for its era.
The lifecycle methods (`initialize`, `server/discover`, `ping`, `logging/setLevel`) are its own
declaration; `initialize` and `server/discover` offer what every feature's declaration offers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import anyio
from anyio.abc import TaskStatus

from fastapi_mcp_routes.server.call import LOG_LEVELS
from fastapi_mcp_routes.server.channel import CANCELLED, ClientChannel, Result
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS
from fastapi_mcp_routes.server.features import (
    BOTH_ERAS,
    SESSION_ERA,
    STATELESS_ERA,
    Feature,
    ListChange,
    Listing,
    Method,
    check_features,
)
from fastapi_mcp_routes.server.listing import Generations, Lists
from fastapi_mcp_routes.server.resources.methods import ResourceMethods
from fastapi_mcp_routes.server.resources.updates import ResourceUpdates
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.telemetry.recorder import Recorder
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import InvalidParams, MethodNotFound
from fastapi_mcp_routes.wire.jsonrpc import Reply, Request, truncate

# Every client may set a log level (sessions) or name one per request (2026-07-28).
_LIFECYCLE_CAPABILITIES: Final[Mapping[str, Any]] = {"logging": {}}


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    name: str
    version: str
    instructions: str | None

    def info(self) -> dict[str, str]:
        """The `Implementation` clients are told: `serverInfo`, in both eras and on a Server Card."""
        return {"name": self.name, "version": self.version}


@dataclass(frozen=True, slots=True)
class Listened:
    """What a listening stream follows besides list changes: the resources it may hear of and
    their updates, and the tasks it may follow."""

    resources: ResourceMethods
    updates: ResourceUpdates
    tasks: TaskMethods

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hear resource updates and task changes for this process's streams, for the app's
        lifetime (started once both listen)."""
        async with anyio.create_task_group() as readers:
            await readers.start(self.updates.serve)
            await readers.start(self.tasks.serve)
            task_status.started()


@dataclass(frozen=True, slots=True)
class _Served:
    """A method as the dispatcher serves it."""

    answer: Callable[[Request, ClientChannel], Awaitable[Result]]
    eras: frozenset[str]
    private: bool
    listing: Listing | None = None  # a list's privacy depends on its entries


class Dispatcher:
    """Answers MCP requests and takes MCP notifications and client replies."""

    def __init__(
        self,
        *,
        identity: ServerIdentity,
        lists: Lists,
        features: Sequence[Feature],
        table: Callable[[], ToolTable],
        listened: Listened,
        recorder: Recorder | None = None,
    ) -> None:
        self.recorder = recorder if recorder is not None else Recorder()
        self._identity = identity
        self.listened = listened
        self._lists = lists
        self._table = table
        self.features = check_features((self._lifecycle(), *features))
        self._served: dict[str, _Served] = {}
        for feature in self.features:
            for method in feature.methods:
                self._served[method.name] = _Served(method.answer, method.eras, method.private)
            for listing in feature.listings:
                self._served[listing.method] = _Served(self._list_of(listing), BOTH_ERAS, False, listing)

    async def request(self, request: Request, channel: ClientChannel) -> Result:
        """Answer one request; raises `McpError` for protocol errors, `CallCancelled` when the
        client cancelled it."""
        served = self._served.get(request.method)
        if served is None or channel.era not in served.eras:
            raise MethodNotFound(f"Method not found: {truncate(request.method)!r}.", truncate(request.method))
        listener = self.recorder.listener()  # None unless an SDK listens (telemetry/recorder.py)
        if listener is None:
            result = await served.answer(request, channel)
        else:
            result = await listener.serve(served.answer, request, channel)
        # A list that depends on who asks must not be cached for anyone else.
        private = served.private or (served.listing is not None and self._lists.personal(served.listing))
        return channel.shape(request.method, result, private)

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
        moved = zip(now, seen, self._lists.watched, strict=True)
        return now, [{"jsonrpc": c.JSONRPC_VERSION, "method": change.notification} for a, b, change in moved if a != b]

    def list_changes(self) -> tuple[ListChange, ...]:
        """The list-change notifications a listener may ask for."""
        return self._lists.watched

    def listings(self) -> tuple[Listing, ...]:
        """The lists the features serve, in the order declared."""
        return tuple(listing for feature in self.features for listing in feature.listings)

    def capabilities(self) -> dict[str, Any]:
        """What the server offers now: each feature's capability, where the app has it."""
        table = self._table()
        offered: dict[str, Any] = {}
        for feature in self.features:
            offered.update(feature.capability(table))
        return offered

    def supported_versions(self) -> tuple[str, ...]:
        """The versions `server/discover` reports: those a request without a session may name."""
        return MODERN_VERSIONS

    def _lifecycle(self) -> Feature:
        return Feature(
            "lifecycle",
            methods=(
                Method("initialize", self._initialize, frozenset({SESSION_ERA})),
                Method("ping", self._ping, frozenset({SESSION_ERA})),
                Method("logging/setLevel", self._set_log_level, frozenset({SESSION_ERA})),
                Method("server/discover", self._discover, frozenset({STATELESS_ERA})),
            ),
            capability=lambda table: _LIFECYCLE_CAPABILITIES,
        )

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
            "capabilities": self._with_extensions(self.capabilities(), SESSION_ERA),
            "serverInfo": self._identity.info(),
        }
        return self._with_instructions(result)

    async def _discover(self, request: Request, channel: ClientChannel) -> Result:
        capabilities = self._with_extensions(self.capabilities(), STATELESS_ERA)
        return self._with_instructions(
            {"supportedVersions": list(self.supported_versions()), "capabilities": capabilities}
        )

    def _with_extensions(self, capabilities: dict[str, Any], era: str) -> dict[str, Any]:
        """The extensions the features offer in `era` (tasks: the stateless revision only,
        SEP-2663), under `extensions` where there are any."""
        table = self._table()
        extensions: dict[str, Any] = {}
        for feature in self.features:
            if era in feature.extension_eras:
                extensions.update(feature.extensions(table))
        if extensions:
            capabilities["extensions"] = extensions
        return capabilities

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

    def _list_of(self, listing: Listing) -> Callable[[Request, ClientChannel], Awaitable[Result]]:
        async def answer(request: Request, channel: ClientChannel) -> Result:
            return await self._lists.page(listing, request.params.get("cursor"), channel)

        return answer


def negotiate_version(requested: str) -> str:
    """Echo a supported session-era version, else offer the newest."""
    return requested if requested in c.SESSION_ERA_VERSIONS else c.LATEST_SESSION_VERSION
