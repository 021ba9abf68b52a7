"""The scopes a route's security schemes ask for, read once; and whether the route's answer
refused a token for lacking one (the step-up challenge, wire/challenge.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi_mcp_routes.auth.jwt import JWTBearer
from fastapi_mcp_routes.tools.access import Access, access_of
from fastapi_mcp_routes.wire.challenge import HEADER_WWW_AUTHENTICATE, SCOPES_META_KEY, refuses_for_scope, scope_tokens

if TYPE_CHECKING:
    from fastapi_mcp_routes.tools.invoke import CapturedResponse
    from fastapi_mcp_routes.tools.recipe import Tool

_WWW_AUTHENTICATE = HEADER_WWW_AUTHENTICATE.encode()


def route_scopes(route: Any) -> tuple[str, ...]:
    """Every scope the route's schemes ask for, sorted (`scopes_of`)."""
    return scopes_of(access_of(route, None))


def scopes_of(access: Access | None) -> tuple[str, ...]:
    """Every scope a route's access facts name, sorted: `Security(..., scopes=[...])` anywhere
    in its dependencies, and the `required_scopes` of a `JWTBearer` among them. A step-up names
    them all, so one new authorization serves the whole route."""
    if access is None:
        return ()
    declared = set(access.scopes)
    for guard in access.guards:
        if isinstance(guard.scheme, JWTBearer):
            declared |= guard.scheme.required_scopes
    return scope_tokens(declared)


def refused_scopes(tool: Tool, response: CapturedResponse) -> tuple[str, ...] | None:
    """The scopes to challenge for when the route refused the caller's token for a missing
    scope (403, `error="insufficient_scope"`); `None` otherwise, or when the route declares no
    scope to name."""
    if response.status != 403 or not tool.scopes:
        return None
    return tool.scopes if refuses_for_scope(response.header(_WWW_AUTHENTICATE)) else None


def with_scopes(definition: dict[str, Any], scopes: tuple[str, ...]) -> None:
    """A list entry names the scopes its route asks for in its `_meta`, where it asks any."""
    if scopes:
        meta: Mapping[str, Any] = definition.get("_meta", {})
        definition["_meta"] = {**meta, SCOPES_META_KEY: list(scopes)}
