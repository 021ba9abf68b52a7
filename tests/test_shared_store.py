"""A shared secret and a shared Redis (the docs' "Deploying with several workers or replicas"):
whatever process a request reaches, it is served as one process would serve it.

Two servers built by two `mcp_routes` calls stand for two processes: each has its own instance
and its own `RedisStore` on one real Redis, under one prefix. Real processes behind a balancer
are in tests/test_workers.py.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import anyio
import httpx
import pytest
import redis

from fastapi_mcp_routes import RedisStore
from fastapi_mcp_routes.options import Limits, Sessions
from fastapi_mcp_routes.server.sessions.manager import RECHECK_S
from tests.support.apps import NOTES, notes_app, observed, streaming_app
from tests.support.confirmation import pending_of
from tests.support.jsonrpc import HEADERS, call_tool, open_session, rpc, tool_call
from tests.support.redis import gone_redis_url
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages, read_to_first_message, sse_messages
from tests.support.stateless import post_stateless
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.redis

SECRET = "a-test-secret-shared-by-every-process-0123456789"
Pair = tuple[httpx.Client, httpx.Client]


def pair_of(make: object, redis_url: str) -> Iterator[Pair]:
    prefix = f"test-{secrets.token_hex(4)}:"
    with ExitStack() as stack:
        clients = []
        for _ in range(2):
            store = RedisStore.from_url(redis_url, prefix=prefix)
            url = stack.enter_context(serve(make(secret=SECRET, store=store)))  # type: ignore[operator]
            clients.append(stack.enter_context(httpx.Client(base_url=url, timeout=WAIT_S)))
        yield clients[0], clients[1]


@pytest.fixture
def streaming(redis_url: str) -> Iterator[Pair]:
    yield from pair_of(streaming_app, redis_url)


@pytest.fixture
def notes(redis_url: str) -> Iterator[Pair]:
    yield from pair_of(notes_app, redis_url)


def test_an_answer_that_reaches_the_other_process_reaches_the_waiting_call(streaming: Pair) -> None:
    first, second = streaming
    session = open_session(first, capabilities={"elicitation": {}})
    with first.stream("POST", "/mcp", json=tool_call("ask"), headers=session) as call:
        lines = call.iter_lines()
        question = next(iter_sse_messages(lines))
        reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"colour": "red"}}}
        assert second.post("/mcp", json=reply, headers=session).status_code == 202
        answer = next(iter_sse_messages(lines))
    assert answer["result"]["structuredContent"] == {"action": "accept", "content": {"colour": "red"}}


def test_a_cancellation_that_reaches_the_other_process_cancels_the_call(streaming: Pair) -> None:
    first, second = streaming
    observed.cancelled.clear()
    session = open_session(first)
    cancel = rpc("notifications/cancelled", {"requestId": 7}, request_id=None)
    with first.stream(
        "POST", "/mcp", json=tool_call("slow", request_id=7, progress_token="p"), headers=session
    ) as call:
        read_to_first_message(call)  # the route runs
        assert second.post("/mcp", json=cancel, headers=session).status_code == 202
        assert observed.cancelled.wait(WAIT_S)


def test_a_stream_is_resumed_by_the_other_process(streaming: Pair) -> None:
    first, second = streaming
    observed.gate.clear()
    observed.gated_done.clear()
    session = open_session(first)
    with first.stream("POST", "/mcp", json=tool_call("gated", progress_token="g"), headers=session) as call:
        seen = read_to_first_message(call)  # the connection drops after the first event
    observed.gate.set()
    assert observed.gated_done.wait(WAIT_S)
    resumed = second.get("/mcp", headers={**session, "accept": "text/event-stream", "last-event-id": seen or ""})
    events = sse_messages(resumed.text)
    assert events[0]["params"]["progress"] == 2
    assert events[1]["result"]["structuredContent"] == {"opened": True}


def test_a_session_deleted_in_one_process_is_gone_in_the_other(notes: Pair) -> None:
    first, second = notes
    session = open_session(first)
    call_tool(first, "list_notes", headers=session)  # the first process has checked it lately
    assert second.delete("/mcp", headers=session).status_code == 204
    # The end reaches the first process through publish/subscribe within milliseconds, and a
    # session checked lately is looked up again after RECHECK_S at the latest.
    deadline = time.monotonic() + 2 * RECHECK_S + WAIT_S / 10
    while (status := first.post("/mcp", json=rpc("tools/list", {}), headers=session).status_code) == 200:
        assert time.monotonic() < deadline, "the first process still serves a session deleted in the second"
    assert status == 404


def test_a_session_pushed_out_in_one_process_is_gone_in_the_other_at_once(redis_url: str) -> None:
    # Pushed out by a newer session of the same caller (max_per_caller=1) opened in the other.
    prefix = f"test-{secrets.token_hex(4)}:"
    options = {"secret": SECRET, "sessions": Sessions(max_per_caller=1)}
    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve(notes_app(store=RedisStore.from_url(redis_url, prefix=prefix), **options)))
            for _ in range(2)
        ]
        first, second = (stack.enter_context(httpx.Client(base_url=url, timeout=WAIT_S)) for url in urls)
        old = open_session(first)
        call_tool(first, "list_notes", headers=old)
        open_session(second)
        deadline = time.monotonic() + 2 * RECHECK_S + WAIT_S / 10
        while (status := first.post("/mcp", json=rpc("tools/list", {}), headers=old).status_code) == 200:
            assert time.monotonic() < deadline, "a session pushed out in one process lives on in the other"
    assert status == 404


def test_a_token_issued_by_one_process_runs_once_in_any(notes: Pair) -> None:
    first, second = notes
    NOTES.clear()
    pending = call_tool(first, "add_note", {"text": "z"}, headers=open_session(first))
    confirmed = {"text": "z", "confirmationToken": pending_of(pending)["token"]}
    ran = call_tool(second, "add_note", confirmed, headers=open_session(second))
    again = call_tool(first, "add_note", confirmed, headers=open_session(first))
    assert ran["structuredContent"] == {"added": "z"}
    assert "already used" in again["content"][0]["text"]
    assert NOTES == ["z"]


def test_a_log_level_set_in_one_process_holds_in_the_other(streaming: Pair) -> None:
    first, second = streaming
    session = open_session(first)
    assert "error" not in first.post("/mcp", json=rpc("logging/setLevel", {"level": "error"}), headers=session).json()
    with second.stream("POST", "/mcp", json=tool_call("chatty"), headers=session) as call:
        messages = list(iter_sse_messages(call.iter_lines()))
    levels = [message["params"]["level"] for message in messages if message.get("method") == "notifications/message"]
    assert levels == ["error"]


def test_the_endpoint_rate_limit_is_one_budget_for_every_process(redis_url: str) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve(
                    notes_app(
                        secret=SECRET,
                        store=RedisStore.from_url(redis_url, prefix=prefix),
                        limits=Limits(rate_limit="3/minute"),
                    )
                )
            )
            for _ in range(2)
        ]
        statuses = []
        for turn in range(4):
            with httpx.Client(base_url=urls[turn % 2], timeout=WAIT_S) as http:
                statuses.append(http.post("/mcp", json=rpc("initialize", _initialize()), headers=HEADERS).status_code)
    assert statuses == [200, 200, 200, 429]


def test_the_endpoint_rate_limit_on_a_redis_that_is_gone_is_answered_503() -> None:
    # The docs: "A Redis outage is answered 503 with Retry-After". The rate limit's counters live
    # in the store's Redis too: a Redis that is gone is the same outage for them.
    store = RedisStore.from_url(gone_redis_url())
    app = notes_app(secret=SECRET, store=store, limits=Limits(rate_limit="100/minute"))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=rpc("initialize", _initialize()), headers=HEADERS)
    assert response.status_code == 503, response.text
    assert response.headers.get("retry-after")
    assert "store" in response.json()["error"]["message"]


def test_a_tool_call_in_a_live_session_costs_at_most_one_redis_round_trip_a_second(notes: Pair, redis_url: str) -> None:
    # The docs: "A tool call in a live session costs one Redis round trip, the session check, and
    # none while that session was checked within the last second".
    first, _ = notes
    session = open_session(first)
    call_tool(first, "list_notes", headers=session)  # the scripts are loaded by now
    with redis_commands(redis_url) as sent:
        started = time.monotonic()
        for request_id in range(50):
            call_tool(first, "list_notes", headers=session, request_id=request_id)
        elapsed = time.monotonic() - started
    assert {command.split()[0] for command in sent} <= {"EVALSHA"}
    assert len(sent) <= math.ceil(elapsed / RECHECK_S) + 1


def test_a_cancellation_with_a_huge_id_is_not_sent_to_every_process(streaming: Pair, redis_url: str) -> None:
    first, _ = streaming
    session = open_session(first)
    huge = rpc("notifications/cancelled", {"requestId": "x" * 100_000}, request_id=None)
    short = rpc("notifications/cancelled", {"requestId": "x" * 10}, request_id=None)
    with redis_commands(redis_url, scripts=True) as sent:
        assert first.post("/mcp", json=huge, headers=session).status_code == 202
        assert first.post("/mcp", json=short, headers=session).status_code == 202
    published = [command for command in sent if command.startswith("PUBLISH")]  # from the publish script
    assert len(published) == 1
    assert len(published[0]) < 1000


@contextmanager
def redis_commands(redis_url: str, *, scripts: bool = False) -> Iterator[list[str]]:
    """The commands clients send Redis meanwhile (MONITOR): not those that set up a connection
    or keep one alive, nor (unless `scripts`) those its scripts run."""
    sent: list[str] = []
    end = f"ECHO end-{secrets.token_hex(4)}"
    client = redis.Redis.from_url(redis_url)

    def watch(monitor: Any) -> None:
        while (seen := monitor.next_command())["command"] != end:
            if scripts or seen["client_type"] != "lua":  # what a script runs is part of its one round trip
                sent.append(seen["command"])

    try:
        with client.monitor() as monitor:
            watcher = threading.Thread(target=watch, args=(monitor,), daemon=True)
            watcher.start()
            yield sent
            client.echo(end.split()[1])
            watcher.join(WAIT_S)
    finally:
        client.close()
    sent[:] = [command for command in sent if command.split()[0] not in {"PING", "ECHO", "HELLO", "CLIENT"}]


@pytest.mark.anyio
async def test_a_store_outage_is_an_error_answer_and_the_server_keeps_serving() -> None:
    # Nothing listens on port 1: every step of the store fails at once.
    store = RedisStore.from_url("redis://127.0.0.1:1/0")
    with serve(notes_app(secret=SECRET, store=store)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S) as http:
            with anyio.fail_after(WAIT_S):
                response = await http.post("/mcp", json=rpc("initialize", _initialize()), headers=HEADERS)
                second = await http.post("/mcp", json=rpc("initialize", _initialize()), headers=HEADERS)
    assert response.status_code == 503
    assert second.status_code == 503
    assert "store" in response.json()["error"]["message"]


def test_a_stateless_call_that_needs_a_store_that_is_gone_is_answered_503() -> None:
    # A gated mutation keeps a confirmation token in the store; with Redis gone, the 2026-07-28
    # answer is 503 with Retry-After (as a session-era request is), not a 200 carrying -32603.
    store = RedisStore.from_url(gone_redis_url())
    with serve(notes_app(secret=SECRET, store=store)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        response = post_stateless(http, "tools/call", {"name": "add_note", "arguments": {"text": "t"}})
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "2"
    assert "store" in response.json()["error"]["message"]


def _initialize() -> dict[str, object]:
    return {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
