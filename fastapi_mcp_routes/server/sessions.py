"""Session-era sessions: ids, binding to the caller that opened them, idle expiry, a cap.

A session is bound to a keyed hash of the credentials that opened it. The same id presented
with other credentials is answered exactly like an unknown id, so a leaked id is useless to
anyone else and probing ids tells nothing.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from fastapi_mcp_routes.store.replay import StreamLogs
from fastapi_mcp_routes.wire import constants as c


@dataclass(slots=True)
class Session:
    """One client's session: identity and binding, plus what the protocol remembers for it."""

    id: str
    binding: bytes
    protocol_version: str
    last_seen: float
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] | None = None
    log_level: str | None = None  # set by logging/setLevel; None sends every level
    # Calls in flight, by request id, so notifications/cancelled can stop them.
    running: dict[RequestKey, anyio.CancelScope] = field(default_factory=dict)
    # Server-to-client requests waiting for the client's reply, by our request id.
    pending: dict[RequestKey, PendingReply] = field(default_factory=dict)
    next_request_id: int = 0
    listening: bool = False  # a GET stream is open (at most one per session)
    stream_logs: StreamLogs | None = None  # resumable POST streams (2025-11-25), made on first use
    closed: bool = False  # ended or expired: its GET stream stops, its calls are cancelled

    def retire(self) -> None:
        """End what the session still runs: no task outlives its session."""
        self.closed = True
        for scope in self.running.values():
            scope.cancel()


RequestKey = str | int


class PendingReply:
    """A server-to-client request waiting for the reply that a later POST carries."""

    __slots__ = ("_event", "payload")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self.payload: Mapping[str, Any] = {}

    def resolve(self, payload: Mapping[str, Any]) -> None:
        self.payload = payload
        self._event.set()

    async def wait(self) -> Mapping[str, Any]:
        await self._event.wait()
        return self.payload


class SessionStore:
    """Live sessions, least recently used first, so the oldest idle one goes first."""

    def __init__(
        self,
        *,
        idle_seconds: float = c.DEFAULT_SESSION_IDLE_S,
        max_sessions: int = c.DEFAULT_MAX_SESSIONS,
        key: bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle_seconds <= 0:
            raise ValueError(f"session idle expiry must be a positive number of seconds, got {idle_seconds!r}")
        if max_sessions < 1:
            raise ValueError(f"the session cap must be at least 1, got {max_sessions!r}")
        self._idle = idle_seconds
        self._max = max_sessions
        self._key = key or secrets.token_bytes(32)
        self._clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def binding(self, credentials: Iterable[bytes]) -> bytes:
        """A keyed hash of the caller's credentials; never stored in the clear."""
        return hmac.digest(self._key, b"\x00".join(credentials), "sha256")

    def open(
        self,
        binding: bytes,
        protocol_version: str,
        client_info: dict[str, Any] | None = None,
        client_capabilities: dict[str, Any] | None = None,
    ) -> Session:
        """Start a session for this caller, evicting expired and, at the cap, the oldest idle."""
        now = self._clock()
        self._evict_expired(now)
        while len(self._sessions) >= self._max:
            self._sessions.popitem(last=False)[1].retire()
        session_id = secrets.token_urlsafe(c.SESSION_ID_BYTES)
        session = Session(session_id, binding, protocol_version, now, client_info, client_capabilities)
        self._sessions[session.id] = session
        return session

    def find(self, session_id: str, binding: bytes) -> Session | None:
        """The caller's live session with this id; unknown, expired and foreign are all `None`."""
        session = self._sessions.get(session_id)
        if session is None or not hmac.compare_digest(session.binding, binding):
            return None
        now = self._clock()
        if now - session.last_seen > self._idle:
            del self._sessions[session_id]
            session.retire()
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: str, binding: bytes) -> bool:
        """End the caller's session; `False` when there was none to end."""
        session = self.find(session_id, binding)
        if session is None:
            return False
        del self._sessions[session_id]
        session.retire()
        return True

    def _evict_expired(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen <= self._idle:
                return
            self._sessions.popitem(last=False)[1].retire()
