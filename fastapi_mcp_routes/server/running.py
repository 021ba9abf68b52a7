"""A route's call while it runs: registered where a cancellation can name it, run in its cancel
scope, and how it stopped.

A `tools/call`, a resource read, a prompt and a completion all run their route as a `ToolCall`
(server/call.py). Each answers in its own way (a tool call with an `isError` result, the others
with a JSON-RPC error), but what stopped the call is found out here, once, for all of them: a
protocol error it met is raised, a question for a later round is handed back, and a cancelled
call raises `CallCancelled`.

Registering and running are two steps because a tool call that becomes a task runs on after
its request ended, when a cancellation of that request must no longer reach it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeAlias, TypeVar

from fastapi_mcp_routes.server.call import InputRequired, ToolCall
from fastapi_mcp_routes.server.channel import ClientChannel
from fastapi_mcp_routes.wire.errors import CallCancelled, InvalidRequest, McpError
from fastapi_mcp_routes.wire.jsonrpc import truncate

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Finished(Generic[_T]):
    """The work returned, and nothing stopped the call."""

    value: _T


@dataclass(frozen=True, slots=True)
class Raised:
    """The work raised: arguments that cannot make a request, a `ToolContextError`, a crash."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Halted:
    """The call was stopped from outside its route: its response outgrew the cap."""

    error: Exception


# How a call ended, when it raised nothing.
Ended: TypeAlias = "Finished[_T] | Raised | Halted | InputRequired"


class registered:  # lower case, as contextlib.closing: it reads `with registered(channel, call):`
    """The call is one `notifications/cancelled` (or a closed stream) can stop while inside;
    `InvalidRequest` on entry when a request with its id is running already."""

    # A class rather than a generator-based context manager: it is entered on every call.
    __slots__ = ("_call", "_channel")

    def __init__(self, channel: ClientChannel, call: ToolCall) -> None:
        self._channel = channel
        self._call = call

    def __enter__(self) -> None:
        call = self._call
        running = self._channel.running()
        if call.request_id in running:
            # Ids of requests in flight must be unique, or a cancellation could not name one.
            raise InvalidRequest(f"Invalid Request: a request with id {truncate(call.request_id)!r} is still running.")
        running[call.request_id] = call.cancel_scope

    def __exit__(self, *exc_info: object) -> None:
        self._channel.call_ended(self._call.request_id)


async def run_call(call: ToolCall, work: Callable[[], Awaitable[_T]]) -> Ended[_T]:
    """Run `work` in the call's cancel scope and say how it ended. An `McpError` it raised or
    the call met (a missing client capability) is raised; so is `CallCancelled` when the call
    was cancelled."""
    try:
        with call.cancel_scope:
            value = await work()
    except McpError:
        raise
    except Exception as exc:
        return Raised(exc)
    stopped = call.stopped
    if isinstance(stopped, McpError):
        raise stopped
    if isinstance(stopped, InputRequired):
        return stopped
    if isinstance(stopped, Exception):
        return Halted(stopped)
    if call.cancel_scope.cancelled_caught:
        raise CallCancelled(call.request_id)
    return Finished(value)
