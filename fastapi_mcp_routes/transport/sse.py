"""Server-sent events as MCP sends them, framed by FastAPI's own `fastapi.sse`.

Every JSON-RPC message is one `message` event. A resumable stream (2025-11-25) numbers its
events `<stream>.<seq>` and opens with a priming event that carries only an id and the retry
delay (spec 2025-11-25, basic/transports "Resumability and Redelivery").

`fastapi.sse` rather than sse-starlette: it frames a message in a fraction of the time
(`benchmarks/sse_framing.py`), and FastAPI is a dependency already.
"""

from __future__ import annotations

from typing import Final

from fastapi.sse import format_sse_event

from fastapi_mcp_routes.wire import constants as c

# A tuple: every response gets its own list, which a middleware may change in place.
SSE_HEADERS: Final = (
    (b"content-type", c.MEDIA_SSE.encode()),
    (b"cache-control", b"no-cache"),
    # Reverse proxies (nginx) would otherwise hold events back until the stream ends.
    (b"x-accel-buffering", b"no"),
)
# What clients wait before reconnecting, sent in each resumable stream's priming event.
RETRY_MS: Final = 1000
KEEP_ALIVE_COMMENT: Final = format_sse_event(comment="keep-alive")


def sse_event(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    return format_sse_event(data_str=data.decode(), event="message", id=event_id)


def priming_event(stream: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, and the retry delay."""
    return format_sse_event(data_str="", id=f"{stream}.0", retry=RETRY_MS)
