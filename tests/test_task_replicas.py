"""Tasks (2026-07-28 tasks extension) across processes of tests/tasks_app.py.

With a shared secret and Redis, a task lives in the store and its route in the process that
took the `tools/call`: any process answers `tasks/get`, takes a `tasks/update` (in part, then
the rest) and a `tasks/cancel`, and reaches the route through the store's channel (or, when
that message is lost, at the route's next lease renewal); a task whose process died is reported
`failed` once its lease lapses, never `working` forever. Sharing only the secret, a task method
that reaches another process is a -32602 naming `store=`.

Replicas sit behind nginx configured by docs/nginx.conf, which sends each request to the next
process; the test is its only client, so which process took each request is known (each answer
names its process, `x-worker-pid`), and a test sends a request to the process that does not run
the task by timing it (`Balanced.away_from`).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx
import pytest
import redis.asyncio

from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from tests.support.deployments import deployment_env
from tests.support.jsonrpc import final_message
from tests.support.nginx import Replicas, replicas_behind_nginx
from tests.support.processes import serve_process_group, serve_processes
from tests.support.redis import redis_link
from tests.support.runs import ELICITATION, FRESH_CONNECTIONS, PID_HEADER, Tally, a_few_at_once
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.processes]

TASKS_APP: Final = "tests.tasks_app:app"
# Every request declares the extension, and a client that can ask its user.
META: Final = stateless_meta({**ELICITATION, "extensions": {TASKS_EXTENSION: {}}})
POLL_S: Final = 0.1
# The processes' `Tasks.lease_s`, short so that a dead process's tasks are found out soon.
LEASE_S: Final = 2.0
# A task whose process died is reported failed once its lease lapses: within LEASE_S of the kill.
LOST_WITHIN_S: Final = LEASE_S + 5
ROUNDS: Final = 3  # rounds of tasks over `uvicorn --workers 2`, until a worker polls another's task
TASKS_PER_ROUND: Final = 5


def tasks_env(redis_url: str = "") -> dict[str, str]:
    """What every process of a deployment of tests/tasks_app.py gets: the shared secret, a Redis
    or none, and the short lease."""
    return {**deployment_env(redis_url), "TASKS_LEASE_S": str(LEASE_S)}


def replicas(env: dict[str, str]) -> AbstractContextManager[Replicas]:
    """Two single-worker processes of tests/tasks_app.py behind nginx."""
    return replicas_behind_nginx(TASKS_APP, env)


@pytest.fixture(scope="module")
def replicas_with_redis(redis_url: str) -> Iterator[Replicas]:
    with replicas(tasks_env(redis_url)) as deployment:
        yield deployment


async def post(http: httpx.AsyncClient, base: str, method: str, params: dict[str, Any]) -> httpx.Response:
    """POST one 2026-07-28 request, with the routing headers (`Mcp-Name`: the tool or the task)."""
    headers = stateless_headers(method, params.get("name") or params.get("taskId"))
    return await http.post(f"{base}/mcp", json=stateless_request(method, params, META), headers=headers)


def result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of an answer; fails the test with the answer otherwise."""
    message = final_message(response)
    assert response.status_code == 200, response.text
    assert "result" in (message or {}), response.text
    assert message is not None
    found: dict[str, Any] = message["result"]
    return found


