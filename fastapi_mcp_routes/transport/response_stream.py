"""The answer to one POST: `application/json`, unless a message must go out first, then SSE.

The content type is decided lazily (plain calls keep the fast path). A call that sends nothing
before its result is answered with one JSON body. The first progress, log or server-to-client
message switches the response to `text/event-stream`: the headers go out, then each message as
an event, then the result, then the end of the stream. A lock keeps events whole when a route
sends from several tasks.

Keep-alive: for a client that reads SSE, a pending answer is watched by the endpoint's
`KeepAlive`. When it has been quiet for `KEEP_ALIVE_S`, the response becomes a stream (if it was
not one yet) and a comment line goes out, so proxies do not close a long call's quiet
connection. One timer per event loop serves every pending answer, ticking only while some
answer is pending: a timer or a task group per request would cost every call microseconds
(a timer that is armed and cancelled also stays in the loop's heap until it is due). An answer
is unwatched when it goes out, so nothing outlives the request.

Early close: with `max_open_s`, a resumable stream (2025-11-25) is ended after that long, as
the spec allows; the call runs on, its events go to the stream's log, and the client fetches
them with GET and `Last-Event-ID` after the `retry:` delay of the priming event.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Mapping
from typing import Any, Final

import anyio
from fastapi.sse import format_sse_event
from starlette.types import Send

from fastapi_mcp_routes.store.replay import StreamLog, StreamLogs, message_event, priming_event
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.json import dumps

logger = logging.getLogger("fastapi_mcp_routes")

SSE_HEADERS: Final = [
    (b"content-type", c.MEDIA_SSE.encode()),
    (b"cache-control", b"no-cache"),
    # Reverse proxies (nginx) would otherwise hold events back until the stream ends.
    (b"x-accel-buffering", b"no"),
]
_JSON_HEADERS: Final = [(b"content-type", c.MEDIA_JSON.encode())]
# Well under the idle timeouts of common proxies (nginx: 60 s). Not Final: tests shorten it.
KEEP_ALIVE_S = 15.0
KEEP_ALIVE_COMMENT: Final = format_sse_event(comment="keep-alive")


class KeepAlive:
    """Pending SSE answers, and one ticking timer per event loop that keeps them alive.

    A loop's ticks stop at the first tick that finds nothing pending there. The next tick of
    each loop is known by its time alone, held weakly: nothing here keeps a closed loop alive.
    """

    def __init__(self) -> None:
        self._due: dict[ResponseStream, tuple[asyncio.AbstractEventLoop, float]] = {}
        self._next_tick: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, float] = weakref.WeakKeyDictionary()

    def watch(self, stream: ResponseStream) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._due[stream] = (loop, now + KEEP_ALIVE_S)
        tick_at = now + _tick_s()
        planned = self._next_tick.get(loop)
        if planned is None or planned > tick_at:  # no tick yet, or one too late for this stream
            self._schedule(loop, tick_at)

    def unwatch(self, stream: ResponseStream) -> None:
        self._due.pop(stream, None)

    def _schedule(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        self._next_tick[loop] = at
        loop.call_at(at, self._tick, at)

    def _tick(self, at: float) -> None:
        loop = asyncio.get_running_loop()
        if self._next_tick.get(loop) != at:
            return  # an earlier tick took this one's place
        now = loop.time()
        pending = False
        for stream, (owner, due) in list(self._due.items()):
            if owner is not loop:
                continue
            if due <= now:
                self.unwatch(stream)  # the stream watches itself again once the comment is out
                stream.keep_alive_due()
            else:
                pending = True
        if pending:
            self._schedule(loop, now + _tick_s())
        else:
            del self._next_tick[loop]


def _tick_s() -> float:
    # A comment goes out between KEEP_ALIVE_S and a quarter more; read at each tick, since
    # tests shorten KEEP_ALIVE_S.
    return KEEP_ALIVE_S / 4


class ResponseStream:
    """Writes one POST's answer to the ASGI `send`, as JSON or, once needed, as SSE."""

    def __init__(
        self,
        send: Send,
        sse_allowed: bool,
        json_allowed: bool,
        keep_alive: KeepAlive,
        logs: StreamLogs | None = None,
        max_open_s: float | None = None,
    ) -> None:
        self._send = send
        self._keep_alive_watch = keep_alive
        self._max_open_s = max_open_s
        self._sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        self._logs = logs  # the session's resumable streams, when its revision has them
        self._log: StreamLog | None = None
        # Only streamed writes can race (a route may log from several tasks), so the lock is
        # made on first use: a plain JSON answer never needs one.
        self._made_lock: anyio.Lock | None = None
        self._streaming = False
        self._finished = False
        self._pinging: asyncio.Task[None] | None = None
        self._closer: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None
        self._detached = False  # ended early: events go to the log only
        if sse_allowed:
            keep_alive.watch(self)

    async def emit(self, message: Mapping[str, Any]) -> None:
        """Send a message before the answer: the response becomes an SSE stream."""
        if self._finished:
            return  # the answer is out (a background task logs): nothing more on this stream
        async with self._lock():
            await self._start_streaming()
            await self._write(self._event(dumps(message)), more=True)

    def abandon(self) -> None:
        """The request was cancelled: nothing more goes out, not even a keep-alive."""
        self._finished = True
        self._disarm()

    async def finish(self, body: bytes | None, *, answered_request: bool, status: int = 200) -> None:
        """Send the answer (a JSON-RPC response or batch). Without one, a POST of notifications
        gets 202; a POST whose request was cancelled gets an empty stream (it must not be 202)."""
        self._finished = True  # from here on, emit() drops messages instead of starting a stream
        self._disarm()
        # An error with its own HTTP status (stateless revision) goes out as JSON unless a
        # stream has started: the status is part of the answer.
        must_stream = (body is not None and not self._json_allowed and status == 200) or (
            body is None and answered_request and self._sse_allowed
        )
        if self._streaming or must_stream:
            async with self._lock():
                await self._start_streaming()
                await self._write(self._event(body) if body else b"", more=False)
                if self._log is not None:
                    self._log.complete = True
        elif body is None:
            await self._write_start(202, [(b"content-length", b"0")])
            await self._write(b"", more=False)
        else:
            # The fast path: nothing was streamed, so no lock is needed and none is taken.
            await self._write_start(status, [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())])
            await self._write(body, more=False)

    async def _start_streaming(self) -> None:
        if self._streaming:
            return
        self._streaming = True
        await self._write_start(200, SSE_HEADERS)
        if self._logs is not None:
            self._log = self._logs.start()
            await self._write(priming_event(self._log.number), more=True)
            if self._max_open_s is not None:
                self._closer = asyncio.get_running_loop().call_later(self._max_open_s, self._close_due)

    def _lock(self) -> anyio.Lock:
        if self._made_lock is None:
            # fast_acquire: an uncontended acquire must not cost an event-loop round trip.
            self._made_lock = anyio.Lock(fast_acquire=True)
        return self._made_lock

    def _disarm(self) -> None:
        self._keep_alive_watch.unwatch(self)
        for handle in (self._pinging, self._closer, self._closing):
            if handle is not None:
                handle.cancel()

    def _close_due(self) -> None:
        self._closing = asyncio.ensure_future(self._close_early())

    async def _close_early(self) -> None:
        async with self._lock():
            if not self._finished:
                await self._write(b"", more=False)
                self._detached = True

    def keep_alive_due(self) -> None:
        """The answer has been quiet for `KEEP_ALIVE_S`: send a comment (called by `KeepAlive`)."""
        self._pinging = asyncio.ensure_future(self._keep_alive())

    async def _keep_alive(self) -> None:
        async with self._lock():
            if self._finished or self._detached:
                return
            await self._start_streaming()
            await self._write(KEEP_ALIVE_COMMENT, more=True)
        self._keep_alive_watch.watch(self)

    def _event(self, data: bytes) -> bytes:
        """Frame a message; on a resumable stream give it an id and keep it for a resume."""
        return self._log.record(data) if self._log is not None else sse_event(data)

    async def _write_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def _write(self, data: bytes, *, more: bool) -> None:
        if self._detached:
            return  # the response has ended; the log holds this event for the resume
        try:
            await self._send({"type": "http.response.body", "body": data, "more_body": more})
        except OSError:
            # A dropped connection is not a cancellation in the session era (spec 2025-11-25,
            # basic/transports "Cancellation"): the call runs on; its events stay in the log.
            logger.info("the client closed a response stream before its answer")


def sse_event(data: bytes, event_id: bytes | None = None) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    return message_event(data, event_id.decode() if event_id else None)
