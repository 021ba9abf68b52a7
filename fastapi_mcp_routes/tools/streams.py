"""Streaming routes as tools: the frames of an SSE or JSON Lines response, read for a bounded window.

A route whose response streams (an `EventSourceResponse` of sse-starlette or FastAPI, a
`StreamingResponse`, a generator endpoint FastAPI streams as JSON Lines, or one marked
`mcp_tool(stream=True)`) never ends on its own, or not soon: a tool call reads its body as it
streams, parses each frame, and stops at the window's end (`durationMs`), at `maxFrames`, or when
the stream ends, whichever is first. It then tells the route the client left (`http.disconnect`),
so the route's generator is cancelled and its `finally` runs, as for a REST client that hangs up.

Frames of an SSE stream are `{"data", "event", "id", "retry"}` (comments ignored, `data`
parsed as JSON when it is JSON); frames of anything else are lines, each parsed as JSON when it
is JSON. The result says what was read: `frames`, `frameCount`, `elapsedMs` (the time
actually read), `ended` (the stream finished by itself) and `truncated` (a frame that had
arrived was left unread because of a bound: `maxFrames`, or the response cap for the whole).
A single frame larger than the response cap ends the window with an error saying so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import anyio.lowlevel
from pydantic import TypeAdapter
from starlette.types import ASGIApp, Message, Scope

from fastapi_mcp_routes.options import DEFAULT_MAX_SUBSCRIBE_FRAMES, DEFAULT_MAX_SUBSCRIBE_MS, DEFAULT_SUBSCRIBE_MS
from fastapi_mcp_routes.tools.invoke import CapturedResponse, Hold
from fastapi_mcp_routes.wire.errors import ParseError, ToolError
from fastapi_mcp_routes.wire.json import dumps, loads
from fastapi_mcp_routes.wire.jsonrpc import truncate

logger = logging.getLogger("fastapi_mcp_routes")

# The arguments a streaming tool takes besides its route's (camelCase, as MCP's own names are,
# so they cannot be mistaken for a route's snake_case parameters; a clash is a startup error).
DURATION_ARGUMENT: Final = "durationMs"
FRAMES_ARGUMENT: Final = "maxFrames"
STREAM_ARGUMENTS: Final = (DURATION_ARGUMENT, FRAMES_ARGUMENT)
SSE_MEDIA_TYPE: Final = "text/event-stream"
# How long a route may take to unwind once told the client left, before it is cancelled.
UNWIND_S: Final = 5.0
# How long after a window stops, and the route has handed over what it was sending, the route is
# told its client left: a moment, as a real client's hang-up takes to arrive. A window often stops
# while the route hands a frame over (maxFrames, or a cancelled call while its progress goes
# out), its generator held at the `yield`; in that moment the route gets back to its generator's
# own await, where the disconnect's cancellation then lands and its `finally` runs. Told at once,
# the cancellation would land in whatever the route's framework awaits between two items
# (FastAPI's generator routes do after each), and the generator, never resumed, would be closed
# only once collected.
HANG_UP_AFTER_S: Final = 0.001
# The most digits of a `retry:` value kept: any 15 digits are below 2**53.
_RETRY_DIGITS: Final = 15
# Characters of a frame shown in its progress message.
_PREVIEW_CHARS: Final = 80

OnFrame = Callable[[int, Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class WindowBounds:
    """The bounds of every window: `mcp_routes(streaming=Streaming(default_subscribe_ms=,
    max_subscribe_ms=, max_subscribe_frames=))`."""

    default_ms: int = DEFAULT_SUBSCRIBE_MS
    max_ms: int = DEFAULT_MAX_SUBSCRIBE_MS
    max_frames: int = DEFAULT_MAX_SUBSCRIBE_FRAMES

    def __post_init__(self) -> None:
        for name, value in (
            ("default_subscribe_ms", self.default_ms),
            ("max_subscribe_ms", self.max_ms),
            ("max_subscribe_frames", self.max_frames),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if self.default_ms > self.max_ms:
            raise ValueError(
                f"default_subscribe_ms must not exceed max_subscribe_ms, got {self.default_ms!r} > {self.max_ms!r}"
            )

    def window(self, arguments: Mapping[str, Any]) -> Window:
        """The window a call asks for, clamped to the bounds; `ToolError` for a value that is
        not a positive whole number."""
        duration = _positive(arguments, DURATION_ARGUMENT, self.default_ms)
        frames = _positive(arguments, FRAMES_ARGUMENT, self.max_frames)
        return Window(min(duration, self.max_ms) / 1000, min(frames, self.max_frames))

    def input_properties(self) -> dict[str, Any]:
        """The two arguments, as the tool's inputSchema shows them."""
        return {
            DURATION_ARGUMENT: {
                "type": "integer",
                "minimum": 1,
                "default": self.default_ms,
                "description": (
                    f"How long to sample the stream, in milliseconds (at most {self.max_ms}; "
                    "a longer window is cut to it)."
                ),
            },
            FRAMES_ARGUMENT: {
                "type": "integer",
                "minimum": 1,
                "default": self.max_frames,
                "description": f"The most frames to return (at most {self.max_frames}).",
            },
        }


