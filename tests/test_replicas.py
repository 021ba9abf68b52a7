"""Replicas: single-worker processes, each with its own memory, behind nginx configured by
docs/nginx.conf, which sends each request to the next; where an exchange must cross processes
for certain, the test addresses the replicas itself.

The replicas share the secret that seals session ids, requestState and confirmation tokens
(`FASTAPI_MCP_ROUTES_SECRET`). With Redis (`store=RedisStore...`) they also share what must be
shared: a client's answer to a question asked in another process, a cancellation of a call that
runs in another, the events of a stream resumed on another. Without a store, each of those
fails at once with an error that names `store=`, never a wait for a timeout.

Every flow runs against one process as both replicas first (behind the balancer, or addressed
twice), so a failure across processes is the deployment's, not the flow's.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import anyio
import httpx
import pytest
import redis.asyncio

from tests.support.cluster import RedisCluster
from tests.support.deployments import deployment_env
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, initialize, refusal, rpc, tool_call
from tests.support.nginx import Replicas, nginx, replicas_behind_nginx
from tests.support.processes import serve_processes
from tests.support.runs import (
    COLOUR,
    ELICITATION,
    WORKERS_APP,
    assert_all_succeeded,
    over_processes,
    sdk_confirmed_mutations,
    sdk_sessions,
    sdk_token_mutations,
    sessions_over_fresh_connections,
    stateless_rounds,
)
from tests.support.sentinel import sentinel_deployment
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

SESSIONS: Final = 25
CALLS: Final = 20
ONE_PROCESS_SESSIONS: Final = 5  # the flows against one process, to show they are sound
ASKING_SESSIONS: Final = 10  # SDK sessions whose calls ask the user: two orders and a question each
TOKEN_MUTATIONS: Final = 10  # orders confirmed with a token, by clients that cannot ask their user
CANCELLATIONS: Final = 5  # calls cancelled through the balancer, one after another
# How soon a deployment without a shared store must refuse what needs one.
STORE_ERROR_S: Final = 20.0
STORE_OPTION: Final = "store="
SESSION_HEADERS: Final = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
T = TypeVar("T")


@pytest.fixture(scope="module")
def one_process() -> Iterator[Replicas]:
    """One process as both replicas: every flow must work here, the balancer in front or not.
    It needs no secret of its own (with one and no store it would take itself for one of
    several, and not ask its client questions whose answers could reach another process)."""
    with serve_processes(WORKERS_APP, env=deployment_env(secret="")) as url, nginx(url, url) as balanced:
        yield Replicas((url, url), (), balanced)


@pytest.fixture(scope="module")
def replicas_without_store() -> Iterator[Replicas]:
    with replicas_behind_nginx(WORKERS_APP, deployment_env()) as deployment:
        yield deployment


@dataclass(frozen=True)
class SharedRedis:
    """The Redis the replicas share: the URL they are given, and the ports of its servers."""

    url: str
    ports: tuple[int, ...]


@pytest.fixture(scope="module", params=["standalone", "cluster", "sentinel"])
def shared_redis(request: pytest.FixtureRequest, redis_url: str) -> Iterator[SharedRedis]:
    """Every flow below runs on one Redis, on a Redis Cluster of three primaries, and on the
    primary that three Sentinels name (with its replica), each by the URL a team would set."""
    if request.param == "cluster":
        cluster: RedisCluster = request.getfixturevalue("cluster")
        yield SharedRedis(cluster.url.replace("redis://", "redis+cluster://"), tuple(cluster.ports))
    elif request.param == "sentinel":
        with sentinel_deployment() as running:
            url = f"redis+sentinel://{running.sentinels_value}/{running.service}/0"
            yield SharedRedis(url, tuple(running.servers))
    else:
        port = httpx.URL(redis_url).port
        assert port is not None
        yield SharedRedis(redis_url, (port,))


@pytest.fixture(scope="module")
def replicas_with_redis(shared_redis: SharedRedis) -> Iterator[Replicas]:
    with replicas_behind_nginx(WORKERS_APP, deployment_env(shared_redis.url)) as deployment:
        yield deployment


# -- exchanges that cross processes ------------------------------------------------------------


@dataclass
class Crossing:
    """What a client saw of a call one process runs while part of the exchange goes to
    another: the call's answer, if it came, its other messages, and every error on the way."""

    answer: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ended: bool = False  # the call's stream ended

    async def refused(self, response: httpx.Response, what: str) -> bool:
        """Note a refusal of `what`; whether it was one."""
        if response.is_success:
            return False
        await response.aread()
        self.errors.append(f"{what}: {response.status_code} {response.text[:300]}")
        return True

    def saw(self, message: dict[str, Any] | None) -> None:
        if message is None:
            return
        if "id" not in message or "method" in message:
            self.events.append(message)
            return
        self.answer = message
        reason = refusal(message)
        if reason is not None:
            self.errors.append(f"the call: {reason}")

    async def read_to_end(self, messages: AsyncIterator[dict[str, Any]]) -> None:
        async for message in messages:
            self.saw(message)
        self.ended = True

    def result(self) -> dict[str, Any]:
        """The call's successful result; fails the test with what was seen otherwise."""
        assert not self.errors, self.errors
        assert self.answer is not None, f"no answer; events: {self.events}"
        structured: dict[str, Any] = self.answer["result"]["structuredContent"]
        return structured


