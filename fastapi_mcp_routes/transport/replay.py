"""Resumable SSE streams (spec 2025-11-25, basic/transports "Resumability and Redelivery").

Every event of a POST stream in a 2025-11-25 session carries an id `<stream>.<seq>`, unique in
the session and naming its stream. A stream's events are kept in the `Store`, whether or not
the client seemed to receive them (a server often cannot tell a dropped connection from a slow
one), so a client whose connection dropped can send GET with `Last-Event-ID` and receive what
followed that event on that stream, and only that stream, up to the answer. A stream is
forgotten once a resume has delivered it whole, when newer streams push it out, or with its
session; a stream that starts after its session ended (a call the end cancelled, answered) is
sent without a log.

While a stream is being sent, its sender holds a lease on it in the `Store` (`Senders`), renewed
every keep-alive interval and lapsing after `LEASE_RENEWALS` missed ones: a resume that finds its
stream unfinished and its lease free (the sending process died, or the call ended without an
answer) delivers what was kept and ends, so the client knows to call again.

A resume waits for the stream's next event without polling: each event kept, and the stream's
completion, is announced on the stream's own topic of the Store (`wakes`), so the resume
reads again only then, in whichever process it runs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import secrets
import time
from contextlib import AbstractAsyncContextManager
from typing import Final

import anyio

from fastapi_mcp_routes.options import Limits
from fastapi_mcp_routes.store.base import ClaimStore, Inbox, LogBounds, Store, StreamEvents, Trust
from fastapi_mcp_routes.transport.sse import priming_event, sse_event
from fastapi_mcp_routes.wire.errors import StoreUnavailable

logger = logging.getLogger("fastapi_mcp_routes")

_EVENT_ID: Final = re.compile(r"([0-9]{1,9})\.([0-9]{1,9})")
# A sender's lease on its stream lapses after this many missed renewals (a stalled loop renews late).
LEASE_RENEWALS: Final = 3


class Senders:
    """The resumable streams this process is sending, each holding a lease in the store."""

    def __init__(self, store: ClaimStore, interval_s: float) -> None:
        self._store = store
        self.interval_s = interval_s
        self._holder = "sender/" + secrets.token_urlsafe(12)  # this process
        self._sending: dict[str, float] = {}  # lease name -> when it was last renewed (monotonic)

    async def hold(self, session_id: str, stream: int) -> None:
        """Take or renew the lease on a stream this process sends (each event renews it once an
        interval has passed; `renew_forever` renews those that stay quiet)."""
        name = _lease_name(session_id, stream)
        now = time.monotonic()
        if now - self._sending.get(name, -math.inf) >= self.interval_s:
            self._sending[name] = now
            await self._store.claim(name, self._holder, LEASE_RENEWALS * self.interval_s)

    async def drop(self, session_id: str, stream: int) -> None:
        name = _lease_name(session_id, stream)
        if self._sending.pop(name, None) is not None:
            await self._store.release(name, self._holder)

    async def renew_forever(self) -> None:
        """Renew the leases of the streams this process sends (for the app's lifetime)."""
        while True:
            await anyio.sleep(self.interval_s)
            for name in list(self._sending):
                self._sending[name] = time.monotonic()
                with contextlib.suppress(StoreUnavailable):  # an outage: renewed at the next turn
                    await self._store.claim(name, self._holder, LEASE_RENEWALS * self.interval_s)

    async def gone(self, session_id: str, stream: int) -> bool:
        """Whether nobody sends this stream any more: its lease is free (a probe takes it, and
        gives it back at once)."""
        name, probe = _lease_name(session_id, stream), "probe/" + secrets.token_urlsafe(9)
        if not await self._store.claim(name, probe, 0.001):
            return False
        await self._store.release(name, probe)
        return True


def _lease_name(session_id: str, stream: int) -> str:
    return f"sending/{session_id}/{stream}"


class StreamLog:
    """One resumable stream of a session, as it is being sent."""

    __slots__ = ("_bounds", "_lost", "_senders", "_sent", "_session_id", "_store", "number")

    def __init__(self, store: Store, session_id: str, number: int, bounds: LogBounds, senders: Senders) -> None:
        self._store = store
        self._senders = senders
        self._session_id = session_id
        self._bounds = bounds
        self.number = number
        self._sent = 0
        self._lost = False  # the store could not keep an event: the stream is no longer kept

    @property
    def priming_event(self) -> bytes:
        return priming_event(self.number)

    async def record(self, data: bytes) -> bytes:
        """Frame a message as this stream's next event, and keep it for a resume. A store that
        cannot keep it (an outage) costs the resume, never the event: the client reading the
        stream still gets it, and the rest of the stream is no longer kept."""
        self._sent += 1
        framed = sse_event(data, f"{self.number}.{self._sent}")
        if not self._lost:
            try:
                await self._senders.hold(self._session_id, self.number)
                await self._store.append_event(self._session_id, self.number, framed, self._bounds)
                await self._store.publish(_wake_topic(self._session_id, self.number), b"")
            except StoreUnavailable as down:
                self._lose(down)
        return framed

    async def complete(self) -> None:
        if self._lost:
            return
        try:
            await self._store.complete_stream(self._session_id, self.number)
            await self._store.publish(_wake_topic(self._session_id, self.number), b"")
        except StoreUnavailable as down:
            self._lose(down)

    async def release(self) -> None:
        """The stream is over, answered or not: its lease goes (a resume then ends)."""
        with contextlib.suppress(StoreUnavailable):  # lapses on its own
            await self._senders.drop(self._session_id, self.number)

    def _lose(self, down: StoreUnavailable) -> None:
        self._lost = True
        logger.warning("stream %s is sent on without being kept for a resume: %s", self.number, down.reason)


class StreamLogs:
    """A session's resumable streams."""

    __slots__ = ("_limits", "_senders", "_store", "_trust", "session_id")

    def __init__(
        self, store: Store, session_id: str, limits: Limits, senders: Senders, trust: Trust = Trust.ANONYMOUS
    ) -> None:
        self._store = store
        self._senders = senders
        self._limits = limits
        self._trust = trust  # the session's: what its streams may push out of others' at the total
        self.session_id = session_id

    async def start(self) -> StreamLog | None:
        """The log of a new stream; `None` once the session is gone (nothing could resume it)."""
        limits = self._limits
        try:
            number = await self._store.start_stream(self.session_id, limits.max_kept_streams, self._trust)
        except StoreUnavailable as down:  # sent all the same, without a log
            logger.warning("a stream is sent without being kept for a resume: %s", down.reason)
            return None
        if number is None:
            return None
        bounds = LogBounds(limits.max_events_per_stream, limits.max_replay_bytes_per_session, limits.max_replay_bytes)
        try:
            await self._senders.hold(self.session_id, number)
        except StoreUnavailable as down:
            logger.warning("a stream is sent without being kept for a resume: %s", down.reason)
            return None
        return StreamLog(self._store, self.session_id, number, bounds, self._senders)

    async def find(self, last_event_id: str) -> tuple[int, int] | None:
        """The stream an event id names and how many of its events the client has seen,
        when that stream can be resumed."""
        match = _EVENT_ID.fullmatch(last_event_id.strip())
        if match is None:
            return None
        stream, seen = int(match[1]), int(match[2])
        return (stream, seen) if await self.read(stream, seen) is not None else None

    def wakes(self, stream: int) -> AbstractAsyncContextManager[Inbox]:
        """A message each time the stream keeps an event or completes (open it before reading,
        so no event slips between the read and the wait). A message lost to a full inbox is
        no loss: one waiting message is enough to read everything kept since."""
        return self._store.subscribe(_wake_topic(self.session_id, stream))

    async def read(self, stream: int, seen: int) -> StreamEvents | None:
        return await self._store.read_stream(self.session_id, stream, seen)

    async def sender_gone(self, stream: int) -> bool:
        return await self._senders.gone(self.session_id, stream)

    async def forget(self, stream: int) -> None:
        await self._store.forget_stream(self.session_id, stream)


def _wake_topic(session_id: str, stream: int) -> str:
    return f"stream/{session_id}/{stream}"
