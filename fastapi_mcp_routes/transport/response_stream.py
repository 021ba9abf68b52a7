"""The answer to one POST: `application/json`, unless a message must go out first, then SSE.

The content type is decided lazily (plain calls keep the fast path). A call that sends nothing
before its result is answered with one JSON body. The first progress, log or server-to-client
message switches the response to `text/event-stream`: the headers go out, then each message as
an event, then the result, then the end of the stream. A lock keeps events whole when a route
sends from several tasks.

While the answer is pending, helpers watch over it, all in one task group (the sse-starlette
way: the first helper to finish cancels the rest, and the answer's end cancels them all):
- keep-alive: for a client that reads SSE, a comment line goes out every `KeepAlive.interval_s`
  (the response becomes a stream if it was not one yet), so proxies do not close a long call's
  quiet connection;
- early close: with `max_open_s`, a resumable stream (2025-11-25) is ended after that long, as
  the spec allows; the call runs on, its events go to the stream's log, and the client fetches
  them with GET and `Last-Event-ID` after the `retry:` delay of the priming event;
- the client leaving (given `receive` and a `listener`): `listener.client_left()` is called (also
  when a write finds the connection gone), unless this server ended the stream early.

Deliberate choice, the one speed trick here: the helpers start only once the answer has been
pending for a while (the keep-alive interval, or `WATCH_AFTER_S` when the client's leaving is
watched: from the start, or in the session era only once a call that samples asks), from one
timer per answer (armed at the loop's next turn), in a task of their own
that the stream stops and awaits. A quick call is answered before that and starts no task. The
plain way, a task group with its helpers started at once for every answer, made a quick tool
call cost markedly more server CPU (`make bench` shows the difference).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Protocol

import anyio
from anyio.abc import TaskGroup
from starlette.background import BackgroundTask
from starlette.responses import Response
from starlette.types import Receive, Send

from fastapi_mcp_routes.transport.replay import StreamLog, StreamLogs
from fastapi_mcp_routes.transport.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS, sse_event
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.json import dumps

logger = logging.getLogger("fastapi_mcp_routes")

Header = tuple[bytes, bytes]
# Tuples: every response gets its own list, which a middleware may change in place.
_JSON_HEADERS: Final = ((b"content-type", c.MEDIA_JSON.encode()),)
# Well under the idle timeouts of common proxies (nginx: 60 s).
KEEP_ALIVE_S: Final = 15.0
# An answer pending this long starts watching for its client leaving; one that leaves sooner is
# noticed then.
WATCH_AFTER_S: Final = 0.25


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """How long an SSE answer or stream may stay quiet before a comment line goes out."""

    interval_s: float = KEEP_ALIVE_S

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ValueError(f"the keep-alive interval must be a positive number of seconds, got {self.interval_s!r}")


# The most of an answer handed to the server in one message (`_write`).
WRITE_PIECE_BYTES: Final = 256 * 1024


class SelfWritten(Response):
    """A response that writes its own status, headers and body when called (a `ResponseStream`).
    Made without `Response.__init__`, which would render a body and headers never sent: every
    POST's answer is one (`benchmarks/profile_tool_call.py` under callgrind). The attributes a
    framework may read are set; FastAPI sets `background` (the endpoint's dependencies' tasks)."""

    def __init__(self) -> None:
        self.status_code = 200
        self.body = b""
        self.background: BackgroundTask | None = None
        self.raw_headers: list[tuple[bytes, bytes]] = []


class DisconnectListener(Protocol):
    """Who hears that the client left before its answer: the request's channel."""

    def client_left(self) -> None: ...


