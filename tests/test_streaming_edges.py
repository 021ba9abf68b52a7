"""Edges of session-era streaming, over raw HTTP against a real uvicorn server: resuming after
the call ended, JSON-only clients, long streams, malformed cancellations and resumptions."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI
from starlette.types import Message

from fastapi_mcp_routes import Limits, mcp_routes
from fastapi_mcp_routes.transport.response_stream import WATCH_AFTER_S, KeepAlive, ResponseStream
from fastapi_mcp_routes.transport.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS
from tests.support.apps import observed, streaming_app
from tests.support.jsonrpc import JSON_ONLY, open_session, rpc, tool_call
from tests.support.servers import serve
from tests.support.sse import read_to_first_message, sse_ids, sse_messages
from tests.support.waits import KEEP_ALIVE_S, QUIET_S, WAIT_S


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(streaming_app()) as url:
        yield url


def test_a_stream_is_resumed_even_after_its_call_has_ended(base_url: str) -> None:
    observed.gate.clear()
    observed.gated_done.clear()
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        with http.stream("POST", "/mcp", json=tool_call("gated", progress_token="g"), headers=headers) as first:
            read_to_first_message(first)  # saw event 1.1; the connection drops here
        observed.gate.set()
        assert observed.gated_done.wait(WAIT_S)
        resumed = http.get("/mcp", headers={**headers, "accept": "text/event-stream", "last-event-id": "1.1"})
    assert resumed.status_code == 200
    events = sse_messages(resumed.text)
    assert events[0]["params"]["progress"] == 2
    assert events[1]["result"]["structuredContent"] == {"opened": True}


def test_the_resume_of_a_stream_whose_call_ended_unanswered_ends() -> None:
    # A cancelled call sends no answer: its stream will never complete. A resume delivers what
    # was kept and ends (once its sender's lease is seen free), so the client knows to call again.
    observed.cancelled.clear()
    with (
        serve(streaming_app(limits=Limits(keep_alive_s=0.2))) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
    ):
        headers = open_session(http)
        slow = tool_call("slow", request_id=5, progress_token="s")
        with http.stream("POST", "/mcp", json=slow, headers=headers) as first:
            seen = read_to_first_message(first)  # the route runs; the connection drops here
            cancel = rpc("notifications/cancelled", {"requestId": 5}, request_id=None)
            assert http.post("/mcp", json=cancel, headers=headers).status_code == 202
            assert observed.cancelled.wait(WAIT_S)
        resumed = http.get("/mcp", headers={**headers, "accept": "text/event-stream", "last-event-id": seen or ""})
    assert resumed.status_code == 200
    assert sse_messages(resumed.text) == []  # nothing kept past what the client saw, and no answer


def test_event_ids_stay_unique_past_the_replay_buffer(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        response = http.post("/mcp", json=tool_call("many", {"count": 300}, progress_token="m"), headers=headers)
    ids = sse_ids(response.text)
    assert len(ids) == 302  # priming event, 300 progress events, the answer
    assert len(set(ids)) == len(ids)


def test_a_json_only_client_gets_a_clear_error_instead_of_a_question(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http, accept="application/json", capabilities={"elicitation": {}})
        result = http.post("/mcp", json=tool_call("ask"), headers=headers).json()["result"]
    assert result["isError"] is True
    assert "reads as SSE" in result["content"][0]["text"]


def test_elicitation_is_not_sent_in_a_mode_the_client_did_not_declare(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http, capabilities={"elicitation": {"url": {}}})
        response = http.post("/mcp", json=tool_call("ask"), headers=headers)
    assert response.headers["content-type"] == "application/json"  # nothing went out before the answer
    result = response.json()["result"]
    assert result["isError"] is True
    assert "'elicitation' capability with 'form' mode" in result["content"][0]["text"]


# -- a call cancelled while its POST waits for the answer ----------------------------------------

ENDS = ["notifications/cancelled", "DELETE"]


def cancelled_while_quiet(base_url: str, accept: str, end: str) -> httpx.Response:
    """The answer to a POST of the `quiet` call (it sends nothing), ended while it runs by
    `end`: the client's cancellation, or the session's end."""
    observed.quiet_started.clear()
    with (
        httpx.Client(base_url=base_url, timeout=WAIT_S) as http,
        httpx.Client(base_url=base_url, timeout=WAIT_S) as caller,
        ThreadPoolExecutor(1) as background,
    ):
        headers = open_session(http, accept=accept)
        answer = background.submit(caller.post, "/mcp", json=tool_call("quiet", request_id=5), headers=headers)
        assert observed.quiet_started.wait(WAIT_S)
        if end == "DELETE":
            assert http.delete("/mcp", headers=headers).status_code == 204
        else:
            cancel = rpc("notifications/cancelled", {"requestId": 5}, request_id=None)
            assert http.post("/mcp", json=cancel, headers=headers).status_code == 202
        return answer.result(timeout=WAIT_S)


@pytest.mark.parametrize("end", ENDS)
def test_a_json_only_client_whose_call_is_cancelled_is_answered_with_an_error(base_url: str, end: str) -> None:
    # A POST carrying a request is answered with JSON or SSE, never 202 (spec 2025-11-25,
    # basic/transports), and a client that reads no SSE cannot take an empty stream.
    response = cancelled_while_quiet(base_url, JSON_ONLY["accept"], end)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32800, "message": "Request cancelled."}}


@pytest.mark.parametrize("end", ENDS)
def test_a_client_that_reads_sse_whose_call_is_cancelled_gets_an_empty_stream(base_url: str, end: str) -> None:
    # The spec's own rule for a cancelled request (basic/utilities/cancellation): no response.
    response = cancelled_while_quiet(base_url, "application/json, text/event-stream", end)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert sse_messages(response.text) == []


def test_a_call_that_ends_with_its_session_keeps_no_stream_to_resume(base_url: str) -> None:
    # Nothing could resume it (the session is gone), so nothing is kept: no priming event.
    response = cancelled_while_quiet(base_url, "application/json, text/event-stream", "DELETE")
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == ""


@pytest.mark.parametrize("request_id", [[1], {"a": 1}, True, None])
def test_a_malformed_cancellation_is_ignored(base_url: str, request_id: Any) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        cancel = rpc("notifications/cancelled", {"requestId": request_id}, request_id=None)
        assert http.post("/mcp", json=cancel, headers=headers).status_code == 202
        assert http.post("/mcp", json=tool_call("plain"), headers=headers).status_code == 200


@pytest.mark.parametrize("last_event_id", ["\u00b2.1", "garbage", "99.1", "1.5"])
def test_a_last_event_id_that_names_no_stream_is_refused_plainly(base_url: str, last_event_id: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        raw = [(k.encode(), v.encode()) for k, v in {**headers, "accept": "text/event-stream"}.items()]
        # Sent as bytes: a Latin-1 digit like '²' passes str.isdigit() but not int().
        response = http.get("/mcp", headers=[*raw, (b"last-event-id", last_event_id.encode("latin-1"))])
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_a_second_request_with_an_id_still_running_is_refused(base_url: str) -> None:
    observed.gate.clear()
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        running = tool_call("gated", request_id=7, progress_token="d")
        with http.stream("POST", "/mcp", json=running, headers=headers) as first:
            read_to_first_message(first)  # the first call with id 7 is running
            duplicate = http.post("/mcp", json=tool_call("plain", request_id=7), headers=headers).json()
            observed.gate.set()
    assert duplicate["error"]["code"] == -32600


def test_background_tasks_of_endpoint_dependencies_run_for_every_post() -> None:
    ran: list[str] = []

    def audit(background: BackgroundTasks) -> None:
        background.add_task(ran.append, "audited")

    app = FastAPI()
    app.include_router(mcp_routes(app, dependencies=[Depends(audit)]))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = open_session(http)
        http.post("/mcp", json=rpc("notifications/initialized", request_id=None), headers=headers)
        http.post("/mcp", json=rpc("ping", request_id=2), headers=headers)
    assert ran == ["audited"] * 3


def test_a_long_call_that_is_quiet_at_first_switches_to_sse_for_keep_alives() -> None:
    app = streaming_app(limits=Limits(keep_alive_s=KEEP_ALIVE_S))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = open_session(http, version="2025-06-18")
        long = tool_call("long", {"seconds": QUIET_S})  # no progress token: silent
        response = http.post("/mcp", json=long, headers=headers)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.startswith(": keep-alive")
    assert sse_messages(response.text)[-1]["result"]["structuredContent"] == {"done": True}


# -- the response stream on its own, with a recording `send` -----------------------------------


class _Recorded:
    """An ASGI `send` that keeps what it is given and says when a keep-alive went out."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.kept_alive = anyio.Event()

    async def __call__(self, message: Message) -> None:
        self.messages.append(message)
        if message.get("body") == KEEP_ALIVE_COMMENT:
            self.kept_alive.set()

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages)


