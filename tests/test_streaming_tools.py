"""Streaming routes as tools (tools/streams.py) on a real uvicorn server, with the official SDK
client in both eras (a 2025-11-25 session, and the 2026-07-28 revision): an SSE route by
sse-starlette, a typed one by FastAPI, a JSON Lines generator endpoint and a StreamingResponse
of NDJSON (tests/streaming_app.py).

A call samples the route for its window and then hangs up, so the route's generator is
cancelled at its next await: its `finally` has run by the time the result comes back, which
every test checks. The server runs in this process, so the routes' generators report across its
thread; nothing waits on a timer.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterable, Iterator
from typing import Any, Final

import anyio
import httpx
import pytest
from fastapi import FastAPI, Query
from fastapi.sse import EventSourceResponse
from mcp import Client, types
from pydantic import TypeAdapter

from fastapi_mcp_routes import Limits, Streaming, mcp_routes, mcp_tool
from fastapi_mcp_routes.tools import streams
from fastapi_mcp_routes.tools.streams import LineParser, SseParser
from tests.streaming_app import CONNECTED, NO_SUCH_TOPIC, RETRY_MS, Tick, runs, streams_app
from tests.support.jsonrpc import SESSION_VERSION
from tests.support.sdk import mcp_client
from tests.support.servers import connected, serve
from tests.support.stateless import STATELESS_VERSION
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

DEFAULT_MS: Final = 300
MAX_MS: Final = 5000  # far beyond what a sample that stops early takes, even on a loaded machine
MAX_FRAMES: Final = 5
CAP_BYTES: Final = 8192
# How far past its window a sample may end on a busy machine: generous, as the upper bounds only
# tell a window from the minute-long waits a sample must not take (a first frame 60 s away, 600 s).
SLACK_MS: Final = 20_000
VERSIONS: Final = {"legacy": SESSION_VERSION, "auto": STATELESS_VERSION}
WEATHER: Final = {"topic": "weather"}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """Short windows, so that a window's end and its bound are quick to reach."""
    app = streams_app(
        streaming=Streaming(default_subscribe_ms=DEFAULT_MS, max_subscribe_ms=MAX_MS, max_subscribe_frames=MAX_FRAMES),
        limits=Limits(max_response_bytes=CAP_BYTES),
    )
    with serve(app) as url:
        yield url


@pytest.fixture(scope="module")
def long_window_url() -> Iterator[str]:
    """Windows far longer than any wait here: a sample that stops early was stopped by the client."""
    with serve(streams_app(streaming=Streaming(default_subscribe_ms=60_000, max_subscribe_ms=60_000))) as url:
        yield url


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The SDK client's era: a session (`legacy`), or 2026-07-28 without one (`auto`)."""
    era: str = request.param
    return era


def new_run() -> str:
    return secrets.token_hex(6)


async def call(url: str, mode: str, tool: str, arguments: dict[str, Any], **options: Any) -> types.CallToolResult:
    """One call of `tool` in a fresh run; by the time its result is back, the route's generator
    has finished: its `finally` ran."""
    run = new_run()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(url, mode=mode) as client:
            assert client.protocol_version == VERSIONS[mode]
            result = await client.call_tool(tool, {**arguments, "run": run}, **options)
    assert runs.event("started", run).is_set()
    assert runs.event("cleaned", run).is_set(), "the route's generator was left running after its sample"
    return result


