"""The app `soak.py` attacks: three tools behind `mcp_routes(app)` at its defaults.

uvicorn loads it with `--factory soak_app:create_app`. Every bound is the library's default:
what is measured is what a deployment gets without tuning. `x-api-key` is one of the default
forwarded credential headers, so a caller that sends one is a credentialed (claimed) caller;
one that sends none is anonymous, told apart by its client address.

Route bodies are `async def` and do no work of their own: the large answer is built once.
A note is a resource (`notes://{note_id}`) that `PUT /notes/{note_id}` writes, so its
subscribers are told; `progress` is a task that reports its steps, for the listening streams.
"""

from __future__ import annotations

from typing import Annotated, Final

import anyio
from fastapi import Depends, FastAPI

from fastapi_mcp_routes import ToolContext, mcp_resource, mcp_routes, mcp_tool

# About 1 MB of route response; a tool answer carries it twice (text and structuredContent),
# about 2 MB: the size of the review's "large answers".
LARGE_CHARACTERS: Final = 1_000_000
_LARGE: Final = {"text": "x" * LARGE_CHARACTERS}


def create_app() -> FastAPI:
    """The attacked app: a gated mutation, a large read-only answer, a small one."""
    app = FastAPI(title="Soak", version="1.0.0")
    app.include_router(mcp_routes(app))
    app.add_api_route("/orders", place_order, methods=["POST"], summary="Place an order")
    app.add_api_route("/large", large, methods=["GET"], summary="A large document")
    app.add_api_route("/small", small, methods=["GET"], summary="A small answer")
    app.add_api_route("/notes/{note_id}", read_note, methods=["GET"], summary="A note")
    app.add_api_route("/notes/{note_id}", write_note, methods=["PUT"], summary="Write a note")
    app.add_api_route("/progress", progress, methods=["POST"], summary="A task that reports its steps")
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


_NOTES: dict[int, str] = {}


@mcp_resource("notes://{note_id}")
async def read_note(note_id: int) -> dict[str, str]:
    """One note; its subscribers hear each write to it."""
    return {"text": _NOTES.get(note_id, "")}


async def write_note(note_id: int, text: str = "") -> dict[str, str]:
    """Write a note (REST only): the writes the soak's REST writer sends."""
    _NOTES[note_id] = text
    return {"text": text}


@mcp_tool(task="optional", confirm=False)
async def progress(ctx: Annotated[ToolContext, Depends()], steps: int = 10, every_ms: int = 100) -> dict[str, int]:
    """Become a task at once and report `steps` steps, one every `every_ms` milliseconds."""
    await ctx.start_task()
    for step in range(1, steps + 1):
        await anyio.sleep(every_ms / 1000)
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return {"steps": steps}
