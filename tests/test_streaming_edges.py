"""Edges of session-era streaming, over raw HTTP against a real uvicorn server: resuming after
the call ended, JSON-only clients, long streams, malformed cancellations and resumptions."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI

from fastapi_mcp_routes import mcp_routes
from fastapi_mcp_routes.transport import response_stream as _stream
from tests.helpers import (
    WAIT_S,
    observed,
    open_session,
    read_to_first_message,
    rpc,
    serve,
    sse_ids,
    sse_messages,
    streaming_app,
    tool_call,
)


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


def test_a_long_call_that_is_quiet_at_first_switches_to_sse_for_keep_alives(
    base_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_stream, "KEEP_ALIVE_S", 0.05)
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http, version="2025-06-18")
        response = http.post("/mcp", json=tool_call("long"), headers=headers)  # no progress token: silent
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.startswith(": keep-alive")
    assert sse_messages(response.text)[-1]["result"]["structuredContent"] == {"done": True}


class _Quiet:
    """Stands in for a pending answer: counts the keep-alives it is asked for."""

    def __init__(self) -> None:
        self.asked = 0

    def keep_alive_due(self) -> None:
        self.asked += 1


@pytest.mark.anyio
async def test_one_timer_keeps_every_pending_answer_alive_and_stops_when_none_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_stream, "KEEP_ALIVE_S", 0.02)
    keep_alive = _stream.KeepAlive()
    first, second, answered = _Quiet(), _Quiet(), _Quiet()
    for stream in (first, second, answered):
        keep_alive.watch(stream)  # type: ignore[arg-type]
    keep_alive.unwatch(answered)  # type: ignore[arg-type]
    with anyio.fail_after(WAIT_S):
        while not (first.asked and second.asked):
            await anyio.sleep(0.01)  # polls the condition itself, within the bound
    # The tick that asked the last of them has run to its end: with nothing pending it planned
    # no other, so no keep-alive can follow and there is nothing more to wait for.
    assert (first.asked, second.asked, answered.asked) == (1, 1, 0)  # they did not watch again
    assert dict(keep_alive._next_tick) == {}  # nothing pending: no tick planned


def test_keep_alive_holds_no_closed_loop() -> None:
    keep_alive = _stream.KeepAlive()
    answer = _Quiet()

    async def one_answer() -> None:
        keep_alive.watch(answer)  # type: ignore[arg-type]
        keep_alive.unwatch(answer)  # type: ignore[arg-type]

    loop = asyncio.new_event_loop()
    loop.run_until_complete(one_answer())
    loop.close()
    alive = weakref.ref(loop)
    del loop
    gc.collect()
    assert alive() is None
