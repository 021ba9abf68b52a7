"""Several processes on one Redis when part of it fails: a process dies, Redis starts late, or
one process loses its connections to Redis for a moment while the others keep theirs.

Whatever fails, what a client holds must end or come back within a bound: a stream waits for
news that can still come, a claim or a listener outlives no process, and a client that reads
its answer gets it. Two kinds of servers stand for the processes: real uvicorn processes of
tests/workers_app.py, where a process is killed or started before Redis, and two servers in
this process (each its own `RedisStore`), where one reaches Redis through a `RedisLink` that
the test cuts.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

import anyio
import httpx
import pytest
import redis

from fastapi_mcp_routes import Limits, RedisStore
from tests.support.apps import observed, streaming_app
from tests.support.deployments import deployment_env
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, initialize, open_session, rpc, tool_call
from tests.support.machine import free_port
from tests.support.processes import Running, serve_process_group
from tests.support.redis import redis_link, redis_server
from tests.support.runs import WORKERS_APP
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages, read_to_first_message
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.redis

SECRET: Final = "a-test-secret-shared-by-every-process-0123456789"
SESSION_HEADERS: Final = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
# Streams write a keep-alive (and renew what they hold) this often, so a test reading one sees
# a line at least this often and can keep to its own deadline.
KEEP_ALIVE_S: Final = 1.0
KEEP_ALIVE_ENV: Final = {"WORKERS_APP_KEEP_ALIVE_S": str(KEEP_ALIVE_S)}


# -- two servers in this process, one of them behind a link to Redis the test cuts -------------


# A keep-alive interval (so a renewal of what a stream holds) long enough that a short cut of a
# link to Redis falls between two renewals.
QUIET_KEEP_ALIVE_S: Final = 8.0


RESUME_SETTLES_S: Final = 1.0


@contextmanager
def linked_pair(
    redis_url: str, link_url: str, keep_alive_s: float = KEEP_ALIVE_S
) -> Iterator[tuple[httpx.Client, httpx.Client, str]]:
    """Two streaming servers sharing a secret and one Redis under a prefix of their own: the
    first reaches Redis directly, the second through `link_url`; streams keep alive (and renew)
    every `keep_alive_s`. Yields their clients and the prefix."""
    prefix = f"test-{secrets.token_hex(4)}:"
    limits = Limits(keep_alive_s=keep_alive_s)
    with ExitStack() as stack:
        clients = []
        for url in (redis_url, link_url):
            store = RedisStore.from_url(url, prefix=prefix, socket_timeout=2.0, socket_connect_timeout=2.0)
            served = stack.enter_context(serve(streaming_app(secret=SECRET, store=store, limits=limits)))
            clients.append(stack.enter_context(httpx.Client(base_url=served, timeout=WAIT_S)))
        yield clients[0], clients[1], prefix


def wait_for(condition: Any, what: str) -> None:
    """Poll `condition` (another process's state has no other signal) for up to `WAIT_S`."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {WAIT_S} s")
        time.sleep(0.05)


def a_stream_is_awaited(redis_url: str, prefix: str) -> bool:
    """Whether some process listens for the next event of a resumable stream (a resume waits)."""
    with redis.Redis.from_url(redis_url) as client:
        return bool(client.pubsub_channels(f"{prefix}{{topics}}:stream/*"))


def a_stream_is_complete(redis_url: str, prefix: str) -> bool:
    """Whether a resumable stream under `prefix` holds its answer (its state is complete)."""
    with redis.Redis.from_url(redis_url) as client:
        for key in client.scan_iter(f"{prefix}{{sessions}}:session:*"):
            fields = client.hgetall(key)
            if any(name.startswith(b"s") and int(value) % 2 == 1 for name, value in fields.items()):
                return True
    return False


def messages_until(lines: Iterator[str], request_id: int, seconds: float) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body until the answer to `request_id`, the end of the
    body, or `seconds` (kept to within a keep-alive interval: a line comes at least that often)."""
    messages: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    for line in lines:
        messages.extend(iter_sse_messages([line]))
        if (messages and messages[-1].get("id") == request_id) or time.monotonic() > deadline:
            break
    return messages


def first_message(lines: Iterator[str]) -> dict[str, Any] | None:
    """Read an SSE body up to its first JSON-RPC message."""
    return next(iter_sse_messages(lines), None)


def test_a_resume_waiting_while_its_process_loses_redis_for_a_moment_still_gets_the_answer(redis_url: str) -> None:
    # The second process resumes a stream the first is sending. While it waits, its connections
    # to Redis drop for a moment (between two renewals of the stream, which come every
    # `QUIET_KEEP_ALIVE_S`), and the first keeps the stream's answer meanwhile: the wake-up
    # published then reaches nobody, as Redis pub/sub loses what a dropped connection missed.
    # Once the second is back, the answer must still come.
    with (
        redis_link(redis_url) as link,
        linked_pair(redis_url, link.url, QUIET_KEEP_ALIVE_S) as (first, second, prefix),
    ):
        observed.gate.clear()
        observed.gated_done.clear()
        session = open_session(first)
        with first.stream("POST", "/mcp", json=tool_call("gated", progress_token="g"), headers=session) as call:
            seen = read_to_first_message(call)  # the connection drops after the first event
        resume = {**session, "accept": "text/event-stream", "last-event-id": seen or ""}
        with second.stream("GET", "/mcp", headers=resume) as resumed:
            assert resumed.status_code == 200
            wait_for(lambda: a_stream_is_awaited(redis_url, prefix), "the resume's subscription")
            # The resume reads the log once it listens, and nothing tells the test that read is
            # done: give it this long before the cut, so the cut finds it waiting for news.
            time.sleep(RESUME_SETTLES_S)
            link.cut()
            observed.gate.set()
            assert observed.gated_done.wait(WAIT_S)
            wait_for(lambda: a_stream_is_complete(redis_url, prefix), "keeping the answer")
            link.restore()
            messages = messages_until(resumed.iter_lines(), 1, WAIT_S - QUIET_KEEP_ALIVE_S)
    answers = [message for message in messages if message.get("id") == 1]
    assert answers, f"the resume never delivered the answer the first process kept; it sent {messages}"
    assert answers[0]["result"]["structuredContent"] == {"opened": True}


def test_a_client_reading_its_answer_gets_it_when_redis_cannot_keep_it_for_a_resume(redis_url: str) -> None:
    # A streamed call in a 2025-11-25 session keeps each event for a resume. When Redis cannot
    # be reached as the answer goes out, the answer cannot be kept: the client that is reading
    # the stream must still get it (the route ran), not a stream cut off without an answer.
    with redis_link(redis_url) as link, linked_pair(redis_url, link.url) as (_, second, _):
        session = open_session(second)
        messages: list[dict[str, Any]] = []
        try:
            with second.stream(
                "POST", "/mcp", json=tool_call("long", request_id=3, progress_token="l"), headers=session
            ) as call:
                lines = call.iter_lines()
                started = first_message(lines)  # the progress event: the route runs
                assert started is not None, "the call sent no event"
                link.cut()  # the route answers in 0.3 s; Redis is out of reach by then
                messages.extend(messages_until(lines, 3, WAIT_S))
        except httpx.HTTPError as error:
            messages.append({"transport error": repr(error)})
        finally:
            link.restore()
    answers = [message for message in messages if message.get("id") == 3]
    assert answers, f"the client got no answer: {messages}"
    assert answers[0]["result"]["structuredContent"] == {"done": True}


# -- real processes ----------------------------------------------------------------------------


@contextmanager
def two_processes(env: dict[str, str]) -> Iterator[tuple[tuple[str, Running], tuple[str, Running]]]:
    with (
        serve_process_group(WORKERS_APP, env=env) as first,
        serve_process_group(WORKERS_APP, env=env) as second,
    ):
        yield first, second


def kill(running: Running) -> None:
    """End a process as a crash does: no cleanup of its own runs."""
    os.killpg(running.process.pid, signal.SIGKILL)


async def open_session_at(http: httpx.AsyncClient, base: str) -> dict[str, str]:
    response = await http.post(f"{base}/mcp", json=initialize(), headers=SESSION_HEADERS)
    assert response.status_code == 200, response.text
    return {**SESSION_HEADERS, "mcp-session-id": response.headers["mcp-session-id"]}


@pytest.mark.processes
@pytest.mark.anyio
async def test_a_resume_of_a_stream_whose_process_died_ends(redis_url: str) -> None:
    # The process sending a stream dies before the answer; the client resumes on another. No
    # process will ever add to that stream: the resume must end (the client then knows to call
    # again), not stay open on keep-alives for as long as the client waits.
    with two_processes({**deployment_env(redis_url), **KEEP_ALIVE_ENV}) as ((first, running), (second, _)):
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            session = await open_session_at(http, first)
            call = tool_call("steps", request_id=9, progress_token="steps")
            async with http.stream("POST", f"{first}/mcp", json=call, headers=session) as stream:
                seen = None
                async for line in stream.aiter_lines():
                    if line.startswith("id: "):
                        seen = line[len("id: ") :]
                    if line.startswith("data: {"):
                        break  # the first progress event: the second comes 0.5 s later
            kill(running)
            resume = {**session, "accept": "text/event-stream", "last-event-id": seen or ""}
            started = time.monotonic()
            ended = False
            async with http.stream("GET", f"{second}/mcp", headers=resume) as resumed:
                assert resumed.status_code == 200, await resumed.aread()
                with anyio.move_on_after(WAIT_S):
                    async for _ in resumed.aiter_lines():
                        pass
                    ended = True
    assert ended, (
        f"the resume of a stream nobody sends any more was still open after {time.monotonic() - started:.0f} s"
    )


@pytest.mark.processes
@pytest.mark.anyio
async def test_the_get_stream_of_a_session_is_not_held_by_a_process_that_died(redis_url: str) -> None:
    # A session has one GET stream at a time (a claim in Redis, renewed by the stream). When
    # the process holding it dies, the claim must lapse as its stream slots do, after a few
    # missed renewals; the client then opens the stream again on another process.
    with two_processes({**deployment_env(redis_url), **KEEP_ALIVE_ENV}) as ((first, running), (second, _)):
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            session = await open_session_at(http, first)
            listening = {**session, "accept": "text/event-stream"}
            async with http.stream("GET", f"{first}/mcp", headers=listening) as stream:
                assert stream.status_code == 200
                kill(running)
            statuses = []
            with anyio.move_on_after(WAIT_S):
                while not statuses or statuses[-1] == 409:
                    async with http.stream("GET", f"{second}/mcp", headers=listening) as again:
                        statuses.append(again.status_code)
                    await anyio.sleep(0.5)
    assert statuses[-1] == 200, (
        f"the session's GET stream was refused {statuses.count(409)} times over {WAIT_S} s after the process "
        f"holding it died: {statuses[-1]}"
    )


async def cancelled_elsewhere(first: str, second: str, session: dict[str, str], request_id: int) -> bool:
    """Start a slow call on `first`, cancel it on `second`; whether the call's stream ended soon."""
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        call = tool_call("slow", request_id=request_id, progress_token="slow")
        async with http.stream("POST", f"{first}/mcp", json=call, headers=session) as stream:
            lines = stream.aiter_lines()
            async for line in lines:
                if line.startswith("data: {"):
                    break  # its progress event: the route runs
            cancel = rpc("notifications/cancelled", {"requestId": request_id}, None)
            assert (await http.post(f"{second}/mcp", json=cancel, headers=session)).status_code == 202
            with anyio.move_on_after(1.0):
                async for _ in lines:
                    pass
                return True
    return False


# How long Redis is away after the processes start: their listener for cancellations sent to
# other processes has failed a few times by then. A scenario's length, not synchronisation.
REDIS_LATE_S: Final = 16.0
# Once Redis is back, the pub/sub connection returns within 2 s (store/redis/pubsub.py); the
# listener must be back soon after.
HEARD_AGAIN_WITHIN_S: Final = 8.0


@pytest.mark.processes
@pytest.mark.anyio
async def test_a_cancellation_reaches_another_process_soon_after_redis_starts_late() -> None:
    port = free_port()
    late_redis = f"redis://127.0.0.1:{port}/0"
    with two_processes(deployment_env(late_redis)) as ((first, _), (second, _)):
        await anyio.sleep(REDIS_LATE_S)
        with redis_server(port):
            back = time.monotonic()
            async with httpx.AsyncClient(timeout=WAIT_S) as http:
                session = await open_session_at(http, first)
            attempts = 0
            heard = False
            while not heard and time.monotonic() - back < HEARD_AGAIN_WITHIN_S:
                attempts += 1
                heard = await cancelled_elsewhere(first, second, session, request_id=attempts)
    assert heard, (
        f"{attempts} cancellations sent to another process in the {HEARD_AGAIN_WITHIN_S:.0f} s after Redis came "
        "back were answered 202 and lost"
    )


# Long enough for a process's pub/sub reader, which tries again less and less often while
# Redis cannot be reached, to wait between tries about as long as it ever does.
OUTAGE_S: Final = 4.0


def test_a_get_stream_opened_just_after_an_outage_is_answered_503_or_opened_never_500(redis_url: str) -> None:
    # Once Redis is back, the process's scripts work at once, while its pub/sub reader may still
    # be waiting to try again: a GET stream then cannot listen for its session's end. The client
    # must get 503 with Retry-After (as for any request the store's outage stops) until the
    # reader is back, then its stream; never a 500 with a traceback in the log.
    with (
        redis_link(redis_url) as link,
        linked_pair(redis_url, link.url) as (first, second, _prefix),
    ):
        session = open_session(first)
        listen_headers = {**session, "accept": "text/event-stream"}
        link.cut()
        time.sleep(OUTAGE_S)  # not synchronisation: how long the outage lasts
        link.restore()
        answers: list[tuple[int, str | None, str]] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            with second.stream("GET", "/mcp", headers=listen_headers) as listen:
                body = "" if listen.status_code == 200 else listen.read().decode()
                answers.append((listen.status_code, listen.headers.get("retry-after"), body))
            if listen.status_code == 200:
                break
    assert answers[-1][0] == 200, answers
    for status, retry_after, body in answers[:-1]:
        assert status == 503, answers
        assert retry_after, answers
        assert "store" in body, answers


def test_a_reply_sent_while_its_process_cannot_reach_redis_is_answered_503(redis_url: str) -> None:
    # A client's answer to a question is handed on through Redis to whichever process asked.
    # Sent while this process cannot reach Redis (its session checked within the last second,
    # from memory), the client must be told to send it again (503 with Retry-After), never
    # answered 500 with a traceback in the log.
    with (
        redis_link(redis_url) as link,
        linked_pair(redis_url, link.url) as (_, second, _prefix),
    ):
        session = open_session(second)
        assert second.post("/mcp", json=rpc("tools/list"), headers=session).status_code == 200
        link.cut()
        reply = {"jsonrpc": "2.0", "id": "s-question", "result": {"action": "accept", "content": {}}}
        answer = second.post("/mcp", json=reply, headers=session)
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"]
    assert "store" in answer.json()["error"]["message"]


def test_a_get_stream_that_ends_while_its_process_cannot_reach_redis_ends_cleanly(redis_url: str) -> None:
    # An open GET stream ends when its process loses Redis (its session's end cannot be heard).
    # What the stream held (its claim, its slots) cannot be given back then; they lapse on their
    # own. The client must see its stream end as a stream ends, not the connection torn down
    # mid-body by an exception (a traceback in the log).
    with (
        redis_link(redis_url) as link,
        linked_pair(redis_url, link.url) as (_, second, _prefix),
    ):
        session = open_session(second)
        with second.stream("GET", "/mcp", headers={**session, "accept": "text/event-stream"}) as listen:
            assert listen.status_code == 200
            link.cut()
            try:
                body = listen.read().decode()
            except httpx.RemoteProtocolError as torn:
                pytest.fail(f"the stream was torn down rather than ended: {torn}")
    assert not body or body.endswith("\n"), body  # whole events or lines only
