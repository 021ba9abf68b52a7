"""The app the multi-process tests serve: `python -m uvicorn tests.workers_app:app`.

Imported by each uvicorn process (run from the project's root), never by a test module. Every
response says which process served it (`x-worker-pid`), and `GET /process` tells what the
calls running here saw, so a test can check where a call ran and how it ended.

The endpoint takes what several processes share from the environment: the secret that seals
session ids, requestState and confirmation tokens (`FASTAPI_MCP_ROUTES_SECRET`, read by
`mcp_routes` itself), and a Redis store when `FASTAPI_MCP_ROUTES_REDIS_URL` names one. A test
that waits for a stream's renewals shortens them with `WORKERS_APP_KEEP_ALIVE_S`.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi_mcp_routes import Limits, ToolContext, mcp_routes, mcp_tool

REDIS_URL_VARIABLE: Final = "FASTAPI_MCP_ROUTES_REDIS_URL"
KEEP_ALIVE_VARIABLE: Final = "WORKERS_APP_KEEP_ALIVE_S"
PID_HEADER: Final = b"x-worker-pid"
# Not synchronisation: how long the `steps` tool works between its two progress events, so a
# test can drop the stream in between and resume it elsewhere (either order is correct).
STEP_S: Final = 0.5

Context = Annotated[ToolContext, Depends()]


class WorkerPid:
    """Adds `x-worker-pid: <this process>` to every response (a plain ASGI middleware, so
    streams pass through untouched and a client's disconnect still reaches the endpoint)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.pid = str(os.getpid()).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_pid(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (PID_HEADER, self.pid)]}
            await send(message)

        await self.app(scope, receive, send_with_pid)


class Seen:
    """What the calls running in this process saw."""

    def __init__(self) -> None:
        self.orders = 0
        self.slow_started = 0
        self.slow_cancelled = 0


seen = Seen()


def shared_store() -> dict[str, Any]:
    """`store=` for `mcp_routes`: Redis when `FASTAPI_MCP_ROUTES_REDIS_URL` names one, else nothing."""
    url = os.environ.get(REDIS_URL_VARIABLE)
    if not url:
        return {}
    # Imported only when asked for, so the app serves one process wherever RedisStore is missing.
    from fastapi_mcp_routes import RedisStore

    return {"store": RedisStore.from_url(url)}


def limits() -> dict[str, Any]:
    """`limits=` for `mcp_routes`: a keep-alive interval (and so a stream's renewals) of
    `WORKERS_APP_KEEP_ALIVE_S` seconds when set, else the defaults."""
    keep_alive = os.environ.get(KEEP_ALIVE_VARIABLE)
    return {"limits": Limits(keep_alive_s=float(keep_alive))} if keep_alive else {}


app = FastAPI(title="Workers")
app.add_middleware(WorkerPid)
app.include_router(mcp_routes(app, **shared_store(), **limits()))


@mcp_tool()
@app.get("/notes/{note_id}")
def read_note(note_id: int) -> dict[str, Any]:
    """Read one note (read-only: runs without confirmation)."""
    return {"id": note_id, "text": f"note {note_id}", "pid": os.getpid()}


@mcp_tool()
@app.post("/orders", status_code=201)
def place_order(item: str, quantity: int = 1) -> dict[str, Any]:
    """Place an order (a mutation: runs once the call is confirmed)."""
    seen.orders += 1
    return {"order": seen.orders, "item": item, "quantity": quantity, "pid": os.getpid()}


@mcp_tool(confirm=False)
@app.post("/ask")
async def ask(ctx: Context) -> dict[str, Any]:
    """Ask the user for a colour, and say what they answered."""
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    answer = await ctx.elicit("Which colour?", schema)
    return {"action": answer.action, "content": answer.content, "pid": os.getpid()}


@mcp_tool()
@app.get("/slow")
async def slow(ctx: Context) -> dict[str, bool]:
    """Work until cancelled, after one progress event that says the work started."""
    seen.slow_started += 1
    try:
        await ctx.report_progress(1)
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        seen.slow_cancelled += 1
        raise
    return {"finished": True}  # pragma: no cover - never reached


@mcp_tool()
@app.get("/steps")
async def steps(ctx: Context) -> dict[str, Any]:
    """Two progress events a moment apart, then the answer."""
    await ctx.report_progress(1)
    await anyio.sleep(STEP_S)
    await ctx.report_progress(2)
    return {"steps": 2, "pid": os.getpid()}


@app.get("/process")
def process() -> dict[str, int]:
    """What this process saw (plain REST, not a tool)."""
    return {
        "pid": os.getpid(),
        "orders": seen.orders,
        "slow_started": seen.slow_started,
        "slow_cancelled": seen.slow_cancelled,
    }