def _positive(arguments: Mapping[str, Any], name: str, default: int) -> int:
    value = arguments.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolError(f"Argument {name!r} must be a positive whole number, got {truncate(repr(value))}.")
    return value


@dataclass(frozen=True, slots=True)
class Window:
    duration_s: float
    max_frames: int


@dataclass(frozen=True, slots=True)
class Streamed:
    """How a route streams, as far as discovery can tell: SSE (`True`), JSON Lines (`False`),
    or only once it answers (`None`); and its item's JSON Schema where FastAPI knows it."""

    sse: bool | None
    item: Mapping[str, Any] | None


def stream_of(route: Any, marked: bool | None) -> Streamed | None:
    """Whether a tool's route streams (`None`: it answers whole). `marked`: the tool's
    `stream=` option, which overrides what the response class says."""
    if marked is False:
        return None
    declared = getattr(route, "response_class", None)
    response_class = getattr(declared, "value", declared)  # FastAPI's DefaultPlaceholder
    names = {kind.__name__ for kind in getattr(response_class, "__mro__", ())}
    sse = bool(getattr(route, "is_sse_stream", False)) or "EventSourceResponse" in names
    lines = bool(getattr(route, "is_json_stream", False))
    if not (marked or sse or lines or "StreamingResponse" in names):
        return None
    item_type = getattr(route, "stream_item_type", None)
    item = TypeAdapter(item_type).json_schema(mode="serialization") if item_type is not None else None
    return Streamed(True if sse else False if lines else None, item)


def output_schema(sse: bool | None, item: Mapping[str, Any] | None) -> dict[str, Any]:
    """The outputSchema of a streaming tool: its frames described by the route's item model
    where FastAPI knows it (`AsyncIterable[Item]`). `sse`: `None` when the media type is only
    known once the route answers."""
    data: dict[str, Any] = dict(item) if item is not None else {}
    defs = data.pop("$defs", None)
    event: dict[str, Any] = {
        "type": "object",
        "properties": {
            "data": data,
            "event": {"type": "string"},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
        "required": ["data"],
    }
    frame: dict[str, Any] = event if sse else data if sse is False else {}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "frames": {"type": "array", "items": frame},
            "frameCount": {"type": "integer"},
            "elapsedMs": {"type": "integer"},
            "ended": {"type": "boolean"},
            "truncated": {"type": "boolean"},
        },
        "required": ["frames", "frameCount", "elapsedMs", "ended", "truncated"],
    }
    if defs:
        schema["$defs"] = defs  # the item's `#/$defs/...` references resolve at the root
    return schema


def _value(text: str) -> Any:
    try:
        return loads(text)
    except ParseError:
        return text


class _Lines:
    """Lines from a byte stream. A line not whole yet is kept in parts and joined once it ends,
    so a long line costs its length once, not once per chunk. `cr`: a lone CR ends a line too
    (SSE), and a CR at the end of a chunk waits for the next, which may bring its LF."""

    def __init__(self, *, cr: bool) -> None:
        self._cr = cr
        self._parts: list[bytes] = []
        self.size = 0  # bytes of the line not whole yet

    def feed(self, chunk: bytes) -> list[bytes]:
        parts = self._parts
        ends = b"\n" in chunk or (self._cr and (b"\r" in chunk or (bool(parts) and parts[-1].endswith(b"\r"))))
        if not ends:
            if chunk:
                parts.append(chunk)
                self.size += len(chunk)
            return []
        data, held = b"".join((*parts, chunk)), b""
        if self._cr:
            if data.endswith(b"\r"):
                data, held = data[:-1], b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = data.split(b"\n")
        rest = lines.pop() + held
        self._parts = [rest] if rest else []
        self.size = len(rest)
        return lines

    @property
    def held_cr(self) -> bool:
        return bool(self._parts) and self._parts[-1].endswith(b"\r")

    def rest(self) -> bytes:
        rest = b"".join(self._parts)
        self._parts, self.size = [], 0
        return rest


