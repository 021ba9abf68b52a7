"""Clients as a new user runs them, every timeout and option left at its default, against the
example app on a real uvicorn server: FastMCP with `fastmcp-tasks` and pydantic-ai with it
installed finish `export_notes` as a 2026-07-28 task (their polls send no `Mcp-Name`), and
openai-agents, whose requests time out after 5 s, samples `follow_notes` for the default window.

fastmcp-tasks 4.1.4 pins FastMCP 4.1.4, older than the test extra's, so those two clients get a
virtualenv of their own under `.tools/clients/` and run `tests/tasks_clients.py` there.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any, Final

import anyio
import httpx
import pytest
from agents.mcp import MCPServerStreamableHttp, MCPUtil
from agents.tool_context import ToolContext
from starlette.types import ASGIApp, Receive, Scope, Send

import example_app.main
from tests.support.machine import ROOT
from tests.support.servers import serve
from tests.support.venvs import client_python
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

HEADERS: Final = {"x-api-key": example_app.main.API_KEY}
# fastmcp-tasks 4.1.4 is the newest release and requires fastmcp-slim 4.1.4; pydantic-ai as the
# test extra pins it, which loads fastmcp-tasks by itself when it is installed.
TASKS_PACKAGES: Final = ("fastmcp-tasks==4.1.4", "fastmcp-slim[client]==4.1.4", "pydantic-ai-slim[mcp]==2.68.0")
CLIENT_RUN_S: Final = 60.0  # the script's run, its imports and the export's polls included
FEED_EVERY_S: Final = 0.5  # how often a note is written while the feed is sampled


class MethodLog:
    """The example app, noting the `Mcp-Method` header of each request it is sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.methods: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            sent = dict(scope["headers"]).get(b"mcp-method")
            if sent is not None:
                self.methods.append(sent.decode("latin-1"))
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, MethodLog]]:
    log = MethodLog(example_app.main.app)
    with serve(log) as url:
        yield url, log


def run_client(client: str, url: str) -> dict[str, Any]:
    python = client_python("fastmcp-tasks", TASKS_PACKAGES)
    script = ROOT / "tests" / "tasks_clients.py"
    done = subprocess.run(
        [str(python), str(script), client, f"{url}/mcp", json.dumps(HEADERS)],
        capture_output=True,
        text=True,
        timeout=CLIENT_RUN_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def exported() -> dict[str, Any]:
    notes = sorted(example_app.main.store.notes.values(), key=lambda note: note.id)
    return {"notes": len(notes), "titles": [note.title for note in notes]}


@pytest.mark.processes
def test_fastmcp_with_fastmcp_tasks_finishes_export_notes_as_a_task_with_typed_data(
    served: tuple[str, MethodLog],
) -> None:
    url, log = served
    log.methods.clear()
    report = run_client("fastmcp", url)
    assert "tasks/get" in log.methods  # the call became a task, and its polls were answered
    assert (report["type"], report["mapping"]) == ("NotesExport", False)  # typed from the outputSchema
    assert report["notes"] == exported()["notes"]
    assert all(f"## {title}" in report["markdown"] for title in exported()["titles"])
    assert report["structured"] == {"markdown": report["markdown"], "notes": report["notes"]}


@pytest.mark.processes
def test_a_pydantic_ai_agent_with_fastmcp_tasks_installed_gets_the_export_from_its_task(
    served: tuple[str, MethodLog],
) -> None:
    url, log = served
    log.methods.clear()
    report = run_client("pydantic-ai", url)
    assert "tasks/get" in log.methods
    assert report["seen"] == ["asked", "returned"]
    assert report["output"]["notes"] == exported()["notes"]


async def test_openai_agents_samples_follow_notes_within_its_default_request_timeout(
    served: tuple[str, MethodLog],
) -> None:
    """openai-agents waits 5 s for each answer (`client_session_timeout_seconds`); the stream's
    default window ends before, so a model that leaves `durationMs` out gets the frames."""
    url, _ = served
    created: list[int] = []
    with anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url, headers=HEADERS) as rest:
            try:
                async with (
                    MCPServerStreamableHttp({"url": f"{url}/mcp", "headers": HEADERS}) as server,
                    anyio.create_task_group() as writing,
                ):
                    [tool] = [tool for tool in await server.list_tools() if tool.name == "follow_notes"]
                    function = MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=False)

                    async def write_notes() -> None:
                        while True:
                            answer = await rest.post("/notes", json={"title": f"fed {len(created)}"})
                            created.append(answer.raise_for_status().json()["id"])
                            await anyio.sleep(FEED_EVERY_S)

                    writing.start_soon(write_notes)
                    context = ToolContext(
                        context=None, tool_name=function.name, tool_call_id="call", tool_arguments="{}"
                    )
                    output = await function.on_invoke_tool(context, "{}")
                    writing.cancel_scope.cancel()
            finally:
                for note_id in created:  # the export test counts on the notes it finds
                    await rest.delete(f"/notes/{note_id}")
    text = output["text"] if isinstance(output, dict) else output
    assert isinstance(text, str), output
    assert text.startswith("{"), text  # an error is openai-agents' sentence, not the window's JSON
    window = json.loads(text)
    assert (window["ended"], window["truncated"]) == (False, False)
    fed = [frame for frame in window["frames"] if "fed " in json.dumps(frame)]
    assert fed, window
