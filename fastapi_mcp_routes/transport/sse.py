"""Server-sent events as MCP sends them, framed by sse-starlette (DESIGN.md, decision 1).

Every JSON-RPC message is one `message` event. A resumable stream (2025-11-25) numbers its
events `<stream>.<seq>` and opens with a priming event that carries only an id and the retry
delay (spec 2025-11-25, basic/transports "Resumability and Redelivery").
"""

from __future__ import annotations

from typing import Final

from sse_starlette.event import ServerSentEvent

from fastapi_mcp_routes.wire import constants as c

SSE_HEADERS: Final = [
    (b"content-type", c.MEDIA_SSE.encode()),
    (b"cache-control", b"no-cache"),
    # Reverse proxies (nginx) would otherwise hold events back until the stream ends.
    (b"x-accel-buffering", b"no"),
]
# What clients wait before reconnecting, sent in each resumable stream's priming event.
RETRY_MS: Final = 1000
# Line feeds alone, as every SSE client reads them and as the spec's examples write them.
_SEP: Final = "\n"
KEEP_ALIVE_COMMENT: Final = ServerSentEvent(comment="keep-alive", sep=_SEP).encode()


def sse_event(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event carrying one JSON-RPC message."""
    return ServerSentEvent(data.decode(), event="message", id=event_id, sep=_SEP).encode()


def priming_event(stream: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, and the retry delay."""
    return ServerSentEvent("", id=f"{stream}.0", retry=RETRY_MS, sep=_SEP).encode()