class SseParser:
    """Server-sent events from a byte stream (WHATWG HTML, "Parsing an event stream")."""

    def __init__(self) -> None:
        self._lines = _Lines(cr=True)
        self._data: list[str] = []
        self._data_size = 0
        self._fields: dict[str, Any] = {}

    @property
    def pending(self) -> int:
        """Bytes of a frame not whole yet."""
        return self._lines.size + self._data_size

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = []
        for raw in self._lines.feed(chunk):
            line = raw.decode("utf-8", "replace")
            if not line:
                if self._data:
                    frames.append({"data": _value("\n".join(self._data)), **self._fields})
                self._data, self._data_size, self._fields = [], 0, {}
                continue
            if line.startswith(":"):
                continue  # a comment (keep-alives)
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                self._data.append(value)
                self._data_size += len(value)
            elif name in ("event", "id"):
                self._fields[name] = value
            elif name == "retry" and _is_retry(value):
                self._fields["retry"] = int(value)
        return frames

    def end(self) -> list[dict[str, Any]]:
        # A CR held back for its LF ends its line all the same; an event not followed by a
        # blank line is not dispatched (WHATWG).
        return self.feed(b"\n") if self._lines.held_cr else []


def _is_retry(value: str) -> bool:
    """Whether a `retry:` value is a reconnection time: ASCII digits only (WHATWG; `str.isdigit`
    takes "²", which `int` refuses), and few enough that the number stays exact in JSON (2**53),
    so a stream's `retry: 9999…` of thousands of digits is ignored, not converted."""
    return 0 < len(value) <= _RETRY_DIGITS and value.isascii() and value.isdigit()


class LineParser:
    """JSON Lines (NDJSON, or any line-delimited text): a frame per non-empty line."""

    def __init__(self) -> None:
        self._lines = _Lines(cr=False)

    @property
    def pending(self) -> int:
        return self._lines.size

    def feed(self, chunk: bytes) -> list[Any]:
        return [_value(line.decode("utf-8", "replace")) for line in self._lines.feed(chunk) if line.strip()]

    def end(self) -> list[Any]:
        rest = self._lines.rest()
        return [_value(rest.decode("utf-8", "replace"))] if rest.strip() else []


@dataclass(slots=True)
class WindowRead:
    """What one window read of the route's stream: each frame kept once, as the JSON the answer
    carries it in, not as a Python value besides."""

    frames: list[bytes] = field(default_factory=list)
    size: int = 0  # bytes of the frames' encoding
    elapsed_ms: int = 0
    ended: bool = False
    truncated: bool = False

    def encoded(self) -> bytes:
        """The structured content, as JSON, made from the frames' encodings."""
        flags = b"true" if self.ended else b"false", b"true" if self.truncated else b"false"
        return b"".join(
            (
                b'{"frames":[',
                b",".join(self.frames),
                b'],"frameCount":%d,"elapsedMs":%d,"ended":%s,"truncated":%s}'
                % (len(self.frames), self.elapsed_ms, *flags),
            )
        )


def window_result(taken: WindowRead) -> dict[str, Any]:
    """The `CallToolResult` of a window: the frames as structured content, and as text. Both
    are read from the one encoding the window kept; the frames are let go as it is made."""
    encoded = taken.encoded()
    taken.frames.clear()
    structured = loads(encoded)
    return {"content": [{"type": "text", "text": encoded.decode()}], "structuredContent": structured}


def describe(frame: Any) -> str:
    """A frame in a progress message: short, on one line."""
    shown = frame.get("data") if isinstance(frame, dict) and "data" in frame else frame
    text = shown if isinstance(shown, str) else dumps(shown).decode("utf-8", "replace")
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