ANSWER = b'{"jsonrpc":"2.0","id":1,"result":{}}'


@pytest.mark.anyio
async def test_a_quick_answer_is_plain_json_and_starts_no_task() -> None:
    send = _Recorded()
    before = asyncio.all_tasks()
    async with ResponseStream(send, sse_allowed=True, json_allowed=True, keep_alive=KeepAlive(KEEP_ALIVE_S)) as stream:
        await stream.finish(ANSWER, answered_request=True)
        assert asyncio.all_tasks() == before
    assert send.messages[0]["headers"][0] == (b"content-type", b"application/json")
    assert send.body() == ANSWER


@pytest.mark.anyio
async def test_a_pending_answer_gets_keep_alives_and_its_helpers_end_with_it() -> None:
    send = _Recorded()
    before = asyncio.all_tasks()
    with anyio.fail_after(WAIT_S):
        async with ResponseStream(send, sse_allowed=True, json_allowed=True, keep_alive=KeepAlive(0.02)) as stream:
            await send.kept_alive.wait()
            await stream.finish(ANSWER, answered_request=True)
    assert asyncio.all_tasks() == before
    assert send.messages[0]["headers"] == list(SSE_HEADERS)
    assert send.body().startswith(KEEP_ALIVE_COMMENT)
    assert send.body().endswith(b"data: " + ANSWER + b"\n\n")


