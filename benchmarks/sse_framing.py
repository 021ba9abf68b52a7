"""What framing one JSON-RPC message as an SSE event costs, per library.

    .venv/bin/python benchmarks/sse_framing.py

Deliberate choices:
- The message is a ~200-byte progress notification already encoded as JSON bytes, as the
  response stream holds it; decoding it to `str` for the library is part of the cost.
- Each candidate frames it as `event: message` with an id, as a resumable stream does, and
  must produce the same SSE event (the order of the fields may differ: it does not matter to
  SSE parsers). The hand-written framing this library used before is timed for reference.
- sse-starlette is not a dependency of this library; it is timed when installed (the MCP SDK,
  a test dependency, brings it).
- Best of 5 repeats of 100,000 calls: the least disturbed figure on a shared machine.
"""

from __future__ import annotations

import importlib.metadata
import timeit
from collections.abc import Callable
from typing import Final

from fastapi.sse import format_sse_event

from fastapi_mcp_routes.wire.json import dumps

MESSAGE: Final = dumps(
    {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "bench-1", "progress": 3, "total": 10, "message": "step " + "x" * 70},
    }
)
EVENT_ID: Final = "1.3"
CALLS: Final = 100_000
REPEATS: Final = 5


def hand_written() -> bytes:
    return b"id: " + EVENT_ID.encode() + b"\nevent: message\ndata: " + MESSAGE + b"\n\n"


def fastapi_sse() -> bytes:
    return format_sse_event(data_str=MESSAGE.decode(), event="message", id=EVENT_ID)


def candidates() -> dict[str, Callable[[], bytes]]:
    found = {
        "hand-written (before)": hand_written,
        f"fastapi.sse.format_sse_event (fastapi {importlib.metadata.version('fastapi')})": fastapi_sse,
    }
    try:
        from sse_starlette.event import ServerSentEvent
    except ImportError:
        return found

    def sse_starlette() -> bytes:
        return ServerSentEvent(MESSAGE.decode(), event="message", id=EVENT_ID, sep="\n").encode()

    version = importlib.metadata.version("sse-starlette")
    found[f"sse_starlette ServerSentEvent.encode (sse-starlette {version})"] = sse_starlette
    return found


def fields(event: bytes) -> list[bytes]:
    return sorted(event.rstrip(b"\n").split(b"\n"))


def main() -> None:
    print(f"Framing one {len(MESSAGE)}-byte JSON message; best of {REPEATS} x {CALLS:,} calls.\n")
    print("| Framing | per event | vs hand-written |")
    print("|---|--:|--:|")
    reference = fields(hand_written())
    baseline: float | None = None
    for name, frame in candidates().items():
        if fields(frame()) != reference:
            raise SystemExit(f"{name} frames the message differently: {frame()!r}")
        seconds = min(timeit.repeat(frame, number=CALLS, repeat=REPEATS)) / CALLS
        baseline = baseline or seconds
        print(f"| {name} | {seconds * 1e6:.2f} µs | {seconds / baseline:.1f}x |")


if __name__ == "__main__":
    main()
