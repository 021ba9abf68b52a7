"""Streaming in the session era, with the official SDK client against a real uvicorn server:
progress, logging, cancellation and elicitation travel on the call's own response stream."""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from fastapi_mcp_routes import ToolContext, ToolContextError, mcp_routes, mcp_tool
from fastapi_mcp_routes.transport import endpoint as _endpoint
from fastapi_mcp_routes.transport.response_stream import KeepAlive
from tests.conftest import serve

pytestmark = pytest.mark.anyio
WAIT_S = 20.0
Context = Annotated[ToolContext, Depends()]


class Observed:
    """What the server-side routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.elicited: list[Any] = []
        self.gate = threading.Event()  # holds the `gated` route until a test opens it
        self.gated_done = threading.Event()  # set as the `gated` route returns


observed = Observed()


def make_app() -> FastAPI:
    app = FastAPI(title="Streaming")
    # What these routes do with their stream is the subject here, not confirming mutations.
    app.include_router(mcp_routes(app, require_confirmation_for_mutations=False))

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
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            observed.cancelled.set()
            raise
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        answer = await ctx.elicit("Which colour?", schema)
        observed.elicited.append(answer.content)
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
    async def long(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        await anyio.sleep(0.3)  # a quiet stretch of a long call
        return {"done": True}

    @mcp_tool()
    @app.get("/plain")
    async def plain(ctx: Context) -> dict[str, Any]:
        return {"is_tool_call": ctx.is_tool_call, "session": ctx.session_id is not None}

    return app


def make_app_with_keep_alive_every(seconds: float, monkeypatch: pytest.MonkeyPatch) -> FastAPI:
    """`make_app()` whose endpoint sends keep-alive comments every `seconds`. Until `mcp_routes`
    takes the interval as an option, the endpoint's `KeepAlive` is made with it."""
    monkeypatch.setattr(_endpoint, "KeepAlive", functools.partial(KeepAlive, interval_s=seconds))
    return make_app()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


def raw_session(http: httpx.Client, version: str) -> dict[str, str]:
    """Open a session over plain HTTP; the headers to send on it."""
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    opened = http.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers=headers
    )
    return {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}


@asynccontextmanager
async def mcp_client(base_url: str, **options: Any) -> AsyncIterator[Client]:
    http = create_mcp_http_client()
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    async with http, Client(transport, mode="legacy", **options) as client:
        yield client


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
    with TestClient(make_app()) as http:
        assert http.get("/count", params={"steps": 2}).json() == {"steps": 2}
        assert http.get("/plain").json() == {"is_tool_call": False, "session": False}
        with pytest.raises(ToolContextError, match="only possible while the route runs as an MCP tool"):
            http.post("/ask")


def test_the_answer_switches_to_sse_only_when_the_call_sends_something_first(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = raw_session(http, "2025-11-25")

        def call(name: str, meta: dict[str, Any]) -> httpx.Response:
            params = {"name": name, "arguments": {}, "_meta": meta}
            return http.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers
            )

        quiet = call("count", {})  # no progress token: nothing goes out before the result
        streamed = call("count", {"progressToken": "t1"})
    assert quiet.headers["content-type"] == "application/json"
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["x-accel-buffering"] == "no"
    events = [line[len("data: ") :] for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert [httpx.Response(200, content=e).json().get("method") for e in events] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        None,
    ]


async def test_a_route_added_at_runtime_produces_list_changed_on_the_get_stream() -> None:
    app = make_app()
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
        headers = raw_session(http, "2025-11-25")
        listen = {**headers, "accept": "text/event-stream"}
        with http.stream("GET", "/mcp", headers=listen) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            assert http.get("/mcp", headers=listen).status_code == 409
            assert http.delete("/mcp", headers=headers).status_code == 204
            assert list(stream.iter_bytes()) == []  # the stream ends with its session


def test_a_dropped_stream_is_resumed_from_the_last_event_seen(base_url: str) -> None:
    observed.gate.clear()
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "gated", "arguments": {}, "_meta": {"progressToken": "p"}},
    }
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = raw_session(http, "2025-11-25")
        last_id = None
        with http.stream("POST", "/mcp", json=call, headers=headers) as first:
            got_message = False
            for line in first.iter_lines():
                if line.startswith("id: "):
                    last_id = line[len("id: ") :]
                got_message = got_message or line.startswith("data: {")
                if got_message and not line:
                    break  # the first progress event is whole; now the connection drops
        assert last_id == "1.1"
        resume = {**headers, "accept": "text/event-stream", "last-event-id": last_id}
        with http.stream("GET", "/mcp", headers=resume) as resumed:
            observed.gate.set()
            lines = list(resumed.iter_lines())
    ids = [line[len("id: ") :] for line in lines if line.startswith("id: ")]
    messages = [
        httpx.Response(200, content=line[len("data: ") :]).json() for line in lines if line.startswith("data: {")
    ]
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


def test_a_quiet_stream_gets_keep_alive_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "long", "arguments": {}, "_meta": {"progressToken": "k"}},
    }
    app = make_app_with_keep_alive_every(0.05, monkeypatch)
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = raw_session(http, "2025-06-18")
        response = http.post("/mcp", json=call, headers=headers)
    assert ": keep-alive" in response.text
    assert response.text.rstrip().endswith('"structuredContent":{"done":true}}}')


async def test_the_sdk_client_resumes_a_stream_the_server_closed_early() -> None:
    app = FastAPI(title="Early close")
    app.include_router(mcp_routes(app, max_stream_seconds=0.2))

    @mcp_tool()
    @app.get("/patient")
    async def patient(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        await anyio.sleep(0.6)  # outlives the stream; the rest reaches the client on resume
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