class ResponseStream:
    """Writes one POST's answer to the ASGI `send`, as JSON or, once needed, as SSE.

    Use it as `async with`, which waits for the helpers to stop; a caller that does not must
    call `abandon()` once the answer is over, however it ended.
    """

    def __init__(
        self,
        send: Send,
        sse_allowed: bool,
        json_allowed: bool,
        keep_alive: KeepAlive,
        logs: StreamLogs | None = None,
        max_open_s: float | None = None,
        *,
        receive: Receive | None = None,
        listener: DisconnectListener | None = None,
        watch_now: bool = True,
    ) -> None:
        self._send = send
        self._keep_alive = keep_alive
        self._max_open_s = max_open_s
        self._sse_allowed = sse_allowed
        self._json_allowed = json_allowed
        self._logs = logs  # the session's resumable streams, when its revision has them
        self._log: StreamLog | None = None
        # Told once the client leaves before the answer (given `receive` to hear it by).
        self._listener = listener if receive is not None else None
        self._receive = receive
        # Whether the client's leaving is watched for; else only once asked (`watch_disconnect`).
        self._watching = self._listener is not None and watch_now
        self._made_lock: anyio.Lock | None = None  # made on first use, see `_lock`
        self._streaming = False
        self._finished = False
        self._detached = False  # ended early: events go to the log only
        self._closing = False  # an early close is due
        # The helpers: started by `_wake` once due, run by `_supervisor` in `_helpers`.
        self._helpers: TaskGroup | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._wake: asyncio.Handle | None = None
        loop = asyncio.get_running_loop()
        self._opened_at = loop.time()
        delays = [keep_alive.interval_s] if sse_allowed else []
        if self._watching:
            delays.append(WATCH_AFTER_S)
        if delays:
            # The timer is armed at the event loop's next turn, so an answer that is out before
            # the call lets the loop run (a quick route runs to its end without suspending)
            # arms none: a timer armed and cancelled per answer is paid by every quick call,
            # cancelled timers lingering in the loop's heap until due
            # (`benchmarks/profile_tool_call.py` shows the cost).
            self._wake = loop.call_soon(self._arm, min(delays))

    def watch_disconnect(self) -> None:
        """Tell the listener once the client leaves, if it leaves before the answer: watched
        from `WATCH_AFTER_S` on, and only once asked, so the answers nobody waits on that for
        (nearly all) pay nothing."""
        if self._listener is None or self._watching or self._finished:
            return
        self._watching = True
        if self._helpers is not None:
            self._helpers.start_soon(self._then_stop, self._watch_disconnect)
        elif self._supervisor is None:
            if self._wake is not None:
                self._wake.cancel()
            self._wake = asyncio.get_running_loop().call_later(WATCH_AFTER_S, self._start_helpers)

    @property
    def streaming(self) -> bool:
        """Whether the answer became an SSE stream: its status is sent, 200."""
        return self._streaming

    async def __aenter__(self) -> ResponseStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # However the answer ended (an answer cancelled from outside too: a server shutdown, a
        # middleware's timeout), nothing more goes out and the helpers are gone.
        self.abandon()
        if self._supervisor is not None:
            # Waited for even when the answer was cancelled, as a task group waits for its
            # tasks: told to stop, the supervisor ends at its next step. It never raises.
            with anyio.CancelScope(shield=True):
                await asyncio.wait([self._supervisor])
        if self._log is not None:  # answered or not, nobody sends this stream any more
            with anyio.CancelScope(shield=True):
                await self._log.release()
        # The listener (the request's channel) keeps this stream to watch it: let go of it, so
        # the two are freed when the request ends, not by a garbage collection pass later.
        self._listener = None

    def _lock(self) -> anyio.Lock:
        """What keeps events whole when a route sends from several tasks. Only streamed
        writes can race, so a plain JSON answer, the most common, never makes one
        (`benchmarks/profile_tool_call.py` shows the saving)."""
        if self._made_lock is None:
            # fast_acquire: an uncontended acquire takes no event-loop turn.
            self._made_lock = anyio.Lock(fast_acquire=True)
        return self._made_lock

    async def emit(self, message: Mapping[str, Any]) -> None:
        """Send a message before the answer: the response becomes an SSE stream."""
        if self._finished:
            return  # the answer is out (a background task logs): nothing more on this stream
        data = dumps(message)  # a message that is no JSON fails its sender before the stream starts
        async with self._lock():
            await self._start_streaming()
            await self._write(await self._event(data), more=True)

    def abandon(self) -> None:
        """The request is over: nothing more goes out, not even a keep-alive; helpers stop."""
        self._finished = True
        if self._wake is not None:
            self._wake.cancel()
        if self._helpers is not None:
            self._helpers.cancel_scope.cancel()

    async def finish(
        self, body: bytes | None, *, answered_request: bool, status: int = 200, headers: Sequence[Header] = ()
    ) -> None:
        """Send the answer (a JSON-RPC response or batch). Without one, a POST of notifications
        gets 202; a POST whose request was cancelled gets an empty stream (it must not be 202;
        a client that reads no SSE is given an error answer instead, see `error_answer`)."""
        self._finished = True  # from here on, emit() drops messages and no helper writes
        # An error with its own HTTP status (stateless revision) goes out as JSON unless a
        # stream has started: the status is part of the answer.
        must_stream = (body is not None and not self._json_allowed and status == 200) or (
            body is None and answered_request and self._sse_allowed
        )
        if self._streaming or must_stream:
            async with self._lock():
                await self._start_streaming()
                await self._write(await self._event(body) if body else b"", more=False)
                if self._log is not None:
                    await self._log.complete()
        elif body is None:
            await self._write_start(202, [(b"content-length", b"0")])
            await self._write(b"", more=False)
        else:
            # A helper that had started writing would have made this a stream: no lock needed.
            await self._write_start(status, [*_JSON_HEADERS, *headers, (b"content-length", str(len(body)).encode())])
            await self._write(body, more=False)
        self.abandon()

    async def _start_streaming(self) -> None:
        if self._streaming:
            return
        self._streaming = True
        await self._write_start(200, list(SSE_HEADERS))
        # No log once the session is gone: the stream goes out as it is, and cannot be resumed.
        self._log = await self._logs.start() if self._logs is not None else None
        if self._log is not None:
            await self._write(self._log.priming_event, more=True)
            if self._max_open_s is not None and not self._finished:
                self._closing = True
                if self._helpers is not None:
                    self._helpers.start_soon(self._then_stop, self._close_early, self._max_open_s)
                else:
                    self._start_helpers()  # a supervisor that has not begun yet sees `_closing`

    # -- the helpers ---------------------------------------------------------------------------

    def _arm(self, delay_s: float) -> None:
        if not self._finished:
            self._wake = asyncio.get_running_loop().call_later(delay_s, self._start_helpers)

    def _start_helpers(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if self._supervisor is None and not self._finished:
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise(), name="answer helpers")

    async def _supervise(self) -> None:
        if self._finished:
            return
        try:
            async with anyio.create_task_group() as helpers:
                self._helpers = helpers
                if self._sse_allowed:
                    helpers.start_soon(self._then_stop, self._send_keep_alives)
                if self._watching:
                    helpers.start_soon(self._then_stop, self._watch_disconnect)
                if self._closing and self._max_open_s is not None:
                    helpers.start_soon(self._then_stop, self._close_early, self._max_open_s)
        except Exception:
            # A helper's failure is the server's to know, not the client's: logged with its
            # traceback, while the answer goes on without its helpers.
            logger.exception("a helper of a pending answer failed")
        finally:
            self._helpers = None

    async def _then_stop(self, helper: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Run one helper; the first to finish cancels the rest."""
        await helper(*args)
        if self._helpers is not None:
            self._helpers.cancel_scope.cancel()

    async def _send_keep_alives(self) -> None:
        due = self._opened_at + self._keep_alive.interval_s
        while True:
            await anyio.sleep(max(0.0, due - anyio.current_time()))
            async with self._lock():
                if self._finished or self._detached:
                    return
                await self._start_streaming()
                await self._write(KEEP_ALIVE_COMMENT, more=True)
            due = anyio.current_time() + self._keep_alive.interval_s

    async def _close_early(self, after_s: float) -> None:
        await anyio.sleep(after_s)
        async with self._lock():
            if not self._finished:
                await self._write(b"", more=False)
                self._detached = True

    async def _watch_disconnect(self) -> None:
        receive, listener = self._receive, self._listener
        if receive is None or listener is None:  # never: a stream with both is the one watched
            return
        while (await receive())["type"] != "http.disconnect":
            pass
        if not self._detached:  # a stream this server ended early is resumed, not left
            listener.client_left()

    # -- writing -------------------------------------------------------------------------------

    async def _event(self, data: bytes) -> bytes:
        """Frame a message; on a resumable stream give it an id and keep it for a resume."""
        return await self._log.record(data) if self._log is not None else sse_event(data)

    async def _write_start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self._send({"type": "http.response.start", "status": status, "headers": headers})

    async def _write(self, data: bytes, *, more: bool) -> None:
        if self._detached:
            return  # the response has ended; the log holds this event for the resume
        try:
            # A large answer goes out in pieces: the server waits for a slow reader between them
            # (its flow control), so the answer stays ours, counted in the answer budget until
            # written, rather than all of it sitting in the server's write buffer at once.
            start = 0
            while len(data) - start > WRITE_PIECE_BYTES:
                piece = data[start : start + WRITE_PIECE_BYTES]
                await self._send({"type": "http.response.body", "body": piece, "more_body": True})
                start += WRITE_PIECE_BYTES
            await self._send({"type": "http.response.body", "body": data[start:] if start else data, "more_body": more})
        except OSError:
            # A dropped connection is not a cancellation in the session era (spec 2025-11-25,
            # basic/transports "Cancellation"): the call runs on; its events stay in the log.
            logger.info("the client closed a response stream before its answer")
            if self._listener is not None and not self._finished:
                self._listener.client_left()
