"""Streaming routes sampled as tools, pushed where a careless route or a hostile stream takes
them, against a real uvicorn server: a route that never awaits, `retry:` fields no number fits,
a route that fails while it unwinds, and one that never begins its response."""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel

from fastapi_mcp_routes import Limits, mcp_routes, mcp_tool
from fastapi_mcp_routes.tools import streams
from tests.support.jsonrpc import call_tool, open_session
from tests.support.servers import serve
from tests.support.stateless import post_stateless
from tests.support.waits import WAIT_S

CAP_BYTES = 64 * 1024  # the response cap of the app under test: a line past it is quick to send


class Tick(BaseModel):
    n: int


class Seen:
    """What the routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.release = threading.Event()  # lets a route that never awaits stop spinning
        self.finished: dict[str, threading.Event] = {}

    def finished_event(self, route: str) -> threading.Event:
        return self.finished.setdefault(route, threading.Event())


def review_app(seen: Seen) -> FastAPI:
    app = FastAPI(title="Streams under review")
    app.include_router(mcp_routes(app, limits=Limits(max_response_bytes=CAP_BYTES)))

    @mcp_tool(stream=True)
    @app.get("/busy-lines")
    async def busy_lines() -> StreamingResponse:
        async def lines() -> AsyncIterator[bytes]:
            try:
                while not seen.release.is_set():  # never awaits: only `send` can pause it
                    yield b'{"n": 1}\n'
            finally:
                seen.finished_event("busy_lines").set()

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @mcp_tool(stream=True)
    @app.get("/busy-line")
    async def busy_line() -> StreamingResponse:
        async def one_endless_line() -> AsyncIterator[bytes]:
            try:
                while not seen.release.is_set():
                    yield b"x" * 4096
            finally:
                seen.finished_event("busy_line").set()

        return StreamingResponse(one_endless_line(), media_type="application/x-ndjson")

    @mcp_tool(stream=True)
    @app.get("/retries")
    async def retries() -> StreamingResponse:
        body = (
            b"retry: \xc2\xb2\ndata: 1\n\n"  # a superscript two: `str.isdigit` says yes, `int` no
            b"retry: " + b"9" * 5000 + b"\ndata: 2\n\n"  # past Python's 4300-digit conversion limit
            b"retry: 1500\ndata: 3\n\n"
        )
        return StreamingResponse(iter([body]), media_type="text/event-stream")

    @mcp_tool(stream=True)
    @app.get("/cleanup-fails")
    async def cleanup_fails() -> StreamingResponse:
        async def ticks() -> AsyncIterator[bytes]:
            n = 0
            try:
                while True:
                    n += 1
                    yield f'{{"n": {n}}}\n'.encode()
                    await anyio.sleep(0.01)
            finally:
                seen.finished_event("cleanup_fails").set()
                raise RuntimeError("the upstream feed could not be closed")

        return StreamingResponse(ticks(), media_type="application/x-ndjson")

    @mcp_tool()
    @app.get("/fast-feed", response_class=EventSourceResponse)
    async def fast_feed() -> AsyncIterable[Tick]:
        n = 0
        try:
            while True:
                n += 1
                yield Tick(n=n)
        finally:
            seen.finished_event("fast_feed").set()

    @mcp_tool(stream=True)
    @app.get("/late")
    async def late() -> StreamingResponse:
        try:
            await anyio.sleep_forever()  # waits on something that never comes, before answering
        finally:
            seen.finished_event("late").set()
        raise AssertionError("unreachable")  # pragma: no cover

    return app


@pytest.fixture
def seen() -> Iterator[Seen]:
    made = Seen()
    try:
        yield made
    finally:
        made.release.set()


@pytest.fixture
def server(seen: Seen) -> Iterator[httpx.Client]:
    with serve(review_app(seen)) as url, httpx.Client(base_url=url, timeout=WAIT_S / 2) as http:
        yield http


def sampled(http: httpx.Client, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return call_tool(http, name, arguments or {}, headers=open_session(http))


def test_a_route_that_never_awaits_is_stopped_at_max_frames_and_its_generator_closes(
    server: httpx.Client, seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "UNWIND_S", 0.2)  # it cannot unwind: it is cancelled after that

    result = sampled(server, "busy_lines", {"maxFrames": 3, "durationMs": 30000})

    assert result["structuredContent"]["frames"] == [{"n": 1}] * 3
    assert result["structuredContent"]["truncated"] is True
    # Cancelled at a `yield`, as Starlette leaves it for a REST client too, the generator is
    # closed once collected: its `finally` runs then.
    gc.collect()
    assert seen.finished_event("busy_lines").wait(WAIT_S)


def test_a_route_that_never_awaits_keeps_the_server_serving_others_while_sampled(
    server: httpx.Client, seen: Seen, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "UNWIND_S", 0.2)
    headers = open_session(server)
    with server.stream(
        "POST",
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "busy_line", "arguments": {"durationMs": 30000}},
        },
        headers=headers,
    ) as pending:
        # While the route spins, another caller is still answered.
        listed = server.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers)
        assert listed.status_code == 200
        pending.read()
    result = pending.json()["result"]

    assert result["isError"] is True
    assert f"larger than {CAP_BYTES} bytes" in result["content"][0]["text"]
    gc.collect()
    assert seen.finished_event("busy_line").wait(WAIT_S)


def test_retry_fields_that_no_number_fits_are_ignored_in_both_eras(
    server: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    expected = [{"data": 1}, {"data": 2}, {"data": 3, "retry": 1500}]

    in_session = sampled(server, "retries")
    stateless = post_stateless(server, "tools/call", {"name": "retries", "arguments": {}})

    assert in_session.get("isError") is None, in_session
    assert in_session["structuredContent"]["frames"] == expected
    assert stateless.status_code == 200
    assert stateless.json()["result"]["structuredContent"]["frames"] == expected
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_route_that_fails_while_it_unwinds_keeps_the_frames_it_streamed(
    server: httpx.Client, seen: Seen, caplog: pytest.LogCaptureFixture
) -> None:
    result = sampled(server, "cleanup_fails", {"maxFrames": 2})

    assert result.get("isError") is None, result
    assert result["structuredContent"]["frames"] == [{"n": 1}, {"n": 2}]
    assert seen.finished_event("cleanup_fails").wait(WAIT_S)
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_fast_server_sent_events_route_keeps_its_frames_however_fastapi_unwinds_it(
    server: httpx.Client, seen: Seen
) -> None:
    headers = open_session(server)
    for _ in range(5):  # FastAPI's keep-alive task fails now and then as such a route unwinds
        result = call_tool(server, "fast_feed", {"maxFrames": 4}, headers=headers)
        assert result.get("isError") is None, result
        assert [frame["data"] for frame in result["structuredContent"]["frames"]] == [{"n": n} for n in range(1, 5)]
    assert seen.finished_event("fast_feed").wait(WAIT_S)


def test_a_route_that_never_begins_its_response_gives_an_empty_sample_not_an_http_500(
    server: httpx.Client, seen: Seen, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "UNWIND_S", 0.2)  # the grace before the route is cancelled

    result = sampled(server, "late", {"durationMs": 200})

    assert result.get("isError") is None, result
    assert result["structuredContent"]["frames"] == []
    assert result["structuredContent"]["ended"] is False
    assert seen.finished_event("late").wait(WAIT_S)
    assert "HTTP 500" not in caplog.text