async def open_session_at(
    http: httpx.AsyncClient, base: str, capabilities: dict[str, Any] | None = None
) -> dict[str, str]:
    """Open a session on the process at `base`; the headers its later requests carry."""
    response = await http.post(f"{base}/mcp", json=initialize(capabilities=capabilities), headers=SESSION_HEADERS)
    assert response.status_code == 200, response.text
    return {**SESSION_HEADERS, "mcp-session-id": response.headers["mcp-session-id"]}


async def messages_of(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The JSON-RPC messages of a streamed answer as they come: its JSON, or its SSE events."""
    if response.headers.get("content-type", "").startswith("application/json"):
        await response.aread()
        yield response.json()
        return
    async for line in response.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])


async def answer_elsewhere(first: str, second: str) -> Crossing:
    """A session's call on `first` asks the user a question; the client answers on `second`."""
    crossing = Crossing()
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first, ELICITATION)
        async with http.stream("POST", f"{first}/mcp", json=tool_call("ask", request_id=5), headers=headers) as call:
            if await crossing.refused(call, "the call"):
                return crossing
            messages = messages_of(call)
            question = await anext(messages, None)
            if question is None or question.get("method") != "elicitation/create":
                crossing.saw(question)  # the call ended without asking
                return crossing
            reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": COLOUR}}
            if await crossing.refused(await http.post(f"{second}/mcp", json=reply, headers=headers), "the answer"):
                return crossing
            await crossing.read_to_end(messages)
    return crossing


async def cancel_elsewhere(first: str, second: str) -> Crossing:
    """A session's slow call runs on `first`; the client cancels it on `second`."""
    crossing = Crossing()
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first)
        call_message = tool_call("slow", request_id=7, progress_token="slow")
        async with http.stream("POST", f"{first}/mcp", json=call_message, headers=headers) as call:
            if await crossing.refused(call, "the call"):
                return crossing
            messages = messages_of(call)
            started = await anext(messages, None)  # its progress event: the route runs
            crossing.saw(started)
            if started is None or started.get("method") != "notifications/progress":
                return crossing
            cancel = rpc("notifications/cancelled", {"requestId": 7, "reason": "the user stopped it"}, None)
            cancelled = await http.post(f"{second}/mcp", json=cancel, headers=headers)
            if await crossing.refused(cancelled, "the cancellation"):
                return crossing
            await crossing.read_to_end(messages)
    return crossing


async def resume_elsewhere(first: str, second: str) -> Crossing:
    """A session's call on `first` streams two progress events; the client drops the stream
    after the first and resumes it on `second` with Last-Event-ID."""
    crossing = Crossing()
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first)
        call_message = tool_call("steps", request_id=9, progress_token="steps")
        async with http.stream("POST", f"{first}/mcp", json=call_message, headers=headers) as call:
            if await crossing.refused(call, "the call"):
                return crossing
            last_id = await read_to_first_message(call)  # then the connection drops
        if last_id is None:
            crossing.errors.append("the call's stream carried no event id")
            return crossing
        resume = {**headers, "accept": "text/event-stream", "last-event-id": last_id}
        async with http.stream("GET", f"{second}/mcp", headers=resume) as resumed:
            if await crossing.refused(resumed, "the resume"):
                return crossing
            await crossing.read_to_end(messages_of(resumed))
    return crossing


async def read_to_first_message(stream: httpx.Response) -> str | None:
    """Read a streamed answer up to its first JSON-RPC message; the id of the last event read."""
    last_id = None
    got_message = False
    async for line in stream.aiter_lines():
        if line.startswith("id: "):
            last_id = line[len("id: ") :]
        got_message = got_message or line.startswith("data: {")
        if got_message and not line:
            break
    return last_id


async def within(seconds: float, flow: Awaitable[T], what: str) -> T:
    """Await `flow`; fail the test with a sentence when it takes longer than `seconds`."""
    with anyio.move_on_after(seconds):
        return await flow
    pytest.fail(f"{what} did not end within {seconds} s")


