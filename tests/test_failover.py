"""A Sentinel failover under traffic: two single-worker processes of tests/failover_app.py share
a secret and `RedisStore` on the primary the sentinels name (one primary, one replica, three
sentinels: tests/support/sentinel.py); clients open sessions and call in them, confirm
mutations with tokens and start tasks on both while the primary is killed.

Every request during the switch is answered 503 with Retry-After, or with a JSON-RPC error that
names the store; never a 500, never a wait past the client's bound. Once the sentinels promote
the replica the processes recover on their own: new sessions, calls, confirmations and tasks
work again, and a question one process asks is answered through the other (the store's pub/sub
found the new primary), without a restart. The same with the primary frozen rather than killed
(a partition) is not run: see the comment above the test.

What was acknowledged before the kill is still there afterwards (a session still answers, a
used token is still used, a task is still known), unless the replica had not received it:
Redis replication is asynchronous. So the test asks the primary to `WAIT` for its replica just
before the kill: everything acknowledged before that must be there; what was acknowledged
between the `WAIT` and the kill may be lost, and the test prints how much was (and how long the
switch took: the kill to the first write through the app that succeeded), never asserts on it.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx
import pytest
import redis

from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from tests.support.confirmation import is_pending
from tests.support.deployments import deployment_env
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, final_message, initialize, refusal, tool_call
from tests.support.machine import HOST
from tests.support.processes import serve_processes
from tests.support.sentinel import (
    SENTINELS_VARIABLE,
    SentinelDeployment,
    sentinel_deployment,
    sentinel_missing,
)
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.redis, pytest.mark.processes]

FAILOVER_APP: Final = "tests.failover_app:app"
# The client's bound on one answer: past the store's own socket timeout (5 s), a request that
# has not been answered is hanging.
ANSWER_S: Final = 15.0
CLIENTS: Final = 4  # clients at once, alternating between the two processes
WARM_UP_S: Final = 1.5  # traffic acknowledged before the kill, not synchronisation
WAIT_REPLICA_MS: Final = 2000
TASKS_META: Final = stateless_meta({"extensions": {TASKS_EXTENSION: {}}})
STORE_WORD: Final = "store"
POLL_S: Final = 0.1
SESSION_HEADERS: Final = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
RETRY_AFTER: Final = "retry-after"
COLOUR: Final = {"colour": "teal"}
# How long a question may wait for an answer another process took: an answer lost on the way
# would leave it waiting out its 300 s.
ANSWERED_S: Final = 12.0
KILLED: Final = "killed"  # SIGKILL: its connections are refused at once
FROZEN: Final = "frozen"  # SIGSTOP, as a network partition: its connections answer nothing


@dataclass
class Acknowledged:
    """Something the app acknowledged as kept (a session, a used token, a task), and when."""

    kind: str
    key: str
    base: str
    at: float
    headers: dict[str, str] = field(default_factory=dict)  # a session's
    arguments: dict[str, Any] = field(default_factory=dict)  # a token's call


@dataclass(frozen=True, slots=True)
class Answer:
    """One request: when it was sent, its answer (if any came) and its result (if it succeeded)."""

    sent: float
    response: httpx.Response | None = None
    result: dict[str, Any] | None = None


@dataclass
class Traffic:
    """What the clients saw: every answer's verdict, what was acknowledged, and when the writes
    that succeeded were sent and answered."""

    verdicts: Counter[str] = field(default_factory=Counter)
    bad: list[str] = field(default_factory=list)
    acknowledged: list[Acknowledged] = field(default_factory=list)
    writes: list[tuple[float, float]] = field(default_factory=list)
    last_refusal: str = ""

    def judge(self, what: str, response: httpx.Response) -> dict[str, Any] | None:
        """Note one answer; its JSON-RPC result when it succeeded. A refusal for the store is
        503 with Retry-After, or a JSON-RPC error (or error result) that names the store."""
        if response.status_code == 503:
            self.last_refusal = f"{what}: 503 {response.text[:200]}"
            if RETRY_AFTER in response.headers:
                self.verdicts["503 with Retry-After"] += 1
            else:
                self.bad.append(f"{what}: 503 without Retry-After")
            return None
        message = final_message(response)
        reason = refusal(message) if message is not None else f"no JSON-RPC answer: {response.text[:200]}"
        if message is not None and is_pending(message.get("result", {})):
            reason = None  # a mutation's plan and token: what was asked for
        if response.status_code == 200 and reason is None and message is not None:
            self.verdicts["success"] += 1
            result: dict[str, Any] = message["result"]
            return result
        if response.status_code < 500 and reason is not None and STORE_WORD in reason.lower():
            self.verdicts["an error naming the store"] += 1
            self.last_refusal = f"{what}: {reason}"
            return None
        self.bad.append(f"{what}: {response.status_code} {reason}"[:300])
        return None

    def keep(self, kind: str, key: str, answer: Answer, base: str, **details: Any) -> None:
        now = time.monotonic()
        self.writes.append((answer.sent, now))
        self.acknowledged.append(Acknowledged(kind, key, base, now, **details))


class Clients:
    """The test's clients of the two processes, and what they saw."""

    def __init__(self, http: httpx.AsyncClient, bases: list[str]) -> None:
        self.http = http
        self.bases = bases
        self.traffic = Traffic()
        self._numbers = itertools.count()

    async def _post(self, what: str, base: str, message: dict[str, Any], headers: dict[str, str]) -> Answer:
        sent = time.monotonic()
        try:
            response = await self.http.post(f"{base}/mcp", json=message, headers=headers)
        except httpx.TimeoutException:
            self.traffic.bad.append(f"{what}: no answer within {ANSWER_S} s")
            return Answer(sent)
        except httpx.TransportError as error:
            self.traffic.bad.append(f"{what}: {type(error).__name__} {error}")
            return Answer(sent)
        return Answer(sent, response, self.traffic.judge(what, response))

    async def _stateless(
        self, what: str, base: str, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> Answer:
        headers = stateless_headers(method, params.get("name") or params.get("taskId"))
        return await self._post(what, base, stateless_request(method, params, meta), headers)

    async def open_session(self, base: str) -> bool:
        """Open a session, and call in it."""
        opened = await self._post("initialize", base, initialize(), SESSION_HEADERS)
        if opened.result is None or opened.response is None:
            return False
        session = {**SESSION_HEADERS, "mcp-session-id": opened.response.headers["mcp-session-id"]}
        called = await self._post("a call in a session", base, tool_call("read_note", {"note_id": 1}), session)
        if called.result is None:
            return False
        self.traffic.keep("session", session["mcp-session-id"], opened, base, headers=session)
        return True

    async def confirm_mutation(self, base: str) -> bool:
        """Ask for a mutation, then confirm it with its token."""
        arguments = {"item": f"tea-{next(self._numbers)}"}
        asked = await self._stateless("a mutation asked", base, "tools/call", order(arguments))
        if asked.result is None:
            return False
        token: str = asked.result["_meta"][PENDING_META_KEY]["token"]
        confirmed = {**arguments, "confirmationToken": token}
        done = await self._stateless("a mutation confirmed", base, "tools/call", order(confirmed))
        if done.result is None:
            return False
        if "order" not in done.result.get("structuredContent", {}):
            self.traffic.bad.append(f"a confirmed mutation did not run: {done.result!r}"[:300])
            return False
        self.traffic.keep("token", token, done, base, arguments=confirmed)
        return True

    async def start_task(self, base: str) -> str | None:
        """Start a task; its id."""
        started = await self._stateless("a task started", base, "tools/call", {"name": "compute"}, TASKS_META)
        if started.result is None:
            return None
        if started.result.get("resultType") != "task":
            # The store could not keep a task (during the switch): the call ran in the request.
            if started.result.get("structuredContent", {}).get("computed") is not True:
                self.traffic.bad.append(f"the call neither became a task nor ran: {started.result!r}"[:300])
            self.traffic.verdicts["a call answered in full, not as a task"] += 1
            return None
        task_id: str = started.result["taskId"]
        self.traffic.keep("task", task_id, started, base)
        return task_id

    async def task_status(self, base: str, task_id: str) -> str | None:
        found = await self._stateless("a task polled", base, "tasks/get", {"taskId": task_id}, TASKS_META)
        return None if found.result is None else str(found.result.get("status"))

    async def cycle(self, base: str) -> bool:
        """A session with a call, a confirmed mutation and a task; whether all three worked."""
        opened = await self.open_session(base)
        confirmed = await self.confirm_mutation(base)
        return await self.start_task(base) is not None and opened and confirmed

    async def run(self, client: int, stop: anyio.Event) -> None:
        for turn in itertools.count(client):
            if stop.is_set():
                return
            await self.cycle(self.bases[turn % len(self.bases)])

    async def lost(self, kept: Acknowledged) -> str | None:
        """What was answered about something acknowledged before the failover when it is not
        kept after it (`None` when it is): a session still answers, a used token is refused as
        used (its call does not run again), a task is still known."""
        if kept.kind == "session":
            call = tool_call("read_note", {"note_id": 2})
            answer = await self.http.post(f"{kept.base}/mcp", json=call, headers=kept.headers)
            return None if answer.status_code == 200 else f"{answer.status_code} {answer.text[:200]}"
        if kept.kind == "token":
            again = stateless_request("tools/call", order(kept.arguments))
            headers = stateless_headers("tools/call", "place_order")
            answer = await self.http.post(f"{kept.base}/mcp", json=again, headers=headers)
            return None if "already used" in (refusal(final_message(answer) or {}) or "") else answer.text[:200]
        polled = stateless_request("tasks/get", {"taskId": kept.key}, TASKS_META)
        answer = await self.http.post(f"{kept.base}/mcp", json=polled, headers=stateless_headers("tasks/get", kept.key))
        return None if "result" in (final_message(answer) or {}) else answer.text[:200]


async def answer_elsewhere(http: httpx.AsyncClient, asking: str, answering: str) -> dict[str, Any] | None:
    """A session's call on `asking` asks its user a question, answered on `answering`: the
    answer reaches the call through the store's pub/sub. The call's result; `None` when it was
    refused (the store still out of reach). Fails the test when an answer taken by `answering`
    does not reach the call within `ANSWERED_S`."""
    with anyio.move_on_after(ANSWERED_S) as waiting:
        return await _answer_elsewhere(http, asking, answering)
    assert not waiting.cancelled_caught, f"an answer taken by {answering} did not reach {asking} in {ANSWERED_S} s"
    return None


async def _answer_elsewhere(http: httpx.AsyncClient, asking: str, answering: str) -> dict[str, Any] | None:
    headers = {**SESSION_HEADERS, "accept": "text/event-stream, application/json"}
    opened = await http.post(f"{asking}/mcp", json=initialize(capabilities={"elicitation": {}}), headers=headers)
    if opened.status_code != 200:
        return None
    session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}
    async with http.stream("POST", f"{asking}/mcp", json=tool_call("ask", request_id=5), headers=session) as call:
        if call.status_code != 200:
            return None
        async for line in call.aiter_lines():
            if not line.startswith("data: {"):
                continue
            message = json.loads(line.removeprefix("data: "))
            if message.get("method") == "elicitation/create":
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept", "content": COLOUR}}
                answered = await http.post(f"{answering}/mcp", json=reply, headers=session)
                if answered.status_code >= 300:
                    return None
            elif message.get("id") == 5:
                result: dict[str, Any] | None = message.get("result")
                return result
    return None


