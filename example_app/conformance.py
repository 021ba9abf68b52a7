"""Fixtures for the official MCP conformance suite, as ordinary FastAPI routes.

Served as `example_app.conformance:app` by `scripts/conformance.sh`. Every fixture is a plain
route exposed through the library; none is a hand-written MCP handler. The scenarios that need
features not built yet are listed in `conformance/expected-failures.yml`.
"""

from __future__ import annotations

import base64
import struct

from fastapi import FastAPI, HTTPException, Response
from fastapi.responses import PlainTextResponse

from fastapi_mcp_routes import mcp_routes, mcp_tool

app = FastAPI(title="fastapi-mcp-routes conformance fixtures", version="1.0.0")
app.include_router(mcp_routes(app))

# A 1x1 red pixel.
RED_PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def silent_wav(samples: int = 8, rate: int = 8000) -> bytes:
    """A tiny mono 8-bit PCM WAV file of silence."""
    data = b"\x80" * samples
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate, 1, 8)
    return header + fmt + b"data" + struct.pack("<I", len(data)) + data


@mcp_tool()
@app.get("/fixtures/simple-text", response_class=PlainTextResponse)
def test_simple_text() -> str:
    """Returns a simple text block."""
    return "This is a simple text response for testing."


@mcp_tool()
@app.get("/fixtures/image", response_class=Response)
def test_image_content() -> Response:
    """Returns a 1x1 red PNG image."""
    return Response(RED_PIXEL_PNG, media_type="image/png")


@mcp_tool()
@app.get("/fixtures/audio", response_class=Response)
def test_audio_content() -> Response:
    """Returns a short WAV clip of silence."""
    return Response(silent_wav(), media_type="audio/wav")


@mcp_tool()
@app.get("/fixtures/error")
def test_error_handling() -> None:
    """Always fails, so a client can see how a tool error looks."""
    raise HTTPException(400, "This tool intentionally returns an error for testing")