def error(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC error of an answer (never a server error); fails the test otherwise."""
    assert response.status_code < 500, response.text
    message = final_message(response)
    assert "error" in (message or {}), response.text
    assert message is not None
    found: dict[str, Any] = message["error"]
    return found


def acknowledged(response: httpx.Response) -> None:
    """An answer of `tasks/update` or `tasks/cancel`: an acknowledgement, no task fields."""
    ack = {key: value for key, value in result(response).items() if key != "_meta"}
    assert ack == {"resultType": "complete"}, response.text


def started_task(response: httpx.Response) -> str:
    created = result(response)
    assert (created["resultType"], created["status"]) == ("task", "working"), created
    task_id: str = created["taskId"]
    return task_id


async def seen(http: httpx.AsyncClient, base: str) -> dict[str, Any]:
    """What the process at `base` saw of its labelled calls (tasks_app `/process`)."""
    found: dict[str, Any] = (await http.get(f"{base}/process")).json()
    return found


async def until(check: Callable[[], Any], what: str, seconds: float = WAIT_S, every: float = POLL_S) -> Any:
    """Call `check` (a coroutine function) until it returns something true; that, within `seconds`."""
    with anyio.move_on_after(seconds):
        while not (found := await check()):
            await anyio.sleep(every)
        return found
    pytest.fail(f"{what} did not happen within {seconds} s")


@dataclass
class Balanced:
    """The test's requests through nginx, and the process that took each (its index in
    `replicas.urls`, known by the process id its answer names)."""

    http: httpx.AsyncClient
    replicas: Replicas
    upstreams: list[int] = field(default_factory=list)
    pids: list[str] = field(default_factory=list)  # of each process, in the order of its URL

    async def post(self, method: str, params: dict[str, Any]) -> httpx.Response:
        response = await post(self.http, self.replicas.balanced, method, params)
        if not self.pids:
            self.pids = [str((await seen(self.http, url))["pid"]) for url in self.replicas.urls]
        self.upstreams.append(self.pids.index(response.headers[PID_HEADER]))
        return response

    async def get(self, task_id: str) -> dict[str, Any]:
        return result(await self.post("tasks/get", {"taskId": task_id}))

    async def away_from(self, runner: int, task_id: str) -> None:
        """Make the next request reach the process that does not run the task (the balancer
        alternates): a `tasks/get` first when the last request did not reach the runner."""
        if self.upstreams[-1] != runner:
            await self.get(task_id)
        assert self.upstreams[-1] == runner

    async def until_status(self, task_id: str, status: str) -> dict[str, Any]:
        async def reached() -> dict[str, Any] | None:
            task = await self.get(task_id)
            assert task["status"] in ("working", "input_required", status), task
            return task if task["status"] == status else None

        found: dict[str, Any] = await until(reached, f"task status {status!r}")
        return found


# -- two replicas sharing the secret and Redis, behind the balancer ----------------------------


async def start_stoppable(client: Balanced, replicas: Replicas, label: str) -> tuple[str, int]:
    """Start a task that works until cancelled; its id and the upstream running its route."""
    task_id = started_task(await client.post("tools/call", {"name": "stoppable", "arguments": {"label": label}}))
    runner = client.upstreams[-1]
    assert label in (await seen(client.http, replicas.urls[runner]))["started"]
    return task_id, runner


@pytest.mark.redis
async def test_a_task_is_fetched_from_the_process_that_does_not_run_it(replicas_with_redis: Replicas) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        client = Balanced(http, replicas_with_redis)
        task_id, runner = await start_stoppable(client, replicas_with_redis, "fetched")
        task = await client.get(task_id)
        assert client.upstreams[-1] != runner
        assert (task["taskId"], task["status"]) == (task_id, "working"), task
        acknowledged(await client.post("tasks/cancel", {"taskId": task_id}))


@pytest.mark.redis
async def test_a_task_takes_answers_given_in_part_to_each_process(replicas_with_redis: Replicas) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        client = Balanced(http, replicas_with_redis)
        call = await client.post("tools/call", {"name": "delete_file", "arguments": {"filename": "a.txt"}})
        task_id, runner, runner_pid = started_task(call), client.upstreams[-1], call.headers[PID_HEADER]
        asked = await client.until_status(task_id, "input_required")
        assert set(asked["inputRequests"]) == {"confirm", "reason"}, asked

        await client.away_from(runner, task_id)
        partial = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        acknowledged(await client.post("tasks/update", {"taskId": task_id, "inputResponses": partial}))
        assert client.upstreams[-1] != runner
        still = await client.get(task_id)  # on the runner: the answered question is gone
        assert client.upstreams[-1] == runner
        assert (still["status"], set(still["inputRequests"])) == ("input_required", {"reason"}), still

        rest = {"reason": {"action": "accept", "content": {"reason": "old"}}}
        acknowledged(await client.post("tasks/update", {"taskId": task_id, "inputResponses": rest}))
        assert client.upstreams[-1] != runner
        done = await client.until_status(task_id, "completed")
        assert done["result"]["structuredContent"] == {"deleted": True, "reason": "old", "pid": int(runner_pid)}
        assert set(client.upstreams) == {0, 1}


@pytest.mark.redis
async def test_a_task_is_cancelled_from_the_process_that_does_not_run_it(replicas_with_redis: Replicas) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        client = Balanced(http, replicas_with_redis)
        task_id, runner = await start_stoppable(client, replicas_with_redis, "cancel-me")
        await client.away_from(runner, task_id)
        acknowledged(await client.post("tasks/cancel", {"taskId": task_id}))
        assert client.upstreams[-1] != runner
        assert (await client.get(task_id))["status"] == "cancelled"

        async def route_cancelled() -> bool:
            return "cancel-me" in (await seen(http, replicas_with_redis.urls[runner]))["cancelled"]

        await until(route_cancelled, "the cancellation of the route in the process running it")
        other = await seen(http, replicas_with_redis.urls[1 - runner])
        assert "cancel-me" not in other["started"], other
        assert (await client.get(task_id))["status"] == "cancelled"  # ended, it stays so


@pytest.mark.redis
async def test_a_task_whose_process_died_is_reported_failed_by_the_other(redis_url: str) -> None:
    with replicas(tasks_env(redis_url)) as deployment:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            client = Balanced(http, deployment)
            task_id, runner = await start_stoppable(client, deployment, "killed")
            survivor = deployment.urls[1 - runner]

            async def status_on_survivor() -> dict[str, Any]:
                return result(await post(http, survivor, "tasks/get", {"taskId": task_id}))

            # While its process runs, the task stays working past its lease: the lease is renewed.
            with anyio.move_on_after(LEASE_S + 1):
                while True:
                    assert (await status_on_survivor())["status"] == "working"
                    await anyio.sleep(0.5)

            os.killpg(deployment.running[runner].process.pid, signal.SIGKILL)
            killed = anyio.current_time()
            assert (await status_on_survivor())["status"] == "working"  # the lease has not lapsed yet

            async def failed() -> dict[str, Any] | None:
                task = await status_on_survivor()
                assert task["status"] in ("working", "failed"), task
                return task if task["status"] == "failed" else None

            task = await until(failed, "the end of a task whose process died", LOST_WITHIN_S, every=0.5)
            assert anyio.current_time() - killed <= LOST_WITHIN_S
            assert task["error"]["code"] == -32603, task
            assert "process running this task stopped" in task["error"]["message"], task
            assert task["statusMessage"] == task["error"]["message"]
            assert (await status_on_survivor())["status"] == "failed"


@pytest.mark.redis
async def test_the_tasks_of_a_process_that_died_no_longer_hold_their_callers_bound(redis_url: str) -> None:
    # Two tasks fill the caller's bound on one process, which is killed: once their leases have
    # lapsed, the other process ends them failed when the bound is next reached, and keeps the new
    # task (without it, the caller would be refused until their time to live ended).
    # A database of its own: the other tests' tasks of this caller (the same address, the same
    # secret) would otherwise count against its bound too.
    own_db = redis_url.rsplit("/", 1)[0] + "/11"
    async with redis.asyncio.Redis.from_url(own_db) as fresh_db:
        await fresh_db.flushdb()
    env = {**tasks_env(own_db), "TASKS_MAX_PER_CALLER": "2"}
    with serve_process_group(TASKS_APP, env=env) as (doomed, running), serve_processes(TASKS_APP, env=env) as other:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            held = []
            for label in ("first", "second"):
                call = {"name": "stoppable", "arguments": {"label": label}}
                held.append(started_task(await post(http, doomed, "tools/call", call)))
            os.killpg(running.process.pid, signal.SIGKILL)
            await anyio.sleep(LEASE_S + 1)  # the leases lapse: nothing to wait for but time

            async def kept() -> str | None:
                call = {"name": "compute", "arguments": {"seconds": 1.0}}
                answer = result(await post(http, other, "tools/call", call))
                return str(answer["taskId"]) if answer.get("resultType") == "task" else None

            fresh = await until(kept, "a task kept once the dead process's tasks ended", LOST_WITHIN_S, every=0.5)
            answers = [(await post(http, other, "tasks/get", {"taskId": task_id})).json() for task_id in held]
            done = await until(lambda: completed(http, other, fresh), "the new task's end")
    # One ended failed and, finished now, made room for the new one, as finished tasks do (which
    # one depends on whose lease lapsed first); the other is failed, by then or by this tasks/get.
    pushed_out = [answer["error"] for answer in answers if "error" in answer]
    failed = [answer["result"] for answer in answers if "result" in answer]
    assert [error["code"] for error in pushed_out] == [-32602]
    assert [task["status"] for task in failed] == ["failed"]
    assert "process running this task stopped" in failed[0]["statusMessage"]
    assert done["status"] == "completed"


async def completed(http: httpx.AsyncClient, base: str, task_id: str) -> dict[str, Any] | None:
    task = result(await post(http, base, "tasks/get", {"taskId": task_id}))
    return task if task["status"] == "completed" else None


@pytest.mark.redis
async def test_a_cancellation_lost_while_the_runner_was_cut_from_redis_still_ends_its_route(redis_url: str) -> None:
    # The runner reaches Redis through a link the test cuts: the cancellation's message is lost,
    # as any pub/sub message is while the connection is down; once the link is back the route
    # still ends (the runner reads its tasks again as it renews their leases).
    with (
        redis_link(redis_url) as link,
        serve_processes(TASKS_APP, env=tasks_env(link.url)) as runner,
        serve_processes(TASKS_APP, env=tasks_env(redis_url)) as other,
    ):
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            call = {"name": "stoppable", "arguments": {"label": "lost"}}
            task_id = started_task(await post(http, runner, "tools/call", call))
            link.cut()
            acknowledged(await post(http, other, "tasks/cancel", {"taskId": task_id}))
            link.restore()
            assert result(await post(http, other, "tasks/get", {"taskId": task_id}))["status"] == "cancelled"

            async def route_cancelled() -> bool:
                return "lost" in (await seen(http, runner))["cancelled"]

            await until(route_cancelled, "the end of the route of a task cancelled while its process was cut off")


# -- two replicas sharing only the secret ------------------------------------------------------


async def test_without_a_store_a_task_asked_of_another_process_names_the_store() -> None:
    with replicas(tasks_env()) as deployment:
        first, second = deployment.urls
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            call = {"name": "stoppable", "arguments": {"label": "alone"}}
            task_id = started_task(await post(http, first, "tools/call", call))
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                params: dict[str, Any] = {"taskId": task_id}
                if method == "tasks/update":
                    params["inputResponses"] = {}
                refused = error(await post(http, second, method, params))
                assert refused["code"] == -32602, (method, refused)
                assert "store=" in refused["message"], (method, refused)
            assert result(await post(http, first, "tasks/get", {"taskId": task_id}))["status"] == "working"
            acknowledged(await post(http, first, "tasks/cancel", {"taskId": task_id}))

            async def route_cancelled() -> bool:
                return "alone" in (await seen(http, first))["cancelled"]

            await until(route_cancelled, "the cancellation of the route")


# -- uvicorn --workers 2, sharing the secret and Redis -----------------------------------------


async def task_polled_to_its_end(http: httpx.AsyncClient, base: str, tally: Tally) -> int:
    """Start a task at `base` and poll it there until it ends, noting each answer in `tally`;
    how many polls a process other than the one running it answered."""
    crossed = 0
    created = await post(http, base, "tools/call", {"name": "compute", "arguments": {"seconds": 1}})
    task = tally.note(created)
    if task is None or task.get("resultType") != "task":
        tally.failed(f"no task: {task!r}")
        return crossed
    runner = created.headers[PID_HEADER]
    while task["status"] == "working":
        await anyio.sleep(0.2)
        polled = await post(http, base, "tasks/get", {"taskId": task["taskId"]})
        crossed += polled.headers.get(PID_HEADER) != runner
        task = tally.note(polled) or {"status": "refused"}
    if task["status"] != "completed" or task["result"]["structuredContent"]["pid"] != int(runner):
        tally.failed(f"the task ended {task['status']}: {task!r}")
    return crossed


@pytest.mark.redis
async def test_replicas_sharing_redis_complete_tasks_polled_through_nginx(replicas_with_redis: Replicas) -> None:
    tally = Tally()
    crossed = 0  # polls a process answered for a task the other runs

    async def one_task(http: httpx.AsyncClient) -> None:
        nonlocal crossed
        crossed += await task_polled_to_its_end(http, replicas_with_redis.balanced, tally)

    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        await a_few_at_once(lambda: one_task(http), TASKS_PER_ROUND, tally)
    assert not tally.failures, tally.report()
    assert len(tally.pids) == 2, f"served by {sorted(tally.pids)}"
    assert crossed, "no process polled a task the other ran"


@pytest.mark.redis
async def test_two_workers_sharing_redis_complete_tasks_polled_over_fresh_connections(redis_url: str) -> None:
    tally = Tally()
    crossed = 0  # polls a worker answered for a task the other runs

    async def one_task(http: httpx.AsyncClient) -> None:
        nonlocal crossed
        crossed += await task_polled_to_its_end(http, "", tally)

    with serve_processes(TASKS_APP, workers=2, env=tasks_env(redis_url)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:
            for _ in range(ROUNDS):
                await a_few_at_once(lambda: one_task(http), TASKS_PER_ROUND, tally)
                if (crossed and len(tally.pids) == 2) or tally.failures:
                    break
    assert not tally.failures, tally.report()
    assert len(tally.pids) == 2, f"served by {sorted(tally.pids)}"
    assert crossed, "no worker polled a task the other ran"
