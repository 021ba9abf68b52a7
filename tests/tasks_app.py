"""The app the task tests serve in several processes: `python -m uvicorn tests.tasks_app:app`.

Imported by each uvicorn process (run from the project's root), never by a test module. Its
tools run as tasks (2026-07-28 tasks extension) for a client that declares the extension; every
response says which process served it (`x-worker-pid`), and `GET /process` tells which labelled
calls started in this process, and how each ended, so a test can see where a task's route runs
and that a cancellation sent to another process reached it.

It takes what several processes share from the environment, as tests/workers_app.py does: the
secret (`FASTAPI_MCP_ROUTES_SECRET`) and a Redis store when `FASTAPI_MCP_ROUTES_REDIS_URL`
names one.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, FastAPI

from fastapi_mcp_routes import InputRequest, Tasks, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.options import DEFAULT_TASK_LEASE_S
from tests.workers_app import WorkerPid, shared_store

CONFIRM_SCHEMA: Final = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
REASON_SCHEMA: Final = {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]}

Context = Annotated[ToolContext, Depends()]

# What the labelled calls of this process did: started, cancelled, finished.
started: list[str] = []
cancelled: list[str] = []
finished: list[str] = []

app = FastAPI(title="Tasks")
app.add_middleware(WorkerPid)
# A small per-caller bound when the test asks for one (a dead process's tasks must not hold it).
per_caller = int(os.environ.get("TASKS_MAX_PER_CALLER", "16"))
# A short lease when the test asks for one: a dead process's tasks are found out that much sooner.
lease_s = float(os.environ.get("TASKS_LEASE_S", DEFAULT_TASK_LEASE_S))
app.include_router(mcp_routes(app, tasks=Tasks(max_per_caller=per_caller, lease_s=lease_s), **shared_store()))


@mcp_tool(task="optional")
@app.get("/stoppable")
async def stoppable(ctx: Context, label: str) -> dict[str, Any]:
    """Become a task at once, then work until cancelled."""
    started.append(label)
    await ctx.start_task()
    try:
        await anyio.sleep_forever()
    except anyio.get_cancelled_exc_class():
        cancelled.append(label)
        raise
    finally:
        finished.append(label)
    return {"finished": True}  # pragma: no cover - never reached


@mcp_tool(task="optional")
@app.get("/compute")
async def compute(seconds: float = 1.0) -> dict[str, Any]:
    """Work for `seconds`: a task once it runs longer than `Tasks.after_s`."""
    await anyio.sleep(seconds)
    return {"seconds": seconds, "pid": os.getpid()}


@mcp_tool(task="optional", confirm=False)
@app.post("/delete")
async def delete_file(ctx: Context, filename: str) -> dict[str, Any]:
    """Become a task, then ask the user to confirm the deletion and say why, both at once."""
    await ctx.start_task()
    answers = await ctx.ask(
        {
            "confirm": InputRequest.elicitation(f"Delete '{filename}'?", CONFIRM_SCHEMA),
            "reason": InputRequest.elicitation("Why?", REASON_SCHEMA),
        }
    )
    confirmed = (answers["confirm"].get("content") or {}).get("confirm") is True
    reason = (answers["reason"].get("content") or {}).get("reason")
    return {"deleted": confirmed, "reason": reason, "pid": os.getpid()}


@app.get("/process")
def process() -> dict[str, Any]:
    """What this process saw (plain REST, not a tool)."""
    return {"pid": os.getpid(), "started": started, "cancelled": cancelled, "finished": finished}
