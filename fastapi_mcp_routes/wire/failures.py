"""The one place where an exception becomes what the client is told: code raises typed errors,
and an unknown one becomes a generic internal error, logged, never echoed.

Two kinds of answer exist. A JSON-RPC request that fails is answered with an error object:
`McpError` carries its own code and message, a cancelled request gets no answer at all (unless
its POST must carry one: then a -32800 error), and anything else is a generic internal error
whose traceback stays in the server's log. A tool call that fails is answered with an `isError`
result instead, so the model can read what went wrong and correct its call. Every path
(session POST, stateless POST, initialize, batch entries, tool results) asks this module.

A failure inside the app (a route that raised, a 5xx, a response its feature cannot use) is
logged once under a new reference, and the answer, either kind, names only that reference
(`failure_reference`): what the app said stays in the server's log.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Literal

from fastapi_mcp_routes.wire.errors import (
    CallCancelled,
    McpError,
    RequestCancelled,
    ToolContextError,
    ToolError,
    UrlNotAllowed,
)
from fastapi_mcp_routes.wire.jsonrpc import RequestId, encode_error

logger = logging.getLogger("fastapi_mcp_routes")

ToolFailure = Literal["invalid_arguments", "refused", "error", "crashed"]


def error_answer(request_id: RequestId | None, exc: Exception, *, answer_cancelled: bool = False) -> bytes | None:
    """The encoded answer to a request that raised `exc`; `None` when nothing is answered.

    Args:
        answer_cancelled: a cancelled request is answered all the same, with an error.
    """
    if isinstance(exc, McpError):
        return encode_error(request_id, exc)
    if isinstance(exc, CallCancelled):
        # The spec wants no response to a cancelled request (basic/utilities/cancellation), but
        # a POST that carried one is answered with JSON or SSE, never 202 (basic/transports):
        # a client that reads no SSE cannot be given an empty stream, so it is told.
        return encode_error(request_id, RequestCancelled("Request cancelled.")) if answer_cancelled else None
    logger.error("internal error handling an MCP request", exc_info=exc)
    return encode_error(request_id, McpError("Internal error."))


def tool_failure(exc: Exception, tool: str) -> tuple[dict[str, Any], ToolFailure]:
    """The `isError` result for a tool call that raised `exc`, and how the audit names it."""
    if isinstance(exc, UrlNotAllowed):
        # A policy refusal, not a mistake in the call: the audit tells the two apart.
        return error_result(str(exc)), "refused"
    if isinstance(exc, ToolError):
        return error_result(str(exc)), "invalid_arguments"
    if isinstance(exc, ToolContextError):
        # Our own message (no capability, no answer in time): safe and useful to the model.
        return error_result(f"The tool could not finish: {exc}."), "error"
    return crash_result(tool, exc), "crashed"


def error_result(text: str) -> dict[str, Any]:
    """An `isError` result: the model sees the text and can correct its call."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def crash_result(tool: str, exc: BaseException | None = None) -> dict[str, Any]:
    """The result for a failure inside the app; the traceback stays in the log."""
    return failed_result("The tool failed with an internal error", "tool %s failed", tool, exc=exc)


def failure_reference(what: str, *args: object, exc: BaseException | None = None, level: int = logging.ERROR) -> str:
    """A new reference for a failure the client is told of only by it: `what % args` is logged
    with it once, at `level`, with the traceback of `exc` when there is one."""
    reference = uuid.uuid4().hex[:12]
    logger.log(level, what + " (reference %s)", *args, reference, exc_info=exc)
    return reference


def internal_error(
    said: str, what: str, *args: object, exc: BaseException | None = None, level: int = logging.ERROR
) -> McpError:
    """The JSON-RPC error for a failure inside the app: `said` and a reference, logged as
    `failure_reference` logs it."""
    reference = failure_reference(what, *args, exc=exc, level=level)
    return McpError(f"Internal error: {said}. Reference: {reference}.")


def failed_result(
    said: str, what: str, *args: object, exc: BaseException | None = None, level: int = logging.ERROR
) -> dict[str, Any]:
    """The `isError` result for a failure inside the app: `said` and a reference, logged as
    `failure_reference` logs it."""
    reference = failure_reference(what, *args, exc=exc, level=level)
    return error_result(f"{said}. Reference: {reference}.")