async def sample(url: str, mode: str, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """The sample a successful call returns (the SDK checked it against the tool's outputSchema)."""
    result = await call(url, mode, tool, arguments, **options)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def text_of(result: types.CallToolResult) -> str:
    return " ".join(block.text for block in result.content if isinstance(block, types.TextContent))


def event(n: int, data: Any) -> dict[str, Any]:
    """A frame of the sse-starlette route."""
    return {"data": data, "event": "weather", "id": str(n), "retry": RETRY_MS}


def json_event(n: int) -> dict[str, Any]:
    return event(n, {"n": n, "pad": ""})


# -- the window --------------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "arguments"), [("events", WEATHER), ("ticks", {}), ("lines", {}), ("feed", {})])
async def test_a_stream_that_keeps_going_is_sampled_for_the_window(
    base_url: str, mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    taken = await sample(base_url, mode, tool, {**arguments, "every_ms": 400, "durationMs": 600})

    assert 600 <= taken["elapsedMs"] < 600 + SLACK_MS
    assert (taken["ended"], taken["truncated"]) == (False, False)
    assert 1 <= taken["frameCount"] == len(taken["frames"]) < MAX_FRAMES


async def test_the_window_defaults_and_is_cut_to_its_bound(base_url: str, mode: str) -> None:
    by_default = await sample(base_url, mode, "events", {**WEATHER, "every_ms": 400})
    # Slow enough that the frame cap is not reached before the window's bound.
    too_long = await sample(base_url, mode, "events", {**WEATHER, "every_ms": 2000, "durationMs": 600_000})

    assert DEFAULT_MS <= by_default["elapsedMs"] < DEFAULT_MS + SLACK_MS
    assert MAX_MS <= too_long["elapsedMs"] < MAX_MS + SLACK_MS
    assert too_long["frames"][0] == json_event(1)
    assert not too_long["ended"]


async def test_a_stream_with_nothing_in_the_window_gives_no_frames(base_url: str, mode: str) -> None:
    for tool, arguments in (("events", WEATHER), ("lines", {})):
        taken = await sample(base_url, mode, tool, {**arguments, "first_ms": 60_000})

        assert taken["frames"] == []
        assert (taken["frameCount"], taken["ended"], taken["truncated"]) == (0, False, False)
        assert DEFAULT_MS <= taken["elapsedMs"] < DEFAULT_MS + SLACK_MS


# -- the frame cap and the stream's end --------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "frames", "truncated"),
    [
        # A burst: the third event had arrived when the second filled the cap.
        ("events", {**WEATHER, "every_ms": 0, "count": 50, "maxFrames": 2}, [json_event(1), json_event(2)], True),
        # Two lines a chunk: the cap leaves the chunk's second line unread, or takes both.
        ("feed", {"maxFrames": 1}, [{"n": 1, "half": 1}], True),
        ("feed", {"maxFrames": 2}, [{"n": 1, "half": 1}, {"n": 1, "half": 2}], False),
        # The next frame is a minute away: nothing was left unread.
        ("events", {**WEATHER, "maxFrames": 1}, [json_event(1)], False),
        ("ticks", {"maxFrames": 1}, [{"data": {"n": 1, "label": "tick 1"}}], False),
        ("lines", {"maxFrames": 1}, [{"n": 1, "label": "line 1"}], False),
    ],
)
async def test_max_frames_stops_the_sample_early_and_says_whether_it_left_one_unread(
    base_url: str, mode: str, tool: str, arguments: dict[str, Any], frames: list[Any], truncated: bool
) -> None:
    taken = await sample(base_url, mode, tool, {"every_ms": 60_000, "durationMs": MAX_MS, **arguments})

    assert taken["frames"] == frames
    assert taken["frameCount"] == len(frames)
    assert (taken["truncated"], taken["ended"]) == (truncated, False)
    assert taken["elapsedMs"] < MAX_MS  # it stopped at the cap, not at the window's end


async def test_max_frames_is_cut_to_its_bound(base_url: str, mode: str) -> None:
    taken = await sample(base_url, mode, "events", {**WEATHER, "every_ms": 0, "count": 50, "maxFrames": 1000})

    assert taken["frameCount"] == MAX_FRAMES
    assert taken["truncated"] is True


@pytest.mark.parametrize(
    ("tool", "arguments", "frames"),
    [
        ("events", {**WEATHER, "count": 3}, [json_event(1), json_event(2), event(3, "plain 3")]),
        ("ticks", {"count": 3}, [{"data": {"n": n, "label": f"tick {n}"}} for n in (1, 2, 3)]),
        ("lines", {"count": 3}, [{"n": n, "label": f"line {n}"} for n in (1, 2, 3)]),
        ("feed", {"count": 2}, [{"n": n, "half": half} for n in (1, 2) for half in (1, 2)]),
    ],
)
async def test_a_stream_that_ends_inside_the_window_gives_every_frame(
    base_url: str, mode: str, tool: str, arguments: dict[str, Any], frames: list[Any]
) -> None:
    taken = await sample(base_url, mode, tool, {**arguments, "every_ms": 0, "durationMs": MAX_MS})

    # sse-starlette's keep-alive comments are no frames; data that is not JSON stays text.
    assert taken["frames"] == frames
    assert (taken["frameCount"], taken["ended"], taken["truncated"]) == (len(frames), True, False)
    assert taken["elapsedMs"] < MAX_MS


# -- as it streams -----------------------------------------------------------------------------


async def test_each_frame_is_reported_as_progress(base_url: str, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    taken = await sample(base_url, mode, "ticks", {"count": 3, "every_ms": 0}, progress_callback=on_progress)

    assert taken["frameCount"] == 3
    # The route reported progress of its own first: the frames count on from it.
    assert seen == [
        (1, None, CONNECTED),
        *((n + 1, MAX_FRAMES, f'frame {n}: {{"n":{n},"label":"tick {n}"}}') for n in (1, 2, 3)),
    ]


@pytest.mark.parametrize(("tool", "arguments"), [("events", WEATHER), ("lines", {}), ("ticks", {})])
async def test_cancelling_the_call_stops_the_route_at_once(
    long_window_url: str, mode: str, tool: str, arguments: dict[str, Any]
) -> None:
    run = new_run()
    # Frames far apart: a frame due in the very turn the route is told its client left is handed
    # over first, and a FastAPI generator route is then cancelled in FastAPI's own await after
    # the item, its generator held at the `yield` until collected (REST clients race it too).
    arguments = {**arguments, "every_ms": 400, "run": run}
    streaming = anyio.Event()
    calling = anyio.CancelScope()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        streaming.set()

    async def call_until_cancelled(client: Client) -> None:
        with calling:
            await client.call_tool(tool, arguments, progress_callback=on_progress)

    with anyio.fail_after(WAIT_S):
        async with mcp_client(long_window_url, mode=mode) as client, anyio.create_task_group() as calls:
            calls.start_soon(call_until_cancelled, client)
            await streaming.wait()
            # A session's client says notifications/cancelled; a 2026-07-28 one closes the
            # call's response stream. The client stays open: its going away stops nothing here.
            calling.cancel()
            cleaned = await anyio.to_thread.run_sync(runs.event("cleaned", run).wait, WAIT_S)
    assert cleaned, "the route kept streaming after its call was cancelled (its window is a minute)"


# -- what the tools say about themselves -------------------------------------------------------


async def test_the_schemas_show_the_window_and_the_frames(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    tick = TypeAdapter(Tick).json_schema(mode="serialization")

    for tool in tools.values():
        window = tool.input_schema["properties"]
        assert window["durationMs"]["default"] == DEFAULT_MS
        assert window["maxFrames"]["default"] == MAX_FRAMES
        assert {"durationMs", "maxFrames"}.isdisjoint(tool.input_schema.get("required", []))
        assert tool.output_schema is not None
        assert tool.output_schema["required"] == ["frames", "frameCount", "elapsedMs", "ended", "truncated"]
    frames = {name: tool.output_schema["properties"]["frames"]["items"] for name, tool in tools.items()}
    assert frames["ticks"]["properties"]["data"] == tick
    assert set(frames["ticks"]["properties"]) == {"data", "event", "id", "retry"}
    assert frames["lines"] == tick
    assert frames["events"]["properties"]["data"] == {}  # sse-starlette: the data could be anything
    assert frames["feed"] == {}  # a StreamingResponse: SSE or lines, only its answer says


@pytest.mark.parametrize("name", ["durationMs", "maxFrames"])
async def test_a_route_parameter_named_like_a_window_argument_is_a_startup_error(name: str) -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app))

    @mcp_tool()
    @app.get("/clash", response_class=EventSourceResponse)
    async def clash(window: int = Query(0, alias=name)) -> AsyncIterable[int]:
        yield window  # pragma: no cover - never served

    with pytest.raises(ValueError, match=rf"GET /clash.*parameter named '{name}'"):
        async with connected(app):
            pass  # pragma: no cover - the startup fails


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"default_subscribe_ms": 0}, "default_subscribe_ms"),
        ({"max_subscribe_ms": -1}, "max_subscribe_ms"),
        ({"max_subscribe_frames": 2.5}, "max_subscribe_frames"),
        (
            {"default_subscribe_ms": 2000, "max_subscribe_ms": 1000},
            "Streaming.default_subscribe_ms must not exceed Streaming.max_subscribe_ms, got 2000 > 1000",
        ),
    ],
)
def test_window_options_that_make_no_sense_are_refused(options: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        Streaming(**options)


@pytest.mark.parametrize("window", [{"durationMs": "abc"}, {"durationMs": 0}, {"maxFrames": -3}, {"maxFrames": 1.5}])
async def test_a_window_that_makes_no_sense_is_an_error_result(
    base_url: str, mode: str, window: dict[str, Any]
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            result = await client.call_tool("events", {**WEATHER, "run": new_run(), **window})

    [(name, value)] = window.items()
    assert result.is_error
    assert text_of(result) == f"Argument {name!r} must be a positive whole number, got {value!r}."


# -- bounds and errors -------------------------------------------------------------------------


async def test_a_frame_larger_than_the_response_cap_is_an_error_result(base_url: str, mode: str) -> None:
    result = await call(base_url, mode, "events", {**WEATHER, "pad": CAP_BYTES})

    assert result.is_error
    assert f"A frame of the stream is larger than {CAP_BYTES} bytes" in text_of(result)


async def test_a_route_that_refuses_before_it_streams_gives_the_usual_error_result(base_url: str, mode: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            result = await client.call_tool("events", {"topic": "sport", "run": new_run()})

    assert result.is_error
    assert text_of(result) == f"HTTP 404: {NO_SUCH_TOPIC}"


async def test_a_route_that_fails_while_sampled_fails_its_call_at_once(long_window_url: str, mode: str) -> None:
    started = time.monotonic()
    result = await call(long_window_url, mode, "feed", {"every_ms": 0, "fail_at": 3})

    assert result.is_error
    assert "internal error" in text_of(result)  # the route's own error is the server's to log
    assert time.monotonic() - started < streams.UNWIND_S  # no grace for a route that has ended


# -- REST ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "tool", "arguments", "parser", "media_type"),
    [
        ("/events/weather", "events", WEATHER, SseParser, "text/event-stream"),
        ("/ticks", "ticks", {}, SseParser, "text/event-stream"),
        ("/lines", "lines", {}, LineParser, "application/jsonl"),
        ("/feed", "feed", {}, LineParser, "application/x-ndjson"),
    ],
)
async def test_rest_clients_of_the_streaming_routes_notice_nothing(
    base_url: str,
    path: str,
    tool: str,
    arguments: dict[str, Any],
    parser: type[SseParser | LineParser],
    media_type: str,
) -> None:
    run = new_run()
    parsing = parser()
    frames: list[Any] = []
    with anyio.fail_after(WAIT_S):
        async with (
            httpx.AsyncClient(base_url=base_url) as http,
            http.stream("GET", path, params={"count": 2, "every_ms": 0, "run": run}) as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith(media_type)
            async for chunk in response.aiter_bytes():
                frames += parsing.feed(chunk)
        sampled = await sample(base_url, "auto", tool, {**arguments, "count": 2, "every_ms": 0, "durationMs": MAX_MS})

    assert runs.event("cleaned", run).is_set()
    assert frames + parsing.end() == sampled["frames"]