async def slow_calls_cancelled(base: str) -> int:
    """How many calls of the slow tool the process at `base` saw cancelled."""
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        seen: int = (await http.get(f"{base}/process")).json()["slow_cancelled"]
        return seen


async def assert_answered(first: str, second: str) -> None:
    crossing = await within(WAIT_S, answer_elsewhere(first, second), "a call whose question was answered")
    assert crossing.result()["content"] == COLOUR


async def assert_cancelled(first: str, second: str) -> None:
    before = await slow_calls_cancelled(first)
    crossing = await within(WAIT_S, cancel_elsewhere(first, second), "a cancelled call")
    assert crossing.errors == []
    assert crossing.ended
    assert crossing.answer is None  # a cancelled call gets no answer
    assert await slow_calls_cancelled(first) == before + 1  # the route saw it


async def assert_resumed(first: str, second: str) -> None:
    crossing = await within(WAIT_S, resume_elsewhere(first, second), "a resumed stream")
    assert crossing.result()["steps"] == 2
    assert [event["params"]["progress"] for event in crossing.events] == [2]


async def assert_cancelled_through_the_balancer(replicas: Replicas, calls: int) -> None:
    """`calls` slow calls, one after another, each cancelled through the balancer: nginx turns
    per request, so the cancellation reaches the process that opened the session, and the call
    runs on the other (when there are two)."""
    processes = sorted(set(replicas.urls))

    async def cancelled_in_all() -> int:
        return sum([await slow_calls_cancelled(url) for url in processes])

    before = await cancelled_in_all()
    for _ in range(calls):
        crossing = await within(WAIT_S, cancel_elsewhere(replicas.balanced, replicas.balanced), "a cancelled call")
        assert (crossing.errors, crossing.ended, crossing.answer) == ([], True, None)
    assert await cancelled_in_all() == before + calls  # the routes saw it


async def assert_fails_fast_naming_the_store(flow: Awaitable[Crossing], what: str) -> None:
    crossing = await within(STORE_ERROR_S, flow, what)
    store_named = any(STORE_OPTION in error for error in crossing.errors)
    assert store_named, f"no error names {STORE_OPTION!r}: {crossing.errors or crossing}"


# -- one process, as both replicas -------------------------------------------------------------


async def test_one_process_behind_the_balancer_serves_sessions_on_fresh_connections(one_process: Replicas) -> None:
    tally = await sessions_over_fresh_connections(one_process.balanced, ONE_PROCESS_SESSIONS, CALLS)
    assert_all_succeeded(tally, processes=1)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_process_behind_the_balancer_serves_sdk_sessions(one_process: Replicas, mode: str) -> None:
    tally = await sdk_sessions(one_process.balanced, mode, ONE_PROCESS_SESSIONS, CALLS)
    assert_all_succeeded(tally, processes=1)


async def test_one_process_behind_the_balancer_serves_stateless_calls_and_confirmations(one_process: Replicas) -> None:
    assert_all_succeeded(await stateless_rounds(one_process.balanced, ONE_PROCESS_SESSIONS), processes=1)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_process_behind_the_balancer_confirms_with_the_user(one_process: Replicas, mode: str) -> None:
    tally, asked = await sdk_confirmed_mutations(one_process.balanced, mode, ONE_PROCESS_SESSIONS)
    assert_all_succeeded(tally, processes=1)
    assert asked == 3 * ONE_PROCESS_SESSIONS


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_one_process_behind_the_balancer_runs_mutations_confirmed_with_a_token(
    one_process: Replicas, mode: str
) -> None:
    assert_all_succeeded(await sdk_token_mutations(one_process.balanced, mode, ONE_PROCESS_SESSIONS), processes=1)


async def test_one_process_behind_the_balancer_cancels_calls(one_process: Replicas) -> None:
    await assert_cancelled_through_the_balancer(one_process, ONE_PROCESS_SESSIONS)


async def test_one_process_takes_the_answer_to_its_question(one_process: Replicas) -> None:
    await assert_answered(one_process.first, one_process.second)


async def test_one_process_cancels_a_call(one_process: Replicas) -> None:
    await assert_cancelled(one_process.first, one_process.second)


async def test_one_process_resumes_a_stream(one_process: Replicas) -> None:
    await assert_resumed(one_process.first, one_process.second)


# -- sharing the secret, without a store -------------------------------------------------------


async def test_without_a_store_an_answer_given_to_another_process_fails_fast(replicas_without_store: Replicas) -> None:
    flow = answer_elsewhere(replicas_without_store.first, replicas_without_store.second)
    await assert_fails_fast_naming_the_store(flow, "a question answered on another process")


