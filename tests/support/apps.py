"""Apps the tests serve in process: one whose tools stream (with what its routes observed), and
a small notes app for deployments of several processes."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI

from fastapi_mcp_routes import ToolCalls, ToolContext, mcp_routes, mcp_tool
from tests.support.waits import WAIT_S

Context = Annotated[ToolContext, Depends()]


class Observed:
    """What the server-side routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.quiet_started = threading.Event()  # set as the `quiet` route starts
        self.gate = threading.Event()  # holds the `gated` route until a test opens it
        self.gated_done = threading.Event()  # set as the `gated` route returns


observed = Observed()


def streaming_app(**options: Any) -> FastAPI:
    """An app whose tools stream: progress, logs, questions, cancellation, long quiet calls;
    `options` go to `mcp_routes`."""
    app = FastAPI(title="Streaming")
    # What these routes do with their stream is the subject here, not confirming mutations.
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False), **options))

    @mcp_tool()
    @app.get("/count")
    async def count(ctx: Context, steps: int = 3) -> dict[str, int]:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, total=steps, message=f"step {step}")
        return {"steps": steps}

    @mcp_tool()
    @app.get("/chatty")
    async def chatty(ctx: Context) -> dict[str, bool]:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, {"said": level}, logger="chatty")
        return {"done": True}

    @mcp_tool()
    @app.get("/slow")
    async def slow(ctx: Context) -> dict[str, bool]:
        try:
            await ctx.report_progress(1)  # tells the test the route is running
            await anyio.sleep_forever()  # runs until the test cancels it
        except anyio.get_cancelled_exc_class():
            observed.cancelled.set()
            raise
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.get("/quiet")
    async def quiet() -> dict[str, bool]:
        observed.quiet_started.set()  # tells the test the route is running; the client hears nothing
        await anyio.sleep_forever()  # runs until the test cancels it
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        answer = await ctx.elicit("Which colour?", schema)
        return {"action": answer.action, "content": answer.content}

    @mcp_tool()
    @app.get("/gated")
    async def gated(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        opened = await anyio.to_thread.run_sync(observed.gate.wait, WAIT_S)
        await ctx.report_progress(2)
        observed.gated_done.set()
        return {"opened": opened}

    @mcp_tool()
    @app.post("/ask-twice")
    async def ask_twice(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        first = await ctx.elicit("First question?", schema)
        second = await ctx.elicit("Second question?", schema)
        return {"answers": [first.content, second.content]}

    @mcp_tool()
    @app.post("/broad")
    async def broad(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        try:
            answer = await ctx.elicit("Anything?", schema)
        except Exception as exc:  # a route's own broad handler must not swallow the question
            return {"swallowed": type(exc).__name__}
        return {"answer": answer.content}

    @mcp_tool()
    @app.post("/complete")
    async def complete(ctx: Context, prompt: str) -> dict[str, Any]:
        message = {"role": "user", "content": {"type": "text", "text": prompt}}
        result = await ctx.sample([message], max_tokens=20, system_prompt="Be brief.")
        return {"model": result.get("model"), "text": result.get("content", {}).get("text")}

    @mcp_tool()
    @app.get("/many")
    async def many(ctx: Context, count: int) -> dict[str, int]:
        for step in range(1, count + 1):
            await ctx.report_progress(step)
        return {"count": count}

    @mcp_tool()
    @app.get("/long")
    async def long(ctx: Context, seconds: float = 0.3) -> dict[str, bool]:
        await ctx.report_progress(1)
        # Simulated slow work, not synchronisation: the quiet stretch in which keep-alives go out.
        await anyio.sleep(seconds)
        return {"done": True}

    @mcp_tool()
    @app.get("/plain")
    async def plain(ctx: Context) -> dict[str, Any]:
        return {"is_tool_call": ctx.is_tool_call, "session": ctx.session_id is not None}

    return app


NOTES: list[str] = []  # what `notes_app`'s `add_note` added


def notes_app(**options: Any) -> FastAPI:
    """A small app for deployments of several processes: a read-only tool, a gated mutation and
    a tool whose route asks its client; `options` go to `mcp_routes`."""
    app = FastAPI(title="Notes")
    app.include_router(mcp_routes(app, **options))

    @mcp_tool(name="list_notes")
    @app.get("/notes")
    def list_notes() -> list[str]:
        return NOTES

    @mcp_tool(name="add_note")
    @app.post("/notes")
    def add_note(text: str) -> dict[str, str]:
        NOTES.append(text)
        return {"added": text}

    @mcp_tool(name="ask", confirm=False)
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Which colour?", {"type": "object", "properties": {}})
        return {"action": answer.action}

    return app
