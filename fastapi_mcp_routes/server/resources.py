"""`resources/read`, `resources/subscribe` and `resources/unsubscribe`.

A read finds the resource its URI names (an exact URI first, then the templates in order),
turns the template's variables into the route's arguments, and runs the route as a tool call
runs it (server/route_call.py): every middleware, dependency and guard of the route applies. An
unknown URI, and a route that answers 404, are the era's resource-not-found error with the URI
in `data` (SEP-2164). A subscription (`resources/subscribe`, or a 2026-07-28
`subscriptions/listen` naming resources) is taken only from a caller the route's guards let read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI

from fastapi_mcp_routes.server.call import InputRequired
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.route_call import RouteRunner, route_error
from fastapi_mcp_routes.tools.catalog import Resource
from fastapi_mcp_routes.tools.feature_results import RouteFailed, check_status, resource_contents
from fastapi_mcp_routes.tools.guards import refusal
from fastapi_mcp_routes.tools.invoke import Caller, planned_path
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import InvalidParams, ResourceNotFound, ToolError
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate


class ResourceMethods:
    """Reads resources and takes subscriptions to them."""

    def __init__(
        self, *, app: FastAPI, registry: ToolRegistry, runner: RouteRunner, max_subscriptions: int, max_uri_chars: int
    ) -> None:
        self._app = app
        self._registry = registry
        self._runner = runner
        self._max_subscriptions = max_subscriptions
        self._max_uri_chars = max_uri_chars

    async def read(self, request: Request, channel: ClientChannel) -> Result:
        uri = self._uri(request.params)
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
        await self._ask_guards(entry, arguments, channel.caller)
        await channel.subscribe(entry.template.expand(arguments), self._max_subscriptions)
        return {}

    async def listened(self, uris: Iterable[str], caller: Caller) -> dict[str, str]:
        """The resources a `subscriptions/listen` names that exist, as the server spells their
        URIs, each with the client's spelling; the route's refusal, as `subscribe` answers it,
        when a route's guards turn the caller away."""
        honored: dict[str, str] = {}
        for uri in uris:
            found = self._found(uri)
            if found is not None:
                entry, arguments = found
                await self._ask_guards(entry, arguments, caller)
                honored.setdefault(entry.template.expand(arguments), uri)
        return honored

    async def _ask_guards(self, entry: Resource, arguments: Mapping[str, str], caller: Caller) -> None:
        """A subscription is taken only from a caller the route's guards let read."""
        refused = await refusal(self._app, entry.call, arguments, caller)
        if refused is not None:
            try:
                check_status(entry.call, refused)
            except RouteFailed as failed:
                raise route_error(entry.call, failed) from None

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


def _not_found(uri: str, channel: ClientChannel) -> ResourceNotFound:
    return ResourceNotFound(truncate(uri, 200), channel.resource_not_found_code)