async def test_without_a_store_a_cancellation_sent_to_another_process_fails_fast(
    replicas_without_store: Replicas,
) -> None:
    flow = cancel_elsewhere(replicas_without_store.first, replicas_without_store.second)
    await assert_fails_fast_naming_the_store(flow, "a call cancelled on another process")


async def test_without_a_store_a_resume_on_another_process_fails_fast(replicas_without_store: Replicas) -> None:
    flow = resume_elsewhere(replicas_without_store.first, replicas_without_store.second)
    await assert_fails_fast_naming_the_store(flow, "a stream resumed on another process")


# -- sharing the secret and a Redis store ------------------------------------------------------


@pytest.mark.redis
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_replicas_sharing_redis_serve_sdk_sessions(replicas_with_redis: Replicas, mode: str) -> None:
    tally = await sdk_sessions(replicas_with_redis.balanced, mode, SESSIONS, CALLS)
    assert_all_succeeded(tally, processes=2)


@pytest.mark.redis
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_replicas_sharing_redis_confirm_with_the_user(replicas_with_redis: Replicas, mode: str) -> None:
    tally, asked = await sdk_confirmed_mutations(replicas_with_redis.balanced, mode, ASKING_SESSIONS)
    assert_all_succeeded(tally, processes=2)
    assert asked == 3 * ASKING_SESSIONS


@pytest.mark.redis
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_replicas_sharing_redis_run_mutations_confirmed_with_a_token(
    replicas_with_redis: Replicas, mode: str
) -> None:
    tally = await over_processes(lambda: sdk_token_mutations(replicas_with_redis.balanced, mode, TOKEN_MUTATIONS), 2)
    assert_all_succeeded(tally, processes=2)


@pytest.mark.redis
async def test_replicas_sharing_redis_cancel_calls_through_the_balancer(replicas_with_redis: Replicas) -> None:
    await assert_cancelled_through_the_balancer(replicas_with_redis, CANCELLATIONS)


@pytest.mark.redis
async def test_replicas_sharing_redis_take_an_answer_given_to_the_other(replicas_with_redis: Replicas) -> None:
    await assert_answered(replicas_with_redis.first, replicas_with_redis.second)


@pytest.mark.redis
async def test_replicas_sharing_redis_cancel_a_call_from_the_other(replicas_with_redis: Replicas) -> None:
    await assert_cancelled(replicas_with_redis.first, replicas_with_redis.second)


@pytest.mark.redis
async def test_replicas_sharing_redis_resume_a_stream_on_the_other(replicas_with_redis: Replicas) -> None:
    await assert_resumed(replicas_with_redis.first, replicas_with_redis.second)


@pytest.mark.redis
async def test_replicas_sharing_redis_lose_no_answer_while_pubsub_connections_keep_dropping(
    replicas_with_redis: Replicas, shared_redis: SharedRedis
) -> None:
    # Redis drops the processes' pub/sub connections again and again (as over its output buffer limit, or
    # a proxy's idle timeout) while answers to questions cross processes: none is lost, and no
    # question waits past the run's bound (a lost answer would wait its 300 s).
    async def drop_pubsub_connections(stop: anyio.Event) -> int:
        dropped = 0
        admins = [redis.asyncio.Redis(port=port, decode_responses=True) for port in shared_redis.ports]
        try:
            while not stop.is_set():
                for admin in admins:
                    for client in await admin.client_list(_type="pubsub"):
                        if not client["name"].startswith("sentinel-"):  # the Sentinels' own stay
                            dropped += await admin.execute_command("CLIENT", "KILL", "ID", client["id"])
                await anyio.sleep(0.3)  # the faults' pace, not synchronisation
        finally:
            for admin in admins:
                await admin.aclose()
        return dropped

    stop = anyio.Event()
    dropped = 0
    async with anyio.create_task_group() as faults:

        async def run_faults() -> None:
            nonlocal dropped
            dropped = await drop_pubsub_connections(stop)

        faults.start_soon(run_faults)
        try:
            flow = sdk_confirmed_mutations(replicas_with_redis.balanced, "auto", ASKING_SESSIONS)
            tally, asked = await within(WAIT_S * 3, flow, "questions answered while connections drop")
            for _ in range(ASKING_SESSIONS):
                await assert_answered(replicas_with_redis.first, replicas_with_redis.second)
        finally:
            stop.set()
    assert dropped > 0
    assert_all_succeeded(tally, processes=2)
    assert asked == 3 * ASKING_SESSIONS
