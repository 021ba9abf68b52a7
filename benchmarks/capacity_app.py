"""The app `capacity.py` serves: one tool per kind of state the store keeps, on a `RedisStore`.

uvicorn loads it with `--factory capacity_app:create_app`; the Redis comes from the variable
`REDIS_URL_ENV` names, the secret from the library's own, FASTAPI_MCP_ROUTES_SECRET. Its bounds
are raised so that one caller (every request comes from 127.0.0.1) may hold the 10,000
sessions, the tokens and the 1,000 tasks the benchmark keeps; the defaults are per caller, far
below.

- `read_note`: a read, run at once: a tool call and nothing kept.
- `place_order`: a mutation: confirmed through the user when the client can ask, else answered
  with a single-use confirmation token (kept until used or expired).
- `ask`: a question to the user (elicitation), answered by the client's next POST.
- `steps`: `STEP_EVENTS` progress events: in a session, a stream whose events are kept for
  resumption.
- `compute`: a task at once (2026-07-28 tasks extension), whose result is kept for the poller.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI

from fastapi_mcp_routes import Limits, RedisStore, Sessions, Tasks, ToolContext, mcp_routes, mcp_tool

REDIS_URL_ENV: Final = "FMR_BENCH_REDIS_URL"
MAX_SESSIONS: Final = 20_000  # above the 10,000 the benchmark opens, so none is pushed out
MAX_TOKENS: Final = 20_000
MAX_TASKS: Final = 5_000
STEP_EVENTS: Final = 10  # progress events of one `steps` call
COLOUR_SCHEMA: Final = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}

Context = Annotated[ToolContext, Depends()]


def create_app() -> FastAPI:
    """The capacity app, its state in the Redis `REDIS_URL_ENV` names."""
    url = os.environ.get(REDIS_URL_ENV)
    if not url:
        raise ValueError(f"{REDIS_URL_ENV} must name the Redis the capacity app keeps its state in")
    app = FastAPI(title="Capacity")
    app.include_router(
        mcp_routes(
            app,
            store=RedisStore.from_url(url),
            sessions=Sessions(max_sessions=MAX_SESSIONS, max_per_caller=MAX_SESSIONS),
            limits=Limits(max_tokens=MAX_TOKENS, max_tokens_per_caller=MAX_TOKENS),
            tasks=Tasks(max_tasks=MAX_TASKS, max_per_caller=MAX_TASKS),
        )
    )
    app.add_api_route("/notes/{note_id}", read_note, methods=["GET"])
    app.add_api_route("/orders", place_order, methods=["POST"], status_code=201)
    app.add_api_route("/ask", ask, methods=["POST"])
    app.add_api_route("/steps", steps, methods=["GET"])
    app.add_api_route("/compute", compute, methods=["GET"])
    return app


@mcp_tool()
async def read_note(note_id: int) -> dict[str, Any]:
    """Read one note."""
    return {"id": note_id, "text": f"note {note_id}"}


@mcp_tool()
async def place_order(item: str, quantity: int = 1) -> dict[str, Any]:
    """Place an order (a mutation: runs once confirmed)."""
    return {"item": item, "quantity": quantity}


@mcp_tool(confirm=False)
async def ask(ctx: Context) -> dict[str, Any]:
    """Ask the user for a colour, and say what they answered."""
    answer = await ctx.elicit("Which colour?", COLOUR_SCHEMA)
    return {"action": answer.action, "content": answer.content}


@mcp_tool()
async def steps(ctx: Context) -> dict[str, int]:
    """Report `STEP_EVENTS` steps of progress, then answer."""
    for step in range(1, STEP_EVENTS + 1):
        await ctx.report_progress(step, STEP_EVENTS)
    return {"steps": STEP_EVENTS}


@mcp_tool(task="optional")
async def compute(ctx: Context, n: int) -> dict[str, Any]:
    """Become a task at once, then answer with a small result."""
    await ctx.start_task()
    return {"n": n, "square": n * n}
