"""The app the failover test serves: `python -m uvicorn tests.failover_app:app`.

Imported by each uvicorn process (run from the project's root), never by a test module. Its
store is `RedisStore` on a client of the primary the sentinels name
(`FASTAPI_MCP_ROUTES_TEST_SENTINELS`), made as a team with Sentinel makes it; the processes
share the secret of `FASTAPI_MCP_ROUTES_SECRET` (read by `mcp_routes` itself). Its tools: a
read, a mutation the caller confirms with a token, a question to the user, and a short task.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, FastAPI

from fastapi_mcp_routes import Limits, RedisStore, Sessions, Tasks, ToolContext, mcp_routes, mcp_tool
from tests.support.sentinel import SENTINELS_VARIABLE, primary_client, sentinels_of

# Room for every session, token and task of a run: the test's clients are one anonymous caller,
# and a record pushed out to make room for newer ones would look lost in the failover.
ROOM: Final = 100_000
SESSIONS: Final = Sessions(max_sessions=ROOM, max_per_caller=ROOM)
LIMITS: Final = Limits(max_tokens=ROOM, max_tokens_per_caller=ROOM)
TASKS: Final = Tasks(max_per_caller=ROOM, max_tasks=ROOM)
# Not synchronisation: how long a task works once it is one, so some end during the failover.
TASK_S: Final = 0.3

Context = Annotated[ToolContext, Depends()]

store = RedisStore(primary_client(sentinels_of(os.environ[SENTINELS_VARIABLE])))
app = FastAPI(title="Failover")
app.include_router(mcp_routes(app, store=store, sessions=SESSIONS, limits=LIMITS, tasks=TASKS))


@mcp_tool()
@app.get("/notes/{note_id}")
def read_note(note_id: int) -> dict[str, Any]:
    """Read one note (read-only: runs without confirmation)."""
    return {"id": note_id, "pid": os.getpid()}


@mcp_tool()
@app.post("/orders", status_code=201)
def place_order(item: str) -> dict[str, Any]:
    """Place an order (a mutation: runs once the call is confirmed)."""
    return {"order": item, "pid": os.getpid()}


@mcp_tool(confirm=False)
@app.post("/ask")
async def ask(ctx: Context) -> dict[str, Any]:
    """Ask the user for a colour (its answer may reach another process: through the store's
    pub/sub), and say what they answered."""
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    answer = await ctx.elicit("Which colour?", schema)
    return {"content": answer.content}


@mcp_tool(task="optional")
@app.get("/compute")
async def compute(ctx: Context) -> dict[str, Any]:
    """Become a task at once, work a moment, and answer."""
    await ctx.start_task()
    await anyio.sleep(TASK_S)
    return {"computed": True, "pid": os.getpid()}
