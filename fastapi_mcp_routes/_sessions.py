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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fastapi_mcp_routes import _constants as c


@dataclass(slots=True)
class Session:
    id: str
    binding: bytes
    protocol_version: str
    last_seen: float


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

    def open(self, binding: bytes, protocol_version: str) -> Session:
        """Start a session for this caller, evicting expired and, at the cap, the oldest idle."""
        now = self._clock()
        self._evict_expired(now)
        while len(self._sessions) >= self._max:
            self._sessions.popitem(last=False)
        session = Session(secrets.token_urlsafe(c.SESSION_ID_BYTES), binding, protocol_version, now)
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
            return None
        session.last_seen = now
        self._sessions.move_to_end(session_id)
        return session

    def close(self, session_id: str, binding: bytes) -> bool:
        """End the caller's session; `False` when there was none to end."""
        if self.find(session_id, binding) is None:
            return False
        del self._sessions[session_id]
        return True

    def _evict_expired(self, now: float) -> None:
        while self._sessions:
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen <= self._idle:
                return
            self._sessions.popitem(last=False)
