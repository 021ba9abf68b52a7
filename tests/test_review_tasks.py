"""A review of routes as tasks (2026-07-28 tasks extension) from an attacker's side.

Real uvicorn processes of tests/review_tasks_app.py, driven with raw 2026-07-28 requests; with
Redis where what is kept crosses processes. Each test is one way to make the server hold more
than it should, or refuse someone it should serve.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import anyio
import httpx
import pytest

from fastapi_mcp_routes.store.base import TaskBounds, TaskRecord, Trust
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from tests.support.deployments import deployment_env
from tests.support.processes import serve_processes
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.stores import Stores
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

REVIEW_APP: Final = "tests.review_tasks_app:app"
META: Final = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "review", "version": "1"},
}
# A client that can ask its user, too.
ASKING: Final = {
    **META,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}},
}
SIGNED_IN: Final = {"authorization": "Bearer good"}  # the app's one principal (review_tasks_app.GOOD_TOKEN)
# Anonymous callers told apart by their address: Linux routes all of 127.0.0.0/8 to loopback.
ANONYMOUS_ADDRESSES: Final = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


@contextmanager
def review_app(redis_url: str = "", **env: str) -> Iterator[str]:
    with serve_processes(REVIEW_APP, env={**deployment_env(redis_url), **env}) as url:
        yield url


async def call_tool(http: httpx.AsyncClient, url: str, name: str, headers: dict[str, str] | None = None) -> Any:
    body = stateless_request("tools/call", {"name": name, "arguments": {}}, META)
    sent = {**stateless_headers("tools/call", name), **(headers or {})}
    response = await http.post(f"{url}/mcp", json=body, headers=sent)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def task(task_id: str, owner: bytes, trust: Trust) -> TaskRecord:
    return TaskRecord(task_id, owner, trust, "forever", "9f2c", "working", 1_000_000, 1_000_000, 60_000)


# -- bounds: a flood of anonymous tasks leaves room for callers trusted more -----------------------


@pytest.mark.parametrize("kind", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_anonymous_tasks_from_many_addresses_fill_only_half_of_max_tasks_and_unverified_three_quarters(
    kind: str, request: pytest.FixtureRequest
) -> None:
    stores = Stores(request.getfixturevalue("redis_url") if kind == "redis" else None)
    try:
        store = stores.make()
        bounds = TaskBounds(max_per_owner=10, max_tasks=8)
        kept = [await store.put_task(task(f"n{i}", f"10.0.0.{i}".encode(), Trust.ANONYMOUS), bounds) for i in range(6)]
        assert kept == [None] * 4 + ["total"] * 2  # half of 8
        claimed = [await store.put_task(task(f"c{i}", f"c{i}".encode(), Trust.CLAIMED), bounds) for i in range(4)]
        assert claimed == [None] * 2 + ["total"] * 2  # three quarters of 8, anonymous ones counted
        verified = [await store.put_task(task(f"v{i}", f"v{i}".encode(), Trust.VERIFIED), bounds) for i in range(3)]
        assert verified == [None, None, "total"]  # the rest of the total
        # A finished anonymous task makes room for another anonymous one, within the share.
        read = await store.find_task("n0")
        assert read is not None
        assert await store.save_task(dataclasses.replace(read, status="completed"), read)
        assert await store.put_task(task("n9", b"10.0.0.9", Trust.ANONYMOUS), bounds) is None
        assert await store.find_task("n0") is None
    finally:
        await stores.aclose()


@pytest.mark.processes
@pytest.mark.parametrize(
    "with_redis", [pytest.param(False, id="memory"), pytest.param(True, id="redis", marks=pytest.mark.redis)]
)
async def test_a_signed_in_caller_still_gets_a_task_while_anonymous_addresses_hold_every_one_they_may(
    with_redis: bool, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if with_redis else ""
    with review_app(redis_url, REVIEW_MAX_PER_CALLER="4", REVIEW_MAX_TASKS="8") as url:
        held = []
        for address in ANONYMOUS_ADDRESSES[:2]:
            transport = httpx.AsyncHTTPTransport(local_address=address)
            async with httpx.AsyncClient(transport=transport, timeout=WAIT_S) as http:
                held += [await call_tool(http, url, "forever_required") for _ in range(4)]
        kept = [result for result in held if result.get("resultType") == "task"]
        refused = [result for result in held if result.get("isError")]
        assert (len(kept), len(refused)) == (4, 4), held  # anonymous callers hold half of the 8
        assert "Tasks.max_tasks" in refused[0]["content"][0]["text"]
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            mine = await call_tool(http, url, "forever_required", SIGNED_IN)
            assert (mine.get("resultType"), mine.get("status")) == ("task", "working"), mine


@pytest.mark.processes
@pytest.mark.parametrize(
    "with_redis", [pytest.param(False, id="memory"), pytest.param(True, id="redis", marks=pytest.mark.redis)]
)
async def test_made_up_keys_hold_only_the_anonymous_share_of_tasks_and_a_checked_key_is_still_served(
    with_redis: bool, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if with_redis else ""
    with review_app(redis_url, REVIEW_MAX_PER_CALLER="4", REVIEW_MAX_TASKS="8") as url:
        held = []
        for index, address in enumerate(ANONYMOUS_ADDRESSES[:3]):
            transport = httpx.AsyncHTTPTransport(local_address=address)
            async with httpx.AsyncClient(transport=transport, timeout=WAIT_S) as http:
                for call in range(4):
                    made_up = {"authorization": f"Bearer made-up-{index}-{call}"}
                    held.append(await call_tool(http, url, "forever_required", made_up))
        kept = [result for result in held if result.get("resultType") == "task"]
        assert len(kept) == 4, held  # half of the 8, as anonymous callers: made-up keys earn nothing
        refusal = next(result for result in held if result.get("isError"))["content"][0]["text"]
        assert "Tasks.max_tasks" in refusal
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            checked = {"authorization": "Bearer checked-acme"}
            mine = await call_tool(http, url, "forever_required", checked)
            assert (mine.get("resultType"), mine.get("status")) == ("task", "working"), mine


@pytest.mark.processes
async def test_made_up_credentials_from_one_address_hold_no_more_tasks_than_one_caller_and_see_only_their_own() -> None:
    with review_app(REVIEW_MAX_PER_CALLER="2", REVIEW_MAX_TASKS="100") as url:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            results = []
            for key in ("made-up-1", "made-up-2", "made-up-3"):
                for _ in range(2):
                    headers = {"authorization": f"Bearer {key}"}
                    results.append((headers, await call_tool(http, url, "forever_required", headers)))
            kept = [(headers, result) for headers, result in results if result.get("resultType") == "task"]
            assert len(kept) == 2, results  # the address's bound, whatever keys it makes up
            assert all(result.get("isError") for _, result in results[2:]), results
            assert "Tasks.max_per_caller" in results[2][1]["content"][0]["text"]
            # Still each key's own: another key from the same address does not see it.
            (owner, first), _ = kept
            task_id = first["taskId"]
            for headers, status in ((owner, 200), ({"authorization": "Bearer made-up-2"}, 400)):
                body = stateless_request("tasks/get", {"taskId": task_id}, META)
                sent = {**stateless_headers("tasks/get", task_id), **headers}
                response = await http.post(f"{url}/mcp", json=body, headers=sent)
                assert response.status_code == status, response.text
            assert response.json()["error"]["code"] == -32602
            # A signed-in caller from that address is a caller of its own.
            mine = await call_tool(http, url, "forever_required", SIGNED_IN)
            assert mine.get("resultType") == "task", mine


# -- kept results: bounded in bytes per caller and in all ------------------------------------------

# About 20 kB of result each: a route's 10,000 characters, as text and as structure.
REPORT_CHARS: Final = 10_000


async def report_until_ended(http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> str:
    """Run the `report` task to its end; its id."""
    body = stateless_request("tools/call", {"name": "report", "arguments": {"size": REPORT_CHARS}}, META)
    sent = {**stateless_headers("tools/call", "report"), **(headers or {})}
    created = (await http.post(f"{url}/mcp", json=body, headers=sent)).json()["result"]
    assert created.get("resultType") == "task", created
    await task_result(http, url, created["taskId"], headers)
    return str(created["taskId"])


async def task_result(http: httpx.AsyncClient, url: str, task_id: str, headers: dict[str, str] | None = None) -> Any:
    """The result of the caller's task once it is completed (read as a client polls)."""
    body = stateless_request("tasks/get", {"taskId": task_id}, META)
    sent = {**stateless_headers("tasks/get", task_id), **(headers or {})}
    with anyio.fail_after(WAIT_S):
        while (task := (await http.post(f"{url}/mcp", json=body, headers=sent)).json()["result"])[
            "status"
        ] != "completed":
            await anyio.sleep(0.05)
    return task["result"]