async def read_window(
    app: ASGIApp,
    scope: Scope,
    body: bytes,
    window: Window,
    on_frame: OnFrame,
    max_response_bytes: int,
    hold: Hold | None = None,
    hung_up: anyio.Event | None = None,
) -> WindowRead | CapturedResponse:
    """Run the route and read its stream for `window`; the response as a REST client had it
    when the route did not stream (an error status before any frame). `ToolError` for a frame,
    or a response that does not stream, larger than `max_response_bytes`, and for such a
    response `hold` refuses to hold (the process's answer budget). `hold` is asked for each frame
    kept too: refused, the window ends there, truncated, as at the response cap. Once `hung_up`
    is set (the caller's client left, and the call runs on), the window ends early with what it read.

    Nothing is raised inside `send`, which would travel back through the app's middleware: a
    failure is kept, the route is told its client left, and the failure is raised after."""
    scope = {**scope, "asgi": {"version": "3.0", "spec_version": "2.3"}}  # disconnects go by receive
    run = _WindowRun(window, on_frame, max_response_bytes, hold)
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await run.hang_up()
        return {"type": "http.disconnect"}

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(run.stop_after, window.duration_s)
        tasks.start_soon(run.hang_up_if_cancelled)
        if hung_up is not None:
            tasks.start_soon(run.stop_once, hung_up)
        # Shielded from the call's cancellation, which hangs up as the window's end does, so the
        # route's generator sees it at its own await. Cancelled outright, a route handing a frame
        # over would be cancelled in its framework's code, its generator held at the `yield` and
        # closed only once collected (FastAPI's generator routes).
        with anyio.CancelScope(shield=True) as route:
            tasks.start_soon(run.cancel_unless_unwound, route)
            try:
                await app(scope, receive, run.send)
            except Exception as exc:
                if not run.stopped.is_set():
                    raise  # the route failed while read: the call fails, as any tool's would
                # It failed unwinding, after the window was over (its own cleanup, or FastAPI's
                # SSE keep-alive task for a route that yields fast): what was read stands.
                logger.warning(
                    "a streaming route raised %s while it unwound after its window ended",
                    type(exc).__name__,
                    exc_info=logger.isEnabledFor(logging.DEBUG),
                )
            finally:
                run.returned = True
                run.unwinding.cancel()
        tasks.cancel_scope.cancel()
    if run.failure is not None:
        raise run.failure
    if not run.answered and run.stopped.is_set():
        return run.taken  # the window ended before the route began its response: no frame came
    if run.parser is None:
        return CapturedResponse(run.status, run.headers, b"".join(run.captured))
    return run.taken


