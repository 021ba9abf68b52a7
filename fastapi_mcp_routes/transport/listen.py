"""Long-lived SSE streams: a session's GET stream, a resume after `Last-Event-ID`, and a
2026-07-28 `subscriptions/listen`.

One task group supervises a stream (the sse-starlette way), and the first of its tasks to
finish ends the stream and cancels the rest:
- one watches for the client going away;
- one tends the stream: it renews what the stream holds (its `Lease`: slots, a claim, its
  session) every `Lease.renew_s`, ending the stream when that is gone, and after
  `KeepAlive.interval_s` without a write has a comment line written, so idle proxies keep the
  connection, in a short task whose end ends nothing. It never waits for a write: a write
  that a client which stopped reading blocks must not hold up the renewals, or the slots would
  lapse while the stream still holds its socket. So a stream holds its slots exactly as long as
  it is open;
- each of the stream's sources waits for its own news and writes it; a source that returns
  ends the stream (its session ended, its answer went out).
The stream opens (its headers go out) once its sources listen for their news, not before: a
client that sees it open, or reads its acknowledgement, hears whatever happens from then on.
A lock keeps events whole. A write blocked for `WRITE_STALL_KEEP_ALIVES` keep-alive intervals
(a client that stopped reading, its socket full) ends the stream, so such a client does not hold
a slot forever.

Deliberate choice: sources are woken by their news (a `ChangeFeed` for the tool list, the
Store's publish/subscribe for a resumed stream or a session's end), never by a timer, so an
idle stream costs one wake-up per keep-alive (and the short task that writes it), where polling
streams kept the server busy and slowed the tool calls beside them (`benchmarks/idle_streams.py`
measures both).

Deliberate choice: the tending task starts each keep-alive write in a short task of its own,
rather than a keep-alive task living beside a renewal task, so an idle stream keeps three tasks,
not four, and the tool calls beside idle streams cost less (`benchmarks/idle_streams.py`).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol

import anyio
from anyio.abc import TaskGroup
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.transport.http import STORE_RETRY_AFTER_S
from fastapi_mcp_routes.transport.response_stream import KeepAlive
from fastapi_mcp_routes.transport.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from fastapi_mcp_routes.wire.jsonrpc import encode_error

logger = logging.getLogger("fastapi_mcp_routes")

# A client that reads takes a keep-alive every interval and empties its socket buffers long
# before this many intervals pass (60 s by default); a write still blocked then means it stopped
# reading. Several intervals, not one, so a slow link or a large event is not cut short.
WRITE_STALL_KEEP_ALIVES: Final = 4

# Writes one framed SSE event.
Emit = Callable[[bytes], Awaitable[None]]
# Waits for news and writes it, for as long as the stream lasts; returning ends the stream.
Source = Callable[[Emit], Awaitable[None]]


class Lease(Protocol):
    """What an open stream holds, renewed while it lives and given back when it ends."""

    @property
    def renew_s(self) -> float: ...

    async def renew(self) -> bool:
        """Hold on another while; `False` when what the stream stands on is gone (it ends)."""
        ...

    async def release(self) -> None: ...


class ListenStream(Response):
    """A long-lived SSE response written by its `sources`, holding `lease` while it is open."""

    def __init__(
        self,
        sources: Sequence[Source],
        keep_alive: KeepAlive,
        lease: Lease | None = None,
        listening: Sequence[anyio.Event] = (),
    ) -> None:
        """`listening`: events the sources set once they listen; the stream opens only then."""
        # No body to render: the stream writes its own. FastAPI sets `background` after this.
        super().__init__(status_code=200)
        self._sources = tuple(sources)
        self._keep_alive = keep_alive
        self._lease = lease
        self._listening = tuple(listening)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = _Writer(send, WRITE_STALL_KEEP_ALIVES * self._keep_alive.interval_s)
        store_down = False
        try:
            async with anyio.create_task_group() as tasks:

                async def first_to_finish_ends(task: Callable[..., Awaitable[None]], *args: Any) -> None:
                    await task(*args)
                    tasks.cancel_scope.cancel()

                tasks.start_soon(first_to_finish_ends, writer.watch, receive)
                for source in self._sources:
                    tasks.start_soon(first_to_finish_ends, source, writer.emit)  # writes wait for the opening
                # A client that sees the stream open (or acknowledged) may act at once, say write a
                # resource it subscribed to: what happens from then on must reach it.
                for listening in self._listening:
                    await listening.wait()
                await writer.open(self.status_code)
                tasks.start_soon(first_to_finish_ends, self._tend, writer, tasks)
        except* OSError:
            pass  # the client went away mid-write
        except* _WriteStalled:
            logger.info("ended a stream whose client stopped reading (a write blocked for %g s)", writer.stall_s)
        except* StoreUnavailable:
            # A source could not listen (the store's pub/sub is down, or coming back): before
            # the stream opened the client is told to come again, as for any request the
            # store's outage stops; after, the stream ends and the client opens another.
            store_down = True
            logger.info("ended a stream: the shared store cannot serve its subscriptions now")
        finally:
            # Before the end goes out: a client that sees its stream end can open another.
            if self._lease is not None:
                with anyio.CancelScope(shield=True):
                    try:
                        await self._lease.release()
                    except StoreUnavailable as down:  # what it held lapses on its own
                        logger.info("a stream's lease lapses rather than being given back: %s", down.reason)
        if store_down and not writer.opened:
            with contextlib.suppress(OSError), anyio.move_on_after(writer.stall_s):
                await _store_down_answer(send)
        elif not (writer.client_gone or writer.stalled):
            # Bounded too: a client that stops reading now would hold this write forever.
            with contextlib.suppress(OSError), anyio.move_on_after(writer.stall_s):
                if not writer.opened:  # it ended before it opened (its session ended meanwhile)
                    await writer.open(self.status_code)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()

    async def _tend(self, writer: _Writer, tasks: TaskGroup) -> None:
        """Renew the lease, and have keep-alives written in `tasks`, never waiting for a write."""
        lease, keep_alive_s = self._lease, self._keep_alive.interval_s
        renew_s = lease.renew_s if lease is not None else math.inf
        renew_at = anyio.current_time() + renew_s
        while True:
            # While a write is under way the stream is not quiet: look again an interval later.
            quiet_at = (anyio.current_time() if writer.busy else writer.last_write) + keep_alive_s
            await anyio.sleep_until(min(quiet_at, renew_at))
            now = anyio.current_time()
            if lease is not None and now >= renew_at:
                if not await lease.renew():
                    return
                renew_at = anyio.current_time() + renew_s
            if not writer.busy and now >= writer.last_write + keep_alive_s:
                writer.keep_alive_soon(tasks)


async def _store_down_answer(send: Send) -> None:
    """503 with Retry-After and a JSON-RPC error naming the store, sent in place of a stream."""
    body = encode_error(None, StoreUnavailable("a stream's subscription"))
    headers = [
        (b"content-type", c.MEDIA_JSON.encode()),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(STORE_RETRY_AFTER_S).encode()),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class _WriteStalled(Exception):
    """A write of the stream waited longer than its bound: the client stopped reading."""


class _Writer:
    """The stream's `send`, one event at a time, remembering when it last wrote; a write
    blocked longer than `stall_s` raises `_WriteStalled`."""

    def __init__(self, send: Send, stall_s: float) -> None:
        self._send = send
        self._lock = anyio.Lock()
        self.stall_s = stall_s
        self.last_write = anyio.current_time()
        self.client_gone = False
        self.stalled = False
        self._keeping_alive = False
        self._opened = anyio.Event()

    @property
    def opened(self) -> bool:
        return self._opened.is_set()

    async def open(self, status: int) -> None:
        """Send the response's start; the writes waiting for it go out after it."""
        await self._send({"type": "http.response.start", "status": status, "headers": list(SSE_HEADERS)})
        self.last_write = anyio.current_time()
        self._opened.set()

    @property
    def busy(self) -> bool:
        """A write is under way, or a keep-alive is about to be."""
        return self._keeping_alive or self._lock.locked()

    def keep_alive_soon(self, tasks: TaskGroup) -> None:
        """Write a keep-alive comment in a task of its own, which the caller does not wait for."""
        self._keeping_alive = True
        tasks.start_soon(self._keep_alive)

    async def _keep_alive(self) -> None:
        try:
            await self.emit(KEEP_ALIVE_COMMENT)
        finally:
            self._keeping_alive = False

    async def emit(self, event: bytes) -> None:
        await self._opened.wait()
        async with self._lock:
            # Given up on, the write may have gone out in part: the stream ends here either way.
            with anyio.move_on_after(self.stall_s) as waited:
                await self._send({"type": "http.response.body", "body": event, "more_body": True})
            if waited.cancelled_caught:
                self.stalled = True
                raise _WriteStalled
            self.last_write = anyio.current_time()

    async def watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_gone = True
