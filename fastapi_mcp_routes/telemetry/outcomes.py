"""How a request ended, as `error.type` names it, and the counters a failure adds to.

A JSON-RPC error is its code (the conventions' rule); a tool call's `isError` result is
`tool_error`; a client's cancellation is `cancelled`; anything else is the exception's class.
A refusal at a bound names its option in its message, `(Limits.max_x)` or `(the share of
Limits.max_x anonymous callers may hold)`: that name is the refusal counter's `bound`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from fastapi_mcp_routes.telemetry import names as n
from fastapi_mcp_routes.wire.errors import CallCancelled, McpError, StoreUnavailable

if TYPE_CHECKING:
    from fastapi_mcp_routes.telemetry.observation import Observation

_BOUND: Final = re.compile(r"\((?:the share of )?((?:Limits|Tasks|Sessions|Streaming)\.[a-z_]+)")
_CANCELLED: Final = "cancelled"


def tool_error() -> tuple[str, str | None]:
    return n.TOOL_ERROR, None


def failure(exc: BaseException, observation: Observation) -> tuple[str, str | None]:
    """The `error.type` and status description of a request that raised `exc`, counted where
    a team would alert on it."""
    if isinstance(exc, McpError):
        method = observation.metric[n.MCP_METHOD_NAME]
        if isinstance(exc, StoreUnavailable):
            observation.count("store_errors", {n.MCP_METHOD_NAME: method})
        else:
            refused = bound(exc.message)
            if refused is not None:
                observation.count("refusals", {n.MCP_METHOD_NAME: method, n.BOUND: refused})
        return str(exc.code), exc.message
    if isinstance(exc, CallCancelled):
        return _CANCELLED, None
    return type(exc).__qualname__, None


def bound(message: str) -> str | None:
    """The option a refusal's message names, e.g. `Limits.max_sessions`."""
    found = _BOUND.search(message)
    return found.group(1) if found is not None else None
