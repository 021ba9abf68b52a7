"""Long-lived SSE streams: a session's GET stream, a resume after `Last-Event-ID`, and a
2026-07-28 `subscriptions/listen`.

One task group supervises a stream (the sse-starlette way), and the first of its tasks to
finish ends the stream and cancels the rest:
- one watches for the client going away;
- one tends the stream: it renews what the stream holds (its `Lease`: slots, a claim, its
  session) every `Lease.renew_s`, ending the stream when that is gone, and sends a comment line
  after `KeepAlive.interval_s` without a write, so idle proxies keep the connection;
- each of the stream's sources waits for its own news and writes it; a source that returns
  ends the stream (its session ended, its answer went out).
A lock keeps events whole.

Deliberate choice: sources are woken by their news (a `ChangeFeed` for the tool list, the
Store's publish/subscribe for a resumed stream or a session's end), never by a timer, so an
idle stream costs one wake-up per keep-alive. When each stream polled every 0.5 s, 1,000 idle
streams kept the server at 5.4% of a core and made a tool call beside them cost 1.23x the
server CPU; woken, they cost 0.2% (as much as no stream) and 1.04x
(`benchmarks/idle_streams.py --rounds 6`, 2 cores).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.transport.response_stream import KeepAlive
from fastapi_mcp_routes.transport.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS

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

    def __init__(self, sources: Sequence[Source], keep_alive: KeepAlive, lease: Lease | None = None) -> None:
        # No body to render: the stream writes its own. FastAPI sets `background` after this.
        super().__init__(status_code=200)
        self._sources = tuple(sources)
        self._keep_alive = keep_alive
        self._lease = lease

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = _Writer(send)
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": list(SSE_HEADERS)})
            async with anyio.create_task_group() as tasks:

                async def first_to_finish_ends(task: Callable[..., Awaitable[None]], *args: Any) -> None:
                    await task(*args)
                    tasks.cancel_scope.cancel()

                tasks.start_soon(first_to_finish_ends, writer.watch, receive)
                tasks.start_soon(first_to_finish_ends, self._tend, writer)
                for source in self._sources:
                    tasks.start_soon(first_to_finish_ends, source, writer.emit)
        except* OSError:
            pass  # the client went away mid-write
        finally:
            # Before the end goes out: a client that sees its stream end can open another.
            if self._lease is not None:
                with anyio.CancelScope(shield=True):
                    await self._lease.release()
        if not writer.client_gone:
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()

    async def _tend(self, writer: _Writer) -> None:
        lease, keep_alive_s = self._lease, self._keep_alive.interval_s
        renew_s = lease.renew_s if lease is not None else math.inf
        renew_at = anyio.current_time() + renew_s
        while True:
            await anyio.sleep_until(min(writer.last_write + keep_alive_s, renew_at))
            now = anyio.current_time()
            if lease is not None and now >= renew_at:
                if not await lease.renew():
                    return
                renew_at = anyio.current_time() + renew_s
            if now >= writer.last_write + keep_alive_s:
                await writer.emit(KEEP_ALIVE_COMMENT)


class _Writer:
    """The stream's `send`, one event at a time, remembering when it last wrote."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = anyio.Lock()
        self.last_write = anyio.current_time()
        self.client_gone = False

    async def emit(self, event: bytes) -> None:
        async with self._lock:
            await self._send({"type": "http.response.body", "body": event, "more_body": True})
            self.last_write = anyio.current_time()

    async def watch(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_gone = True
