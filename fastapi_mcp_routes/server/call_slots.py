"""Bounds on the route calls running at once in this process: per session, per caller, in all.

Every route call an MCP request runs (`tools/call`, `resources/read`, `prompts/get`,
`completion/complete`, and a task's route until it ends) takes a slot here before it runs and
gives it back when it ends. In the session era a call runs on when its client hangs up (a
client may resume the stream, and cancels explicitly), so without these bounds a caller could
leave thousands of calls running by sending them and closing each connection.

Counting is per process, in dicts of integers, with no lock and no store round trip: a running
call's memory and CPU are its process's, so its process is where the bound protects, and a call
pays only a few dictionary lookups. Of the total, callers trusted less hold only their share,
and callers with credentials all but a floor kept for anonymous callers (`Tally`, as sessions,
streams and tasks count). Past a bound the call is refused with `ServerBusy` naming it.
"""

from __future__ import annotations

from typing import Final, TypeVar

from fastapi_mcp_routes.options import DEFAULT_MAX_CALLS, DEFAULT_MAX_CALLS_PER_CALLER, DEFAULT_MAX_CALLS_PER_SESSION
from fastapi_mcp_routes.store.base import Holder
from fastapi_mcp_routes.store.policy import Bound, Tally, bound_holders
from fastapi_mcp_routes.wire.errors import ServerBusy

_AGAIN: Final = "send this one again once one of them has answered."
_Key = TypeVar("_Key", str, bytes)


class CallSlots:
    """The running calls of this process, counted per session, per caller and per trust."""

    __slots__ = ("_callers", "_per_caller", "_per_session", "_sessions", "_tally")

    def __init__(
        self,
        *,
        per_session: int = DEFAULT_MAX_CALLS_PER_SESSION,
        per_caller: int = DEFAULT_MAX_CALLS_PER_CALLER,
        total: int = DEFAULT_MAX_CALLS,
    ) -> None:
        self._per_session = per_session
        self._per_caller = per_caller
        self._sessions: dict[str, int] = {}
        self._callers: dict[bytes, int] = {}
        self._tally = Tally(total)

    def take(self, session_id: str | None, holder: Holder) -> None:
        """Count one more running call of `holder` (in `session_id`), or raise `ServerBusy`."""
        sessions, callers = self._sessions, self._callers
        in_session = sessions.get(session_id, 0) if session_id is not None else 0
        if in_session >= self._per_session:
            raise ServerBusy(_busy(f"this session runs {in_session}", "Limits.max_calls_per_session"), 429)
        owner = holder.owner
        of_caller = callers.get(owner, 0)
        if of_caller >= self._per_caller:
            raise ServerBusy(_busy(f"this caller runs {of_caller}", "Limits.max_calls_per_caller"), 429)
        over = self._tally.over(holder.trust, 1)
        if over is not None:
            raise ServerBusy(_full(over), 503)
        if session_id is not None:
            sessions[session_id] = in_session + 1
        callers[owner] = of_caller + 1
        self._tally.add(holder.trust, 1)

    def give_back(self, session_id: str | None, holder: Holder) -> None:
        """One running call of `holder` (in `session_id`) ended."""
        if session_id is not None:
            _decrement(self._sessions, session_id)
        _decrement(self._callers, holder.owner)
        self._tally.add(holder.trust, -1)

    def running(self, session_id: str | None = None, holder: Holder | None = None) -> int:
        """Calls running in a session, of a holder, or (with neither) in all."""
        if session_id is not None:
            return self._sessions.get(session_id, 0)
        if holder is not None:
            return self._callers.get(holder.owner, 0)
        return self._tally.held


def _decrement(counts: dict[_Key, int], key: _Key) -> None:
    # Keys of idle sessions and callers go, so the dicts hold only who runs something.
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)


def _busy(runs: str, bound: str) -> str:
    return f"Server busy: {runs} calls already ({bound}); {_AGAIN}"


def _full(bound: Bound) -> str:
    holders, limit = bound_holders(bound), bound[2]
    if holders is None:
        return f"Server busy: the server runs {limit} calls already (Limits.max_calls); {_AGAIN}"
    share = f"the share of Limits.max_calls {holders} may hold"
    return f"Server busy: {holders} run {limit} calls already ({share}); {_AGAIN}"