def from_address(address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(local_address=address), timeout=WAIT_S)


@pytest.mark.processes
@pytest.mark.parametrize(
    "with_redis", [pytest.param(False, id="memory"), pytest.param(True, id="redis", marks=pytest.mark.redis)]
)
async def test_kept_results_let_go_of_the_callers_oldest_then_of_the_oldest_anonymous_one_never_a_checked_ones(
    with_redis: bool, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if with_redis else ""
    # A caller keeps 2 results of about 20 kB, anonymous callers 5 in all (half of 210 kB).
    with review_app(redis_url, REVIEW_RESULT_BYTES_PER_CALLER="50000", REVIEW_KEPT_RESULT_BYTES="210000") as url:
        made_up = {"authorization": "Bearer made-up-1"}
        async with from_address(ANONYMOUS_ADDRESSES[0]) as http:
            mine = [await report_until_ended(http, url, made_up) for _ in range(3)]
            oldest, *kept = [await task_result(http, url, task_id, made_up) for task_id in mine]
        assert oldest["isError"] is True
        assert "let go" in oldest["content"][0]["text"]
        assert "(Tasks.max_result_bytes_per_caller)" in oldest["content"][0]["text"]
        assert all(len(result["structuredContent"]["text"]) == REPORT_CHARS for result in kept), kept
        # Two more anonymous addresses: five results is the anonymous share, the sixth lets go of
        # the oldest anonymous one (the first caller's).
        async with from_address(ANONYMOUS_ADDRESSES[1]) as http:
            others = [await report_until_ended(http, url) for _ in range(2)]
        async with from_address(ANONYMOUS_ADDRESSES[2]) as http:
            others += [await report_until_ended(http, url, made_up) for _ in range(2)]
        async with from_address(ANONYMOUS_ADDRESSES[0]) as http:
            pushed = await task_result(http, url, mine[1], made_up)
            assert pushed["isError"] is True
            assert "the share of it anonymous callers may hold" in pushed["content"][0]["text"]
            assert (await task_result(http, url, mine[2], made_up)).get("isError") is None
        # Callers the server checks keep theirs beside the anonymous share, and push out none of them.
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            for headers in ({"authorization": "Bearer checked-acme"}, SIGNED_IN):
                trusted = [await report_until_ended(http, url, headers) for _ in range(2)]
                for task_id in trusted:
                    assert (await task_result(http, url, task_id, headers)).get("isError") is None
        async with from_address(ANONYMOUS_ADDRESSES[1]) as http:
            for task_id in others[:2]:
                assert (await task_result(http, url, task_id)).get("isError") is None


# -- a question's key is never reused over a task's life ----------------------------------------


@pytest.mark.processes
async def test_a_key_the_route_asks_again_is_sent_numbered_so_a_late_answer_to_the_first_round_answers_nothing() -> (
    None
):
    with review_app() as url:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:

            async def send(method: str, params: dict[str, Any], name: str) -> Any:
                body = stateless_request(method, params, ASKING)
                response = await http.post(f"{url}/mcp", json=body, headers=stateless_headers(method, name))
                return response.json()["result"]

            async def asked(task_id: str, key: str) -> dict[str, Any]:
                with anyio.fail_after(WAIT_S):
                    while True:
                        got = await send("tasks/get", {"taskId": task_id}, task_id)
                        if key in got.get("inputRequests", {}):
                            return dict(got)
                        await anyio.sleep(0.05)

            body = stateless_request("tools/call", {"name": "ask", "arguments": {"rounds": 2}}, ASKING)
            created = (await http.post(f"{url}/mcp", json=body, headers=stateless_headers("tools/call", "ask"))).json()
            task_id = created["result"]["taskId"]
            first = await asked(task_id, "name")
            await send("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer("Ada")}}, task_id)
            second = await asked(task_id, "name#2")
            # The first round's answer again, late: it answers nothing now.
            await send("tasks/update", {"taskId": task_id, "inputResponses": {"name": answer("Eve")}}, task_id)
            still = await send("tasks/get", {"taskId": task_id}, task_id)
            await send("tasks/update", {"taskId": task_id, "inputResponses": {"name#2": answer("Bo")}}, task_id)
            with anyio.fail_after(WAIT_S):
                while (done := await send("tasks/get", {"taskId": task_id}, task_id))["status"] != "completed":
                    await anyio.sleep(0.05)
    assert list(first["inputRequests"]) == ["name"]
    assert list(second["inputRequests"]) == ["name#2"]
    assert (still["status"], list(still["inputRequests"])) == ("input_required", ["name#2"])
    assert done["result"]["structuredContent"] == {"names": ["Ada", "Bo"]}


def answer(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}
