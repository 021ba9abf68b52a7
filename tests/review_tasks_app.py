"""The app tests/test_review_tasks.py serves in uvicorn processes: routes of tasks that misbehave.

Imported by each uvicorn process (run from the project's root), never by a test module. It takes
the secret and a Redis store from the environment, as tests/workers_app.py does, and the task
bounds from `REVIEW_MAX_PER_CALLER`, `REVIEW_MAX_TASKS`, `REVIEW_RESULT_BYTES_PER_CALLER` and
`REVIEW_KEPT_RESULT_BYTES`. It checks keys of the form
`Bearer checked-<account>` (`Limits.verify_credentials`); any other key is made up.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Annotated, Any, Final

import anyio
from fastapi import Depends, FastAPI, Request

from fastapi_mcp_routes import InputRequest, Limits, Tasks, ToolContext, mcp_routes, mcp_tool
from tests.workers_app import WorkerPid, shared_store

Context = Annotated[ToolContext, Depends()]
GOOD_TOKEN: Final = "good"
NAME_SCHEMA: Final = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

app = FastAPI(title="Review of tasks")
app.add_middleware(WorkerPid)
result_bytes_per_caller = int(os.environ.get("REVIEW_RESULT_BYTES_PER_CALLER", str(16 * 1024 * 1024)))
tasks = Tasks(
    max_per_caller=int(os.environ.get("REVIEW_MAX_PER_CALLER", "16")),
    max_tasks=int(os.environ.get("REVIEW_MAX_TASKS", "1000")),
    max_result_bytes=min(1024 * 1024, result_bytes_per_caller),
    max_result_bytes_per_caller=result_bytes_per_caller,
    max_kept_result_bytes=int(os.environ.get("REVIEW_KEPT_RESULT_BYTES", str(256 * 1024 * 1024))),
)


def signed_in(request: Request) -> str | None:
    """The principal of a caller sending `Authorization: Bearer good`; anyone else is anonymous."""
    return "alice" if request.headers.get("authorization") == f"Bearer {GOOD_TOKEN}" else None


def checked_key(headers: Mapping[str, str]) -> str | None:
    """The account of a `Bearer checked-<account>` key the app knows; a made-up key has none."""
    scheme, _, key = headers.get("authorization", "").partition(" ")
    return key.removeprefix("checked-") if scheme == "Bearer" and key.startswith("checked-") else None


limits = Limits(verify_credentials=checked_key)
app.include_router(mcp_routes(app, tasks=tasks, auth=signed_in, limits=limits, **shared_store()))


@mcp_tool(task="optional")
@app.get("/forever")
async def forever(ctx: Context) -> dict[str, Any]:
    """Become a task at once, then work until cancelled."""
    await ctx.start_task()
    await anyio.sleep_forever()
    return {}  # pragma: no cover - never reached


@mcp_tool(task="required")
@app.get("/report")
async def report(ctx: Context, size: int = 10_000) -> dict[str, str]:
    """A required task whose result carries `size` characters (twice: as text and as structure)."""
    await ctx.start_task()
    return {"text": "r" * size}


@mcp_tool(task="required")
@app.get("/forever-required")
async def forever_required(ctx: Context) -> dict[str, Any]:
    """A required task that works until cancelled."""
    await ctx.start_task()
    await anyio.sleep_forever()
    return {}  # pragma: no cover - never reached


@mcp_tool(task="optional")
@app.get("/deaf")
def deaf(seconds: float = 3.0) -> dict[str, Any]:
    """A sync route (a worker thread) that never hears a cancellation."""
    time.sleep(seconds)
    return {"slept": seconds}


@mcp_tool(task="optional")
@app.get("/chatty")
async def chatty(ctx: Context, times: int = 100_000) -> dict[str, Any]:
    """Report progress `times` times, as fast as it can."""
    await ctx.start_task()
    for done in range(times):
        await ctx.report_progress(done, total=times, message=f"step {done}")
    return {"reported": times}


@mcp_tool(task="optional")
@app.get("/huge")
async def huge(ctx: Context, kib: int = 4096) -> dict[str, Any]:
    """Return a result of about `kib` KiB."""
    await ctx.start_task()
    return {"blob": "x" * (kib * 1024)}


@mcp_tool(task="optional")
@app.get("/ask")
async def ask(ctx: Context, rounds: int = 1) -> dict[str, Any]:
    """Become a task, then ask for a name `rounds` times, one question after the other."""
    await ctx.start_task()
    names = []
    for _ in range(rounds):
        answers = await ctx.ask({"name": InputRequest.elicitation("Your name?", NAME_SCHEMA)})
        names.append((answers["name"].get("content") or {}).get("name"))
    return {"names": names}
