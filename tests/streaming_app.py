"""The app the streaming-tool tests serve: routes whose responses stream, called as tools.

Every route streams numbered ticks: an SSE route built on sse-starlette's `EventSourceResponse`,
one on FastAPI's own (`fastapi.sse`) with a typed item, a generator endpoint that FastAPI streams
as JSON Lines, and a `StreamingResponse` of NDJSON marked `stream=True`. Each call chooses how its
stream goes: `count` ticks (endless without), `every_ms` between two (not even a checkpoint with
0: a burst), `first_ms` before the first. Each route's generator notes, under the call's `run`,
that it started and that its `finally` ran, which the tests read across the server's thread.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import defaultdict
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Final

import anyio
import fastapi.sse
import sse_starlette
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from fastapi_mcp_routes import ToolContext, mcp_routes, mcp_tool

TOPICS: Final = ("weather", "traffic")
NO_SUCH_TOPIC: Final = "No such topic."
RETRY_MS: Final = 1500
CONNECTED: Final = "connected"
UPSTREAM_FAILED: Final = "the upstream feed failed"

Context = Annotated[ToolContext, Depends()]


class Tick(BaseModel):
    """One item of a typed stream."""

    n: int
    label: str


class Runs:
    """What each run's generator did: `started`, and `cleaned` (its `finally` ran)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: defaultdict[tuple[str, str], threading.Event] = defaultdict(threading.Event)

    def event(self, what: str, run: str) -> threading.Event:
        with self._lock:
            return self._events[what, run]

    @contextmanager
    def watched(self, run: str) -> Iterator[None]:
        self.event("started", run).set()
        try:
            yield
        finally:
            self.event("cleaned", run).set()


runs = Runs()


async def ticking(count: int | None, every_ms: int, first_ms: int) -> AsyncIterator[int]:
    """The numbers of a stream's ticks, as they are due."""
    await anyio.sleep(first_ms / 1000)
    for n in itertools.count(1) if count is None else range(1, count + 1):
        yield n
        if every_ms:
            await anyio.sleep(every_ms / 1000)


def streams_app(**options: Any) -> FastAPI:
    """A fresh app of streaming tools; `options` go to `mcp_routes`."""
    app = FastAPI(title="Streams")
    app.include_router(mcp_routes(app, **options))

    @mcp_tool()
    @app.get("/events/{topic}", response_class=sse_starlette.EventSourceResponse)
    async def events(
        topic: str, run: str = "", count: int | None = None, every_ms: int = 50, first_ms: int = 0, pad: int = 0
    ) -> sse_starlette.EventSourceResponse:
        """Server-sent events by sse-starlette: a keep-alive comment before each event, an event
        name, an id and a retry; every third event's data is not JSON."""
        if topic not in TOPICS:
            raise HTTPException(404, NO_SUCH_TOPIC)

        async def generate() -> AsyncIterator[dict[str, Any] | sse_starlette.ServerSentEvent]:
            with runs.watched(run):
                async for n in ticking(count, every_ms, first_ms):
                    yield sse_starlette.ServerSentEvent(comment="ping")
                    data = f"plain {n}" if n % 3 == 0 else json.dumps({"n": n, "pad": "x" * pad})
                    yield {"event": topic, "id": str(n), "retry": RETRY_MS, "data": data}

        return sse_starlette.EventSourceResponse(generate(), ping=0)

    @mcp_tool()
    @app.get("/ticks", response_class=fastapi.sse.EventSourceResponse)
    async def ticks(ctx: Context, run: str = "", count: int | None = None, every_ms: int = 50) -> AsyncIterable[Tick]:
        """Typed ticks as server-sent events, by FastAPI, once connected (progress of its own)."""
        with runs.watched(run):
            await ctx.report_progress(1, message=CONNECTED)
            async for n in ticking(count, every_ms, 0):
                yield Tick(n=n, label=f"tick {n}")

    @mcp_tool()
    @app.get("/lines")
    async def lines(
        run: str = "", count: int | None = None, every_ms: int = 50, first_ms: int = 0
    ) -> AsyncIterable[Tick]:
        """Typed ticks as JSON Lines, by FastAPI."""
        with runs.watched(run):
            async for n in ticking(count, every_ms, first_ms):
                yield Tick(n=n, label=f"line {n}")

    @mcp_tool(stream=True)
    @app.get("/feed")
    async def feed(
        run: str = "", count: int | None = None, every_ms: int = 50, fail_at: int | None = None
    ) -> StreamingResponse:
        """NDJSON from a StreamingResponse, two lines a chunk; its upstream may fail at a tick."""

        async def generate() -> AsyncIterator[bytes]:
            with runs.watched(run):
                async for n in ticking(count, every_ms, 0):
                    if n == fail_at:
                        raise RuntimeError(UPSTREAM_FAILED)
                    yield b"".join(json.dumps({"n": n, "half": half}).encode() + b"\n" for half in (1, 2))

        return StreamingResponse(generate(), media_type="application/x-ndjson")

    return app
