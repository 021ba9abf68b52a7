"""The answer to one POST: `application/json`, unless a message must go out first, then SSE.

The content type is decided lazily (issue: plain calls keep the fast path). A call that sends
nothing before its result is answered with one JSON body. The first progress, log or
server-to-client message switches the response to `text/event-stream`: the headers go out,
then each message as an event, then the result, then the end of the stream. A lock keeps
events whole when a route sends from several tasks.

While a stream is open, a comment line goes out every `KEEP_ALIVE_S` so proxies do not close a
long call's quiet connection. It is a timer armed only once a stream exists and disarmed when
the answer goes out, so a plain JSON answer pays nothing for it (a task group per request
would cost every call several microseconds).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Final

import anyio
from starlette.types import Send

from fastapi_mcp_routes import _constants as c
from fastapi_mcp_routes._json import dumps
from fastapi_mcp_routes._replay import StreamLog, StreamLogs, event_id, priming_event

logger = logging.getLogger("fastapi_mcp_routes")

SSE_HEADERS: Final = [
    (b"content-type", c.MEDIA_SSE.encode()),
    (b"cache-control", b"no-cache"),
    # Reverse proxies (nginx) would otherwise hold events back until the stream ends.
    (b"x-accel-buffering", b"no"),
]
_JSON_HEADERS: Final = [(b"content-type", c.MEDIA_JSON.encode())]
# Well under the idle timeouts of common proxies (nginx: 60 s).
KEEP_ALIVE_S = 15.0
_KEEP_ALIVE: Final = b": keep-alive\n\n"


class ResponseStream:
    """Writes one POST's answer to the ASGI `send`, as JSON or, once needed, as SSE."""

    def __init__(self, send: Send, sse_allowed: bool, json_allowed: bool, logs: StreamLogs | None = None) -> None:
        self._send = send
        self.sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        self._logs = logs  # the session's resumable streams, when its revision has them
        self._number = 0
        self._log: StreamLog | None = None
        # Only streamed writes can race (a route may log from several tasks); an uncontended
        # acquire must not cost an event-loop round trip on every call.
        self._lock = anyio.Lock(fast_acquire=True)
        self._finished = False
        self._timer: asyncio.TimerHandle | None = None
        self._pinging: asyncio.Task[None] | None = None
        self._streaming = False
        self._gone = False  # the client went away; the call runs on (session era), unheard

    async def emit(self, message: Mapping[str, Any]) -> None:
        """Send a message before the answer: the response becomes an SSE stream."""
        if not self.sse_allowed or self._finished:
            return  # the client reads JSON only, or the answer is out (a background task logs)
        async with self._lock:
            await self._start_streaming()
            await self._write(self._event(dumps(message)), more=True)

    async def finish(self, body: bytes | None) -> None:
        """Send the answer (a JSON-RPC response or batch), or end with 202 when there is none."""
        self._finished = True  # from here on, emit() drops messages instead of starting a stream
        self._disarm()
        if self._streaming or (body is not None and not self._json_allowed):
            async with self._lock:
                await self._start_streaming()
                await self._write(self._event(body) if body else b"", more=False)
                self._settle_log()
        elif body is None:
            await self._write_start(202, [])
            await self._write(b"", more=False)
        else:
            # The fast path: nothing was streamed, so no lock is needed and none is taken.
            await self._write_start(200, [*_JSON_HEADERS, (b"content-length", str(len(body)).encode())])
            await self._write(body, more=False)

    async def _start_streaming(self) -> None:
        if not self._streaming:
            self._streaming = True
            await self._write_start(200, SSE_HEADERS)
            if not self._finished:
                self._arm()
            if self._logs is not None:
                self._number, self._log = self._logs.start()
                await self._write(priming_event(self._number), more=True)

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(KEEP_ALIVE_S, self._keep_alive_due)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._pinging is not None:
            self._pinging.cancel()

    def _keep_alive_due(self) -> None:
        self._pinging = asyncio.ensure_future(self._keep_alive())

    async def _keep_alive(self) -> None:
        async with self._lock:
            if self._finished:
                return
            await self._write(_KEEP_ALIVE, more=True)
        self._arm()

    def _event(self, data: bytes) -> bytes:
        """Frame a message; on a resumable stream give it an id and keep it for a resume."""
        if self._log is None:
            return sse_event(data)
        framed = sse_event(data, event_id(self._number, len(self._log.events) + 1))
        self._log.record(framed)
        return framed

    def _settle_log(self) -> None:
        if self._log is None or self._logs is None:
            return
        self._log.complete = True
        if not self._gone:
            self._logs.forget(self._number)  # delivered whole: nothing to resume

    async def _write_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._guarded({"type": "http.response.start", "status": status, "headers": headers})

    async def _write(self, data: bytes, *, more: bool) -> None:
        await self._guarded({"type": "http.response.body", "body": data, "more_body": more})

    async def _guarded(self, message: dict[str, Any]) -> None:
        if self._gone:
            return
        try:
            await self._send(message)
        except OSError:
            # A dropped connection is not a cancellation in the session era (spec 2025-11-25,
            # basic/transports "Cancellation"): the call runs to its end, unheard.
            self._gone = True
            logger.info("the client closed a response stream before its answer")


def sse_event(data: bytes, event_id: bytes | None = None) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    head = b"id: " + event_id + b"\nevent: message\ndata: " if event_id else b"event: message\ndata: "
    return head + data + b"\n\n"