@pytest.mark.anyio
async def test_an_answer_cancelled_from_outside_leaves_no_helper_behind() -> None:
    send = _Recorded()
    before = asyncio.all_tasks()
    with anyio.fail_after(WAIT_S), anyio.CancelScope() as outside:
        async with ResponseStream(send, sse_allowed=True, json_allowed=True, keep_alive=KeepAlive(0.02)):
            await send.kept_alive.wait()
            outside.cancel()  # a server shutdown, a middleware's timeout
            await anyio.sleep_forever()
    assert asyncio.all_tasks() == before  # nothing is left to write to the ended response


@pytest.mark.anyio
async def test_a_client_leaving_a_pending_answer_is_noticed() -> None:
    left = anyio.Event()

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    class Listener:
        def client_left(self) -> None:
            left.set()

    stream = ResponseStream(_Recorded(), False, True, KeepAlive(), receive=receive, listener=Listener())
    with anyio.fail_after(WAIT_S):
        async with stream:
            await left.wait()


@pytest.mark.anyio
async def test_a_client_leaving_is_watched_for_only_once_asked_when_so_made() -> None:
    left = anyio.Event()

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    class Listener:
        def client_left(self) -> None:
            left.set()

    stream = ResponseStream(
        _Recorded(), False, True, KeepAlive(), receive=receive, listener=Listener(), watch_now=False
    )
    with anyio.fail_after(WAIT_S):
        async with stream:
            await anyio.sleep(WATCH_AFTER_S * 2)
            assert not left.is_set()  # nobody asked: nothing watches
            stream.watch_disconnect()
            await left.wait()


@pytest.mark.parametrize("interval_s", [0, -1.5])
def test_a_keep_alive_interval_must_be_positive(interval_s: float) -> None:
    with pytest.raises(ValueError, match=f"positive number of seconds, got {interval_s}"):
        KeepAlive(interval_s)
