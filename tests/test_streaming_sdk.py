"""Streaming in the session era, with the official SDK client against a real uvicorn server:
progress, logging, cancellation and elicitation travel on the call's own response stream."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from mcp import types

from fastapi_mcp_routes import Limits, Streaming, ToolContextError, mcp_routes, mcp_tool
from tests.support.apps import Context, observed, streaming_app
from tests.support.jsonrpc import open_session, tool_call
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.sse import read_to_first_message, sse_ids, sse_messages
from tests.support.waits import KEEP_ALIVE_S, QUIET_S, WAIT_S

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(streaming_app()) as url:
        yield url


async def test_progress_callbacks_see_increasing_progress(base_url: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("count", {"steps": 3}, progress_callback=on_progress)
    assert result.structured_content == {"steps": 3}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # logging is deprecated only in 2026-07-28
async def test_logging_callbacks_see_messages_at_the_set_level(base_url: str) -> None:
    logged: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logged.append(params)

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, logging_callback=on_log) as client:
            await client.set_logging_level("warning")
            result = await client.call_tool("chatty", {})
    assert not result.is_error
    assert [(entry.level, entry.data, entry.logger) for entry in logged] == [
        ("warning", {"said": "warning"}, "chatty"),
        ("error", {"said": "error"}, "chatty"),
    ]


async def test_a_cancelled_call_stops_the_route_and_gets_no_result(base_url: str) -> None:
    observed.cancelled.clear()
    started = anyio.Event()
    outcome: list[Any] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client, anyio.create_task_group() as tasks:

            async def call() -> None:
                outcome.append(await client.call_tool("slow", {}, progress_callback=on_progress))

            tasks.start_soon(call)
            await started.wait()
            tasks.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the call
        route_saw_it = await anyio.to_thread.run_sync(observed.cancelled.wait, WAIT_S)
    assert route_saw_it
    assert outcome == []


async def test_elicitation_round_trip_returns_the_clients_answer_to_the_route(base_url: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "teal"})

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask", {})
    assert asked == ["Which colour?"]
    assert result.structured_content == {"action": "accept", "content": {"colour": "teal"}}


async def test_sampling_round_trip_returns_the_clients_completion_to_the_route(base_url: str) -> None:
    requests: list[types.CreateMessageRequestParams] = []

    async def on_sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        requests.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Hi."), model="tiny-model"
        )

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, sampling_callback=on_sample) as client:
            result = await client.call_tool("complete", {"prompt": "Say hi"})
    assert result.structured_content == {"model": "tiny-model", "text": "Hi."}
    assert (requests[0].max_tokens, requests[0].system_prompt) == (20, "Be brief.")


async def test_elicitation_without_the_client_capability_is_a_clear_error_result(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("ask", {})
    assert result.is_error
    assert "did not declare the 'elicitation' capability" in result.content[0].text


async def test_a_call_that_sends_nothing_first_is_plain_json_and_sees_its_context(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("plain", {})
    assert result.structured_content == {"is_tool_call": True, "session": True}


def test_over_rest_the_context_is_inert_and_says_why_it_cannot_ask() -> None:
    with TestClient(streaming_app()) as http:
        assert http.get("/count", params={"steps": 2}).json() == {"steps": 2}
        assert http.get("/plain").json() == {"is_tool_call": False, "session": False}
        with pytest.raises(ToolContextError, match="only possible while the route runs as an MCP tool"):
            http.post("/ask")


def test_the_answer_switches_to_sse_only_when_the_call_sends_something_first(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        # No progress token: nothing goes out before the result.
        quiet = http.post("/mcp", json=tool_call("count"), headers=headers)
        streamed = http.post("/mcp", json=tool_call("count", progress_token="t1"), headers=headers)
    assert quiet.headers["content-type"] == "application/json"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["x-accel-buffering"] == "no"
    assert [message.get("method") for message in sse_messages(streamed.text)] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        None,
    ]


async def test_a_route_added_at_runtime_produces_list_changed_on_the_get_stream() -> None:
    app = streaming_app()
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with serve(app) as url:
        with anyio.fail_after(WAIT_S):
            async with mcp_client(url, message_handler=on_message) as client:
                before = {tool.name for tool in (await client.list_tools()).tools}

                @mcp_tool()
                @app.get("/late")
                def late() -> dict[str, str]:
                    return {"late": "yes"}

                await changed.wait()
                after = {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}
    assert after - before == {"late"}


def test_a_session_has_at_most_one_get_stream_and_delete_ends_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        listen = {**headers, "accept": "text/event-stream"}
        with http.stream("GET", "/mcp", headers=listen) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert http.get("/mcp", headers=listen).status_code == 409
            assert http.delete("/mcp", headers=headers).status_code == 204
            assert list(stream.iter_bytes()) == []  # the stream ends with its session


def test_a_dropped_stream_is_resumed_from_the_last_event_seen(base_url: str) -> None:
    observed.gate.clear()
    call = tool_call("gated", request_id=9, progress_token="p")
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        with http.stream("POST", "/mcp", json=call, headers=headers) as first:
            last_id = read_to_first_message(first)  # got the first progress event; now the connection drops
        assert last_id == "1.1"
        resume = {**headers, "accept": "text/event-stream", "last-event-id": last_id}
        with http.stream("GET", "/mcp", headers=resume) as resumed:
            observed.gate.set()
            lines = list(resumed.iter_lines())
    ids = sse_ids(lines)
    messages = sse_messages(lines)
    assert ids == ["1.2", "1.3"]
    assert messages[0]["params"]["progress"] == 2
    assert messages[1] == {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {
            "content": [{"type": "text", "text": '{"opened":true}'}],
            "structuredContent": {"opened": True},
        },
    }


def test_a_quiet_stream_gets_keep_alive_comments() -> None:
    call = tool_call("long", {"seconds": QUIET_S}, request_id=3, progress_token="k")
    app = streaming_app(limits=Limits(keep_alive_s=KEEP_ALIVE_S))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = open_session(http, version="2025-06-18")
        response = http.post("/mcp", json=call, headers=headers)
    assert ": keep-alive" in response.text
    assert response.text.rstrip().endswith('"structuredContent":{"done":true}}}')


async def test_the_sdk_client_resumes_a_stream_the_server_closed_early() -> None:
    app = FastAPI(title="Early close")
    app.include_router(mcp_routes(app, streaming=Streaming(max_stream_seconds=0.2)))

    @mcp_tool()
    @app.get("/patient")
    async def patient(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        # Not synchronisation: the route outlives the stream's 0.2 s, the behaviour under test;
        # the rest reaches the client on resume.
        await anyio.sleep(0.6)
        await ctx.report_progress(2)
        return {"patient": True}

    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    with serve(app) as url, anyio.fail_after(WAIT_S):
        async with mcp_client(url) as client:
            result = await client.call_tool("patient", {}, progress_callback=on_progress)
    assert result.structured_content == {"patient": True}
    assert seen == [1, 2]
