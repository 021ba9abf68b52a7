"""Audit: one event per tool call, to `on_tool_call` or, by default, to the log.

An event names the principal, the tool, a digest of the arguments (never the arguments, which
may hold personal data), the outcome, the route's HTTP status and the duration, and the trace
and span ids of the call's span where one is recorded (telemetry/). Values from
the wire are truncated in the log line. A failing audit hook is logged and never changes the
call's answer.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fastapi_mcp_routes.server.sealing.request_state import arguments_sha256
from fastapi_mcp_routes.wire.jsonrpc import truncate

logger = logging.getLogger("fastapi_mcp_routes")

Outcome = Literal[
    "ok",
    "error",
    "invalid_arguments",
    "crashed",
    "refused",  # a protocol error, or a URL argument not allowed (nothing ran)
    "cancelled",
    "input_required",
    "confirmation_required",  # a gated call answered with a plan and a token; nothing ran
    "not_confirmed",  # a bad confirmation token, or the user declined; nothing ran
    "task",  # the call became a task the client polls; its end is a second event, same request id
]
_DIGEST_HEX: Final = 16


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """What happened in one tool call."""

    tool: str
    principal: Any
    arguments_digest: str
    outcome: Outcome
    status: int | None  # the route's HTTP status, when it answered
    duration_ms: float
    request_id: str | int
    trace_id: str | None = None  # W3C hex, when the call's span is recorded
    span_id: str | None = None


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """The start of the digest that request states and confirmations bind, so the three agree."""
    return arguments_sha256(arguments)[:_DIGEST_HEX]


def log_tool_call(event: ToolCallEvent) -> None:
    """The default `on_tool_call`: one INFO line on the `fastapi_mcp_routes` logger.

    The record is made and handed to the logger directly, as `logger.info` does after it walks
    the stack to name its caller (`findCaller`), which is always this function: the walk is
    spared (`benchmarks/profile_tool_call.py --audit-log` under callgrind shows the audit's
    share). The record is the same: this function's file, line and name, the message and its
    arguments."""
    if not logger.isEnabledFor(logging.INFO):
        return
    subject = getattr(event.principal, "subject", None) if event.principal is not None else None
    arguments: tuple[Any, ...] = (
        truncate(event.tool),
        event.outcome,
        event.status,
        event.duration_ms,
        truncate(subject) if subject is not None else "-",
        event.arguments_digest,
    )
    line = _LINE
    if event.trace_id is not None:
        line, arguments = _TRACED_LINE, (*arguments, event.trace_id, event.span_id)
    record = logger.makeRecord(logger.name, logging.INFO, __file__, _LINE_NO, line, arguments, None, _FUNC_NAME)
    logger.handle(record)


_LINE: Final = "tool call %s outcome=%s status=%s duration_ms=%.1f principal=%s arguments=%s"
_TRACED_LINE: Final = _LINE + " trace_id=%s span_id=%s"
_LINE_NO: Final = log_tool_call.__code__.co_firstlineno
_FUNC_NAME: Final = log_tool_call.__name__


async def report(hook: Callable[[ToolCallEvent], Any], event: ToolCallEvent) -> None:
    """Hand the event to the hook; a hook's failure is logged, never raised."""
    try:
        outcome = hook(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.exception("the on_tool_call hook failed for tool %s", truncate(event.tool))