class _WindowRun:
    """One window while the route streams: what `send` is handed, and when it stops."""

    def __init__(self, window: Window, on_frame: OnFrame, max_response_bytes: int, hold: Hold | None) -> None:
        self.window = window
        self.hold = hold
        self.on_frame = on_frame
        self.max_bytes = max_response_bytes
        self.started = time.monotonic()
        self.stopped = anyio.Event()  # the window is over: the route is told its client left
        self.full = False  # maxFrames frames were taken
        self.overdue = False  # the route did not unwind within UNWIND_S and is cancelled
        self.returned = False  # the route has returned: there is no one left to hang up on
        self.unwinding = anyio.CancelScope(shield=True)  # counts UNWIND_S, even in a cancelled call
        self.sending = 0  # calls of `send` under way: the route is handing something over
        self.sent = anyio.Event()  # set whenever no call of `send` is under way
        self.taken = WindowRead()
        self.answered = False  # the route began its response
        self.status = 500
        self.headers: tuple[tuple[bytes, bytes], ...] = ()
        self.parser: SseParser | LineParser | None = None
        self.captured: list[bytes] = []
        self.captured_size = 0
        self.failure: ToolError | None = None

    def stop(self) -> None:
        if not self.stopped.is_set():
            self.taken.elapsed_ms = round((time.monotonic() - self.started) * 1000)
            self.stopped.set()

    def fail(self, failure: ToolError) -> None:
        self.failure = self.failure or failure
        self.stop()

    async def stop_after(self, duration_s: float) -> None:
        await anyio.sleep(duration_s)
        self.stop()

    async def stop_once(self, event: anyio.Event) -> None:
        await event.wait()
        self.stop()

    async def hang_up_if_cancelled(self) -> None:
        """A cancelled call tells the route its client left."""
        try:
            await anyio.sleep_forever()
        finally:
            if not self.returned:
                self.stop()

    async def hang_up(self) -> None:
        """Wait until the route is to be told its client left (HANG_UP_AFTER_S)."""
        await self.stopped.wait()
        while self.sending:
            await self.sent.wait()
        await anyio.sleep(HANG_UP_AFTER_S)

    async def cancel_unless_unwound(self, route: anyio.CancelScope) -> None:
        """A route that does not unwind once told its client left is cancelled."""
        with self.unwinding:
            await self.stopped.wait()
            await anyio.sleep(UNWIND_S)
            self.overdue = True
            route.cancel()

    async def send(self, message: Message) -> None:
        if not self.sending:
            self.sent = anyio.Event()
        self.sending += 1
        try:
            await self._read(message)
            # The loop turns here, as a real server's write lets it now and then: a route that
            # never awaits anything but `send` must not hold the loop (the window's timer, its
            # disconnect listener, other callers). Shielded, so the disconnect's cancellation
            # lands in the route's own next await, where its generator sees it and its `finally`
            # runs; only a route that has not unwound in time is cancelled here.
            if self.overdue:
                await anyio.lowlevel.checkpoint()
            else:
                await anyio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self.sending -= 1
            if not self.sending:
                self.sent.set()

    async def _read(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.answered = True
            self.status, self.headers = message["status"], tuple(message.get("headers", ()))
            if 200 <= self.status < 300:
                media_type = CapturedResponse(self.status, self.headers, b"").header(b"content-type") or ""
                sse = media_type.split(";", 1)[0].strip().lower() == SSE_MEDIA_TYPE
                self.parser = SseParser() if sse else LineParser()
            return
        if message["type"] != "http.response.body" or self.failure is not None:
            return
        chunk = message.get("body", b"")
        more = message.get("more_body", False)
        parser = self.parser
        if parser is None:  # not a stream: kept whole, as any response is
            self.captured_size += len(chunk)
            if self.captured_size > self.max_bytes:
                self.captured.clear()
                self.fail(ToolError(f"The route's response is larger than {self.max_bytes} bytes."))
            elif (reason := self._held(len(chunk))) is not None:
                self.captured.clear()
                self.fail(ToolError(f"The route's response was not kept: {reason}. Try again later."))
            else:
                self.captured.append(chunk)
            return
        if self.stopped.is_set():
            # Only to tell whether a frame arrived that maxFrames left unread, and not past the cap.
            if self.full and not self.taken.truncated and parser.pending <= self.max_bytes:
                self.taken.truncated = bool(parser.feed(chunk) or (not more and parser.end()))
            return
        frames = parser.feed(chunk)
        if not more:
            frames += parser.end()
        await self._take(frames)
        if parser.pending > self.max_bytes:
            self.fail(_frame_too_large(self.max_bytes))
        elif not more and not self.stopped.is_set():
            self.taken.ended = True
            self.stop()

    async def _take(self, frames: list[Any]) -> None:
        taken = self.taken
        for frame in frames:
            if self.stopped.is_set():
                taken.truncated = taken.truncated or self.full  # it arrived, and maxFrames left it unread
                return
            encoded = dumps(frame)
            size = len(encoded)
            if size > self.max_bytes:
                self.fail(_frame_too_large(self.max_bytes))
                return
            if taken.size + size > self.max_bytes:
                taken.truncated = True  # the whole would outgrow the response cap
                self.stop()
                return
            # The answer carries each frame twice: structured, and as text. Past the budget the
            # window ends as at the response cap: what was read is the caller's, marked truncated.
            if self._held(2 * size) is not None:
                taken.truncated = True
                self.stop()
                return
            taken.frames.append(encoded)
            taken.size += size
            await self.on_frame(len(taken.frames), frame)
            if len(taken.frames) >= self.window.max_frames:
                self.full = True
                self.stop()

    def _held(self, size: int) -> str | None:
        return None if self.hold is None or not size else self.hold(size)


def _frame_too_large(limit: int) -> ToolError:
    return ToolError(f"A frame of the stream is larger than {limit} bytes (Limits.max_response_bytes).")
