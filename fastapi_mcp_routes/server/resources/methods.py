"""`resources/read`, `resources/subscribe` and `resources/unsubscribe`.

A read finds the resource its URI names (an exact URI first, then the templates in order),
turns the template's variables into the route's arguments, and runs the route as a tool call
runs it (server/route_call.py): every middleware, dependency and guard of the route applies. An
unknown URI, and a route that answers 404, are the era's resource-not-found error with the URI
in `data` (SEP-2164). A subscription (`resources/subscribe`, or a 2026-07-28
`subscriptions/listen` naming resources) is taken only from a caller the route lets read: the
read runs once, as the caller's, so every guard of the route decides, not only its security
schemes (a wrong API key is refused as on a read), and its answer is not kept; a 404 still
subscribes (what does not exist yet may be watched for its creation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi_mcp_routes.server.call import InputRequired
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.features import ResourceReader
from fastapi_mcp_routes.server.route_call import RouteRunner
from fastapi_mcp_routes.tools.catalog.entries import Resource
from fastapi_mcp_routes.tools.catalog.results import resource_contents
from fastapi_mcp_routes.tools.invoke import planned_path
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import InvalidParams, McpError, ResourceNotFound, ToolError
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate


class ResourceMethods:
    """Reads resources and takes subscriptions to them."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        runner: RouteRunner,
        max_subscriptions: int,
        max_uri_chars: int,
        readers: Sequence[ResourceReader] = (),
    ) -> None:
        self._registry = registry
        self._runner = runner
        self._max_subscriptions = max_subscriptions
        self._max_uri_chars = max_uri_chars
        self._readers = tuple(readers)  # other features' resources, no route behind them

    async def read(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
        for reader in self._readers:
            if reader.serves(uri):
                return await reader.read(request, channel, uri)
        entry, arguments = self.find(uri, channel)
        ran = await self._runner.run(
            request, channel, entry.call, arguments, not_found=lambda: _not_found(uri, channel)
        )
        if isinstance(ran, InputRequired):
            return ran.result
        return {"contents": resource_contents(uri, ran, entry.definition.get("mimeType"))}

    async def subscribe(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
        entry, arguments = self.find(uri, channel)
        await self._may_read(request, channel, uri, entry, arguments)
        await channel.subscribe(entry.template.expand(arguments), self._max_subscriptions)
        return {}

    async def listened(self, uris: Iterable[str], request: Request, channel: ClientChannel) -> dict[str, str]:
        """The resources a `subscriptions/listen` names that exist, as the server spells their
        URIs, each with the client's spelling; the route's refusal, as `subscribe` answers it,
        when a route turns the caller away."""
        honored: dict[str, str] = {}
        for uri in uris:
            found = self._found(uri)
            if found is not None:
                entry, arguments = found
                await self._may_read(request, channel, uri, entry, arguments)
                honored.setdefault(entry.template.expand(arguments), uri)
        return honored

    async def _may_read(
        self, request: Request, channel: ClientChannel, uri: str, entry: Resource, arguments: Mapping[str, str]
    ) -> None:
        """Read the resource once as the caller, so every guard of its route decides whether
        the caller may hear of its changes; the route's refusal is the subscription's. A 404
        is not one: a note that does not exist yet may be watched for its creation."""
        try:
            ran = await self._runner.run(request, channel, entry.call, arguments, _NotYet)
        except _NotYet:
            return
        if isinstance(ran, InputRequired):
            raise InvalidParams(f"Invalid params: reading {truncate(uri)!r} asks questions; it cannot be watched.")

    async def unsubscribe(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
        found = self._registry.cached().catalog.resource(uri)
        canonical = found[0].template.expand(found[1]) if found is not None else uri
        await channel.unsubscribe(canonical)
        return {}

    def _uri(self, params: Mapping[str, Any]) -> str:
        """The request's URI; one longer than `Limits.max_uri_chars` is never matched against the
        templates, whose time grows with it."""
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams("Invalid params: 'uri' must be a non-empty string.")
        if len(uri) > self._max_uri_chars:
            raise InvalidParams(
                f"Invalid params: a resource URI may be {self._max_uri_chars} characters long at most "
                "(Limits.max_uri_chars)."
            )
        return uri

    def find(self, uri: str, channel: ClientChannel) -> tuple[Resource, dict[str, str]]:
        """The resource `uri` names and the route's arguments; the era's not-found error for
        a URI no resource has, `InvalidParams` for variable values no read may use."""
        found = self._found(uri)
        if found is None:
            raise _not_found(uri, channel)
        return found

    def _found(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        found = self._registry.table().catalog.resource(uri)
        if found is None:
            return None
        entry, values = found
        try:
            arguments = entry.arguments(values)
            # A value the route's path cannot take (a "/" in one segment) is refused here, so a
            # subscription is never taken to a URI no read may use.
            planned_path(entry.call, arguments)
        except ToolError as exc:
            raise InvalidParams(f"Invalid params: {exc}", {"uri": truncate(uri, 200)}) from None
        return entry, arguments


class _NotYet(McpError):
    """A subscription's read found nothing (404): the resource may exist later."""

    def __init__(self) -> None:
        super().__init__("Resource not found")


def _not_found(uri: str, channel: ClientChannel) -> ResourceNotFound:
    return ResourceNotFound(truncate(uri, 200), channel.resource_not_found_code)