def order(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": "place_order", "arguments": arguments}


@pytest.fixture
def deployment() -> Iterator[SentinelDeployment]:
    """A primary, its replica and three sentinels of the test's own (it kills the primary); the
    run fails, never skips, without them."""
    missing = sentinel_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with sentinel_deployment() as running:
        yield running


def replicate_then_stop(deployment: SentinelDeployment, how: str) -> tuple[float, float, int]:
    """Write a mark on the primary and `WAIT` until the replica has it (and so everything
    acknowledged before it), then at once kill the primary or freeze it (`how`). When the mark
    was sent, when the primary stopped, and its port."""
    port = deployment.primary_port()
    primary = redis.Redis(HOST, port, socket_timeout=WAIT_S)
    try:
        marked_at = time.monotonic()
        primary.set("failover-test:mark", b"1")
        replicated = primary.wait(1, WAIT_REPLICA_MS)
    finally:
        primary.close()
    assert replicated == 1, "the replica did not take the primary's writes"
    if how == KILLED:
        deployment.kill_primary()
    else:
        deployment.freeze_primary()
    return marked_at, time.monotonic(), port


async def recovered(clients: Clients, base: str) -> None:
    """Wait until the process at `base` serves a whole cycle, one of its tasks completes, and a
    question it asks is answered through the other process."""
    with anyio.move_on_after(WAIT_S):
        while not await clients.cycle(base):
            await anyio.sleep(POLL_S)
        task_id = None
        while task_id is None:
            task_id = await clients.start_task(base)
        while await clients.task_status(base, task_id) != "completed":
            await anyio.sleep(POLL_S)
        other = next(url for url in clients.bases if url != base)
        while (asked := await answer_elsewhere(clients.http, base, other)) is None:
            await anyio.sleep(POLL_S)
        assert asked["structuredContent"] == {"content": COLOUR}, asked
        return
    traffic = clients.traffic
    pytest.fail(f"{base} did not recover within {WAIT_S} s: {traffic.last_refusal}; {traffic.bad[-3:]}")


# A frozen primary (a partition) resumed later is not run here: requests through connections
# still open to it read and write its stale data until the sentinels make it a replica (Redis's
# split brain, about 6 s in this deployment), so some runs lose writes and some do not; a test
# of it could not tell a regression from luck. Parametrize with FROZEN to watch it (the docs'
# failover section says what it loses and what Redis offers against it).
@pytest.mark.parametrize("how", [KILLED])
async def test_a_failover_mid_traffic_answers_503_then_recovers_keeping_what_the_replica_had(
    deployment: SentinelDeployment, how: str
) -> None:
    env = {**deployment_env(), SENTINELS_VARIABLE: deployment.sentinels_value}
    with (
        serve_processes(FAILOVER_APP, env=env) as first,
        serve_processes(FAILOVER_APP, env=env) as second,
    ):
        async with httpx.AsyncClient(timeout=ANSWER_S) as http:
            clients = Clients(http, [first, second])
            for base in clients.bases:  # every flow works before the failover
                assert await clients.cycle(base), clients.traffic.bad
            stop = anyio.Event()
            async with anyio.create_task_group() as group:
                for client in range(CLIENTS):
                    group.start_soon(clients.run, client, stop)
                await anyio.sleep(WARM_UP_S)
                marked_at, stopped_at, old = await anyio.to_thread.run_sync(replicate_then_stop, deployment, how)
                await anyio.to_thread.run_sync(deployment.wait_for_new_primary, old)
                promoted_at = time.monotonic()
                for base in clients.bases:  # on their own: the processes are not restarted
                    await recovered(clients, base)
                recovered_at = time.monotonic()
                if how == FROZEN:  # back, as the primary it was, until the sentinels demote it
                    deployment.thaw(old)
                    await anyio.to_thread.run_sync(deployment.wait_until_replica, old)
                    for base in clients.bases:
                        await recovered(clients, base)
                stop.set()
            traffic = clients.traffic
            assert not traffic.bad, traffic.bad
            refused = traffic.verdicts["503 with Retry-After"] + traffic.verdicts["an error naming the store"]
            assert refused, f"no request met the failover: {traffic.verdicts}"

            before = [kept for kept in traffic.acknowledged if kept.at < marked_at]
            window = [kept for kept in traffic.acknowledged if marked_at <= kept.at < stopped_at]
            after = [kept for kept in traffic.acknowledged if kept.at >= stopped_at]
            lost_before = [(kept.kind, lost) for kept in before if (lost := await clients.lost(kept))]
            lost_in_window = [kept.kind for kept in window if await clients.lost(kept)]
            lost_after = [kept.kind for kept in after if await clients.lost(kept)]
    assert not lost_before, f"lost though the replica had them: {lost_before}"
    switch_s = min(answered for sent, answered in traffic.writes if sent > stopped_at) - stopped_at
    print(
        f"\nfailover, primary {how}: switch {switch_s:.2f} s (to the first write through the app), "
        f"sentinels {promoted_at - stopped_at:.2f} s, both processes serving every flow "
        f"{recovered_at - stopped_at:.2f} s; answers {dict(traffic.verdicts)}; "
        f"acknowledged before the WAIT {len(before)}, all kept; between the WAIT and the stop "
        f"{len(window)}, lost {len(lost_in_window)} {dict(Counter(lost_in_window))}; after the stop "
        f"{len(after)}, lost {len(lost_after)} {dict(Counter(lost_after))}"
    )
