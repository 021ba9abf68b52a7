"""Typed errors: the library's exception hierarchy.

McpError                  a JSON-RPC error object: `code`, `message`, optional `data`
├── ParseError            -32700, body is not JSON
├── InvalidRequest        -32600, not a JSON-RPC message, or refused by the transport
├── MethodNotFound        -32601
├── InvalidParams         -32602, params of the wrong shape, unknown tool, bad cursor
├── ResourceNotFound      an unknown resource: -32002 in the session era, -32602 in 2026-07-28
│   ├── ParamsNotObject   (in wire/jsonrpc) answered with the request's own id
│   └── InvalidRequestState  (in server/request_state) a requestState not ours or not fresh
├── ServerBusy            -32029, a call past a bound on running calls: answered 429
│                         (per session or caller) or 503 (in all) where nothing was sent
├── InsufficientScope     -32030, a route refused the token for a missing scope: answered
│                         403 with the step-up challenge where nothing was sent
├── RequestCancelled      -32800, the client cancelled the request, and the POST must
│                         still be answered (a client that reads no SSE)
├── HeaderMismatch        -32020, routing headers disagree with the body (2026-07-28)
├── MissingClientCapability     -32021, an undeclared client capability is needed
└── UnsupportedProtocolVersion  -32022, a version this server does not serve
HttpError                 the transport refuses a request with a status and an McpError
CallCancelled             the client cancelled a request: no response is sent, unless
                          the POST must carry one (then `RequestCancelled`)
ToolError                 a call the route cannot take or complete (bad arguments, a
                          response over the cap): an `isError` result, not a protocol
                          error, so the model can correct itself
└── UrlNotAllowed         a URL argument outside the allowed server URLs: refused before
                          the confirmation gate and the route
ToolContextError          (public) a `ToolContext` request the call cannot make: raised to
                          the route; uncaught, an `isError` result naming the reason

Which error becomes which answer is decided in one module, `wire/failures.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi_mcp_routes.wire import constants as c


class McpError(Exception):
    """A JSON-RPC error object carried as an exception."""

    code: int = c.INTERNAL_ERROR

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(McpError):
    code = c.PARSE_ERROR


class InvalidRequest(McpError):
    code = c.INVALID_REQUEST


class MethodNotFound(McpError):
    code = c.METHOD_NOT_FOUND


class InvalidParams(McpError):
    code = c.INVALID_PARAMS


class ResourceNotFound(McpError):
    """An unknown resource, with its URI in `data` (SEP-2164); the code is the era's."""

    def __init__(self, uri: str, code: int) -> None:
        super().__init__("Resource not found", {"uri": uri})
        self.code = code


class RequestCancelled(McpError):
    """-32800: the request was cancelled; sent only where an answer cannot be left out."""

    code = c.REQUEST_CANCELLED


class ServerBusy(McpError):
    """A call refused before it runs: the server runs as many calls as it may for this session,
    this caller (`status` 429) or in all (503); the message names the bound."""

    code = c.SERVER_BUSY

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class InsufficientScope(McpError):
    """A route refused the caller's token for a scope it lacks. Answered HTTP 403 with the
    step-up challenge naming `scopes` (wire/challenge.py) where nothing of the answer went out
    yet; else, for a tool call, its `isError` `result` carries the challenge instead."""

    code = c.INSUFFICIENT_SCOPE

    def __init__(self, scopes: tuple[str, ...], result: Mapping[str, Any] | None = None) -> None:
        super().__init__(
            f"Forbidden: the access token lacks a scope this request needs; authorize again with "
            f"the scopes {' '.join(scopes)!r}.",
            {"status": 403, "scopes": list(scopes)},
        )
        self.scopes = scopes
        self.result = result


class StoreUnavailable(McpError):
    """The store every process shares cannot be reached now (a Redis outage): the request may
    be sent again shortly. Raised by a shared store, answered 503 where nothing was sent yet."""

    def __init__(self, reason: str) -> None:
        super().__init__("Service Unavailable: the server's shared store cannot be reached now; try again shortly.")
        self.reason = reason


class NeedsSharedStore(InvalidRequest):
    """A message this process cannot take alone (a cancellation of a call another process may
    run) where processes share no store; the message names the option."""


class HttpError(Exception):
    """The transport refuses a request: an HTTP status, and the JSON-RPC error for the body."""

    def __init__(
        self,
        status: int,
        error: McpError,
        headers: dict[str, str] | None = None,
        request_id: str | int | None = None,
    ) -> None:
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.headers = headers or {}
        self.request_id = request_id  # echoed when the refused request's id could be read


class ToolError(Exception):
    """A tool call that cannot be made or completed; reported as an `isError` result."""


class UrlNotAllowed(ToolError):
    """A URL argument the server may not reach (server-side request forgery); the message
    names the argument, the value and the option that allows it."""


class CallCancelled(Exception):
    """The client cancelled the request (`notifications/cancelled`): nothing is answered."""

    def __init__(self, request_id: str | int) -> None:
        super().__init__(f"request {request_id!r} was cancelled")
        self.request_id = request_id


class HeaderMismatch(McpError):
    """-32020: a routing header is missing or disagrees with the body (2026-07-28)."""

    code = -32020


class MissingClientCapability(McpError):
    """-32021: the request needs a client capability it did not declare (2026-07-28)."""

    code = -32021


class UnsupportedProtocolVersion(McpError):
    """-32022: the request names a protocol version this server does not serve (2026-07-28)."""

    code = -32022


class ToolContextError(RuntimeError):
    """A `ToolContext` request the current call cannot make (no tool call, no capability...)."""
