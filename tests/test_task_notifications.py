"""`notifications/tasks` on a 2026-07-28 `subscriptions/listen` stream that names task ids
(tasks extension, SEP-2663), on a real uvicorn server: the caller's own tasks only, each change
as `tasks/get` would show it, and no stream without the extension declared."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Header
from fastapi.responses import PlainTextResponse

from fastapi_mcp_routes import ToolContext, mcp_routes, mcp_tool
from tests.support.servers import serve
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S
from tests.test_review_resources import messages_of

pytestmark = pytest.mark.anyio

TASKS = "io.modelcontextprotocol/tasks"


def tasks_meta() -> dict[str, Any]:
    meta = stateless_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = {"extensions": {TASKS: {}}}
    return meta


def tasks_app() -> FastAPI:
    app = FastAPI()

    def caller(x_caller: Annotated[str, Header()] = "anyone") -> str:
        return x_caller

    @mcp_tool(task="optional", confirm=False)
    @app.post("/work", response_class=PlainTextResponse)
    async def work(ctx: Annotated[ToolContext, Depends()], steps: int = 2) -> str:
        await ctx.start_task()
        for step in range(1, steps + 1):
            await anyio.sleep(0.6)
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
        return "worked"

    app.include_router(mcp_routes(app, dependencies=[Depends(caller)], forward_headers=["x-caller"]))
    return app


async def start_task(http: httpx.AsyncClient, caller: str = "alice") -> str:
    request = stateless_request("tools/call", {"name": "work", "arguments": {"steps": 2}}, tasks_meta())
    answer = await http.post(
        "/mcp", json=request, headers=stateless_headers("tools/call", "work", **{"x-caller": caller})
    )
    result = answer.json()["result"]
    assert result["resultType"] == "task"
    return str(result["taskId"])


async def test_a_listening_stream_hears_each_change_of_the_callers_own_tasks_until_completed() -> None:
    with serve(tasks_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http:
            mine = await start_task(http, "alice")
            theirs = await start_task(http, "bob")
            listen = stateless_request(
                "subscriptions/listen", {"notifications": {"taskIds": [mine, theirs, "unknown"]}}, tasks_meta()
            )
            headers = stateless_headers("subscriptions/listen", **{"x-caller": "alice"})
            heard: list[dict[str, Any]] = []
            async with http.stream("POST", "/mcp", json=listen, headers=headers) as stream:
                async for message in messages_of(stream):
                    heard.append(message)
                    if message["params"].get("status") == "completed":
                        break
    acknowledged, *changes = heard
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"taskIds": [mine]}
    assert {change["method"] for change in changes} == {"notifications/tasks"}
    assert {change["params"]["taskId"] for change in changes} == {mine}
    assert "step 1 of 2" in [change["params"].get("statusMessage") for change in changes]
    assert changes[-1]["params"]["status"] == "completed"
    assert changes[-1]["params"]["result"]["content"] == [{"type": "text", "text": "worked"}]
    tag = acknowledged["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
    assert all(change["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == tag for change in changes)


async def test_listening_to_tasks_without_the_extension_declared_is_refused() -> None:
    with serve(tasks_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http:
            task_id = await start_task(http)
            listen = stateless_request("subscriptions/listen", {"notifications": {"taskIds": [task_id]}})
            refused = await http.post("/mcp", json=listen, headers=stateless_headers("subscriptions/listen"))
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


async def test_a_malformed_or_oversized_list_of_task_ids_is_refused_with_invalid_params() -> None:
    with serve(tasks_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http:
            answers = []
            for task_ids in ("one", [1, 2], [""], ["x"] * 65):
                listen = stateless_request(
                    "subscriptions/listen", {"notifications": {"taskIds": task_ids}}, tasks_meta()
                )
                answers.append(await http.post("/mcp", json=listen, headers=stateless_headers("subscriptions/listen")))
    assert [answer.status_code for answer in answers] == [400] * 4
    assert {answer.json()["error"]["code"] for answer in answers} == {-32602}
    assert "Limits.max_subscriptions" in answers[-1].json()["error"]["message"]
