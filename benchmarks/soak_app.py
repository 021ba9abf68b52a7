"""The app `soak.py` attacks: a few tools behind `mcp_routes(app)` at its defaults.

uvicorn loads it with `--factory soak_app:create_app`. Every bound is the library's default:
what is measured is what a deployment gets without tuning. The app checks one key, the demo
key the legitimate client sends (`Limits.verify_credentials`): its caller ranks above anonymous
ones. Any other `x-api-key` is made up and counts as no key: its caller is anonymous, told
apart by its client address.

Route bodies are `async def` and do no work of their own: the large answer is built once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI
from fastapi.responses import StreamingResponse

from fastapi_mcp_routes import Limits, ToolContext, mcp_routes, mcp_tool

# About 1 MB of route response; a tool answer carries it twice (text and structuredContent),
# about 2 MB: the size of the review's "large answers".
LARGE_CHARACTERS: Final = 1_000_000
_LARGE: Final = {"text": "x" * LARGE_CHARACTERS}
DEMO_KEY: Final = "legit-key"  # soak.py's LEGIT_KEY
# About 0.5 MB of route response: a task's result carries it twice, about 1 MB, under
# Tasks.max_result_bytes.
_REPORT: Final = {"text": "r" * (LARGE_CHARACTERS // 2)}


def demo_key(headers: Mapping[str, str]) -> bool:
    """The one key the app knows."""
    return headers.get("x-api-key") == DEMO_KEY


# About 90 kB of notes: a list a REST client pages through, its tool answer about 180 kB.
NOTES: Final = [{"id": n, "title": f"note {n}", "body": "n" * 140} for n in range(500)]
# One frame of the sampled stream: about 1 MB of JSON, a line of its own.
FRAME: Final = json.dumps({"text": "f" * LARGE_CHARACTERS}).encode() + b"\n"
FRAME_EVERY_S: Final = 0.05


def create_app() -> FastAPI:
    """The attacked app: a gated mutation, a large read-only answer, a small one."""
    app = FastAPI(title="Soak", version="1.0.0")
    app.include_router(mcp_routes(app, limits=Limits(verify_credentials=demo_key)))
    app.add_api_route("/orders", place_order, methods=["POST"], summary="Place an order")
    app.add_api_route("/large", large, methods=["GET"], summary="A large document")
    app.add_api_route("/small", small, methods=["GET"], summary="A small answer")
    app.add_api_route("/notes", list_notes, methods=["GET"], summary="List the notes")
    app.add_api_route("/frames", frames, methods=["GET"], summary="A stream of large frames")
    app.add_api_route("/report", report, methods=["GET"], summary="A report, run as a task")
    return app


@mcp_tool()
async def place_order(item: str) -> dict[str, str]:
    """Place an order: a mutation, so each call must be confirmed first (the default)."""
    return {"placed": item}


@mcp_tool()
async def large() -> dict[str, str]:
    """A read-only tool whose answer is about 2 MB."""
    return _LARGE


@mcp_tool()
async def small() -> dict[str, bool]:
    """A read-only tool with a tiny answer: what the legitimate client calls."""
    return {"ok": True}


@mcp_tool()
async def list_notes() -> list[dict[str, Any]]:
    """Every note: a read-only tool whose answer is about 180 kB."""
    return NOTES


@mcp_tool(task="required")
async def report(ctx: Annotated[ToolContext, Depends()]) -> dict[str, str]:
    """A task at once, whose result is about 1 MB: kept for the client to fetch."""
    await ctx.start_task()
    return _REPORT


@mcp_tool(stream=True)
async def frames() -> StreamingResponse:
    """An endless NDJSON stream of frames of about 1 MB each, one every 50 ms."""

    async def generate() -> AsyncIterator[bytes]:
        while True:
            yield FRAME
            await asyncio.sleep(FRAME_EVERY_S)

    return StreamingResponse(generate(), media_type="application/x-ndjson")
