"""The app `soak.py` attacks: a few tools behind `mcp_routes(app)` at its defaults.

uvicorn loads it with `--factory soak_app:create_app`. Every bound is the library's default:
what is measured is what a deployment gets without tuning. The app checks one key, the demo
key the legitimate client sends (`Limits.verify_credentials`): its caller ranks above anonymous
ones. Any other `x-api-key` is made up and counts as no key: its caller is anonymous, told
apart by its client address.

Route bodies are `async def` and do no work of their own (the large answer is built once),
except `follow_notes`, a feed that sends a small change every 50 ms until its client leaves,
and the sync (`def`) routes `export_notes` (a task tool that holds its thread for a while) and
`sync_ping`, the REST route whose latency says whether threads are left for REST.
A note is a resource (`notes://{note_id}`) that `PUT /notes/{note_id}` writes, so its
subscribers are told; `progress` is a task that reports its steps, for the listening streams.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, FastAPI
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse

from fastapi_mcp_routes import Limits, ToolContext, mcp_resource, mcp_routes, mcp_tool

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
# How often the feed sends a change, and how long a sync export holds its thread.
FEED_EVERY_S: Final = 0.05
EXPORT_S: Final = 15.0


def create_app() -> FastAPI:
    """The attacked app: a gated mutation, a large read-only answer, a small one."""
    app = FastAPI(title="Soak", version="1.0.0")
    app.include_router(mcp_routes(app, limits=Limits(verify_credentials=demo_key)))
    app.add_api_route("/orders", place_order, methods=["POST"], summary="Place an order")
    app.add_api_route("/large", large, methods=["GET"], summary="A large document")
    app.add_api_route("/small", small, methods=["GET"], summary="A small answer")
    app.add_api_route("/notes", list_notes, methods=["GET"], summary="List the notes")
    app.add_api_route("/frames", frames, methods=["GET"], summary="A stream of large frames")
    app.add_api_route(
        "/feed/notes", follow_notes, methods=["GET"], response_class=EventSourceResponse, summary="Note changes"
    )
    app.add_api_route("/exports", export_notes, methods=["POST"], summary="Export all notes")
    app.add_api_route("/sync-ping", sync_ping, methods=["GET"], summary="A sync REST route")
    app.add_api_route("/notes/{note_id}", read_note, methods=["GET"], summary="A note")
    app.add_api_route("/notes/{note_id}", write_note, methods=["PUT"], summary="Write a note")
    app.add_api_route("/progress", progress, methods=["POST"], summary="A task that reports its steps")
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


async def follow_notes() -> AsyncIterable[dict[str, int]]:
    """Note changes as they happen: a client samples it for a window (`durationMs`)."""
    for number in range(1_000_000):
        yield {"change": number}
        await anyio.sleep(FEED_EVERY_S)


@mcp_tool(task="optional", read_only=True)
def export_notes() -> dict[str, bool]:
    """Export every note: sync work that holds a thread of the pool for a while."""
    time.sleep(EXPORT_S)
    return {"exported": True}


def sync_ping() -> dict[str, bool]:
    """A sync REST route: it needs a thread of the pool, as every `def` route does."""
    return {"ok": True}


_WRITTEN: dict[int, str] = {}


@mcp_resource("notes://{note_id}")
async def read_note(note_id: int) -> dict[str, str]:
    """One note; its subscribers hear each write to it."""
    return {"text": _WRITTEN.get(note_id, "")}


async def write_note(note_id: int, text: str = "") -> dict[str, str]:
    """Write a note (REST only): the writes the soak's REST writer sends."""
    _WRITTEN[note_id] = text
    return {"text": text}


@mcp_tool(task="optional", confirm=False)
async def progress(ctx: Annotated[ToolContext, Depends()], steps: int = 10, every_ms: int = 100) -> dict[str, int]:
    """Become a task at once and report `steps` steps, one every `every_ms` milliseconds."""
    await ctx.start_task()
    for step in range(1, steps + 1):
        await anyio.sleep(every_ms / 1000)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return {"steps": steps}
