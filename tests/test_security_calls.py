"""Running calls against a real server: each bound on the calls a session, a caller and everyone
may run at once, pushed past and refused before the call runs, with another caller still served;
a sample whose client hung up ends early with what it read; and sync routes called over MCP
held to their thread shares, so REST's sync routes keep threads.

Each caller connects from an address of its own (loopback is a whole /8 on Linux): anonymous
callers and unchecked `x-api-key` callers are counted per address."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.sse import EventSourceResponse

from fastapi_mcp_routes import Limits, ToolCalls, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.call_slots import CallSlots
from fastapi_mcp_routes.store.base import Holder, Trust
from fastapi_mcp_routes.wire.constants import SERVER_BUSY
from fastapi_mcp_routes.wire.errors import ServerBusy
from tests.support.apps import Context
from tests.support.jsonrpc import HEADERS, final_message, open_session, rpc, tool_call
from tests.support.sdk import mcp_client
from tests.support.servers import connected, serve
from tests.support.sse import iter_sse_messages, read_to_first_message
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

LIMITS = Limits(max_calls_per_session=2, max_calls_per_caller=3, max_calls=8)
FEED_EVERY_S = 0.2  # how often the feed route sends a frame: 200 frames (maxFrames) take 40 s
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


class Seen:
    """What the routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.release = threading.Event()  # lets every `crunch` call return
        self.entered = 0  # `crunch` calls that got a thread
        self.first_entered = threading.Event()
        self.lock = threading.Lock()


def calls_app(seen: Seen, limits: Limits = LIMITS) -> FastAPI:
    app = FastAPI(title="Calls")
    calls = ToolCalls(require_confirmation_for_mutations=False)
    app.include_router(mcp_routes(app, limits=limits, tool_calls=calls))

    @mcp_tool()
    @app.get("/hold")
    async def hold(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)  # tells the test the call runs
        await anyio.sleep_forever()  # until its session ends or its stream closes
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.get("/feed", response_class=EventSourceResponse)
    async def feed() -> AsyncIterator[dict[str, int]]:
        for number in range(1_000_000):
            yield {"n": number}
            await anyio.sleep(FEED_EVERY_S)  # the feed's own pace, not synchronisation

    @mcp_tool(task="optional", read_only=True)
    @app.post("/crunch")
    def crunch() -> dict[str, bool]:
        with seen.lock:
            seen.entered += 1
        seen.first_entered.set()
        return {"released": seen.release.wait(WAIT_S)}

    @app.get("/rest-sync")
    def rest_sync() -> dict[str, bool]:
        return {"ok": True}

    return app


# -- the counts, alone -------------------------------------------------------------------------


def test_running_calls_are_counted_per_session_and_per_caller() -> None:
    slots = CallSlots(per_session=2, per_caller=3, total=100)
    alice = Holder(b"alice", Trust.VERIFIED)
    slots.take(alice, 0)
    slots.take(alice, 1)
    with pytest.raises(ServerBusy, match=r"this session runs 2 calls already \(Limits.max_calls_per_session\)"):
        slots.take(alice, 2)
    assert slots.running(alice) == 2
    slots.take(alice, 0)  # in another session
    with pytest.raises(ServerBusy, match=r"this caller runs 3 calls already \(Limits.max_calls_per_caller\)") as busy:
        slots.take(alice, 0)
    assert busy.value.status == 429
    assert busy.value.code == SERVER_BUSY
    for _ in range(3):
        slots.give_back(alice)
    assert slots.running(alice) == 0
    assert slots.running() == 0
    slots.take(alice, 0)


def test_running_calls_in_all_leave_callers_trusted_less_their_share_only() -> None:
    slots = CallSlots(per_session=10, per_caller=10, total=4)  # anonymous callers: 2 of the 4
    alice = Holder(b"alice", Trust.VERIFIED)
    slots.take(alice, 0)
    slots.take(Holder(b"bob", Trust.ANONYMOUS), 0)
    slots.take(Holder(b"carol", Trust.ANONYMOUS), 0)
    with pytest.raises(ServerBusy, match=r"\(the share of Limits.max_calls anonymous callers may hold\)") as full:
        slots.take(Holder(b"dave", Trust.ANONYMOUS), 0)
    assert full.value.status == 503
    slots.take(alice, 1)  # a credentialed caller is still served
    with pytest.raises(ServerBusy, match=r"the server runs 4 calls already \(Limits.max_calls\)"):
        slots.take(alice, 2)
    assert slots.running() == 4


# -- the bounds on the wire, session era ---------------------------------------------------------


class Callers:
    """HTTP clients on one server, one per caller address, and the streams the tests hold open."""

    def __init__(self, url: str, streams: ExitStack) -> None:
        self.url = url
        self.streams = streams
        self.clients: dict[str, httpx.Client] = {}
        self.sessions: list[tuple[str, dict[str, str]]] = []  # ended as the test ends

    def session(self, address: str, **options: Any) -> dict[str, str]:
        """A session of the caller at `address`; the headers its requests carry."""
        opened = open_session(self.client(address), **options)
        self.sessions.append((address, opened))
        return opened

    def end_sessions(self) -> None:
        """End every session, and with them the calls they leave running."""
        for address, headers in self.sessions:
            self.client(address).delete("/mcp", headers=headers)

    def client(self, address: str) -> httpx.Client:
        if address not in self.clients:
            transport = httpx.HTTPTransport(local_address=address)
            client = httpx.Client(base_url=self.url, timeout=WAIT_S, transport=transport)
            self.clients[address] = self.streams.enter_context(client)
        return self.clients[address]

    def hold(self, address: str, headers: dict[str, str], request_id: int) -> None:
        """Start a `hold` call and keep its stream open, once the route runs."""
        message = tool_call("hold", request_id=request_id, progress_token=f"p{request_id}")
        stream = self.streams.enter_context(self.client(address).stream("POST", "/mcp", json=message, headers=headers))
        assert stream.status_code == 200
        read_to_first_message(stream)


@contextmanager
def callers(app: FastAPI) -> Iterator[Callers]:
    with serve(app) as url, ExitStack() as streams:
        peers = Callers(url, streams)
        try:
            yield peers
        finally:
            peers.end_sessions()


def _refused(response: httpx.Response, status: int, bound: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["retry-after"]
    error = response.json()["error"]
    assert error["code"] == SERVER_BUSY
    assert bound in error["message"]
    assert "send this one again" in error["message"]


def test_calls_past_a_sessions_and_a_callers_bound_are_refused_429_while_another_caller_is_served() -> None:
    with callers(calls_app(Seen())) as peers:
        first = peers.session("127.0.2.1")
        peers.hold("127.0.2.1", first, 1)
        peers.hold("127.0.2.1", first, 2)
        third = peers.client("127.0.2.1").post("/mcp", json=tool_call("hold", request_id=3), headers=first)
        _refused(third, 429, "(Limits.max_calls_per_session)")
        second = peers.session("127.0.2.1")
        peers.hold("127.0.2.1", second, 1)
        fourth = peers.client("127.0.2.1").post("/mcp", json=tool_call("hold", request_id=2), headers=second)
        _refused(fourth, 429, "(Limits.max_calls_per_caller)")
        other = peers.session("127.0.2.2")
        served = peers.client("127.0.2.2").post("/mcp", json=tool_call("feed", {"durationMs": 30}), headers=other)
        assert "result" in (final_message(served) or {}), served.text
        # A call that ended gives its slot back: the session that ends frees the caller's calls.
        peers.client("127.0.2.1").delete("/mcp", headers=first)
        again = peers.client("127.0.2.1").post(
            "/mcp", json=tool_call("feed", {"durationMs": 30}, request_id=9), headers=second
        )
        assert "result" in (final_message(again) or {}), again.text


def test_calls_past_the_anonymous_share_are_refused_503_while_a_credentialed_caller_is_served() -> None:
    # Anonymous share: 2. The app checks the key "k", so its caller ranks above anonymous ones.
    limits = Limits(
        max_calls_per_session=4, max_calls_per_caller=4, max_calls=4, verify_credentials=lambda headers: True
    )
    with callers(calls_app(Seen(), limits)) as peers:
        for n in (1, 2):
            address = f"127.0.3.{n}"
            peers.hold(address, peers.session(address), 1)
        late = peers.session("127.0.3.3")
        refused = peers.client("127.0.3.3").post("/mcp", json=tool_call("hold"), headers=late)
        _refused(refused, 503, "(the share of Limits.max_calls anonymous callers may hold)")
        keyed = peers.session("127.0.3.4", headers={"x-api-key": "k"})
        served = peers.client("127.0.3.4").post("/mcp", json=tool_call("feed", {"durationMs": 30}), headers=keyed)
        assert "result" in (final_message(served) or {}), served.text


def test_a_batch_refuses_each_request_past_the_bound_with_the_error() -> None:
    limits = Limits(max_calls_per_session=1)
    with callers(calls_app(Seen(), limits)) as peers:
        session = peers.session("127.0.4.1", version="2025-03-26")
        peers.hold("127.0.4.1", session, 1)
        batch = [tool_call("feed", {"durationMs": 30}, request_id=n) for n in (2, 3)]
        answered = peers.client("127.0.4.1").post("/mcp", json=batch, headers=session)
        assert answered.status_code == 200
        for entry in answered.json():
            assert entry["error"]["code"] == SERVER_BUSY
            assert "(Limits.max_calls_per_session)" in entry["error"]["message"]


# -- the bounds on the wire, 2026-07-28 ----------------------------------------------------------


def test_stateless_calls_past_a_callers_bound_are_refused_429_while_another_caller_is_served() -> None:
    with callers(calls_app(Seen())) as peers:
        for n in range(1, 4):
            params = {"name": "hold", "arguments": {}, "_meta": {**stateless_meta(), "progressToken": f"p{n}"}}
            stream = peers.streams.enter_context(
                peers.client("127.0.6.1").stream(
                    "POST", "/mcp", json=rpc("tools/call", params, n), headers=stateless_headers("tools/call", "hold")
                )
            )
            read_to_first_message(stream)
        refused = peers.client("127.0.6.1").post(
            "/mcp",
            json=stateless_request("tools/call", {"name": "hold", "arguments": {}}),
            headers=stateless_headers("tools/call", "hold"),
        )
        _refused(refused, 429, "(Limits.max_calls_per_caller)")
        served = peers.client("127.0.6.2").post(
            "/mcp",
            json=stateless_request("tools/call", {"name": "feed", "arguments": {"durationMs": 30}}),
            headers=stateless_headers("tools/call", "feed"),
        )
        assert served.status_code == 200
        assert "result" in served.json(), served.text


def test_a_task_holds_its_callers_running_call_until_its_route_ends() -> None:
    seen = Seen()
    with (
        serve(calls_app(seen, Limits(max_calls_per_caller=1))) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
    ):

        def crunch(meta: dict[str, Any] | None = None) -> httpx.Response:
            call = stateless_request("tools/call", {"name": "crunch", "arguments": {}}, meta=meta)
            return http.post("/mcp", json=call, headers=stateless_headers("tools/call", "crunch"))

        def task_status(task_id: str) -> str:
            asked = stateless_request("tasks/get", {"taskId": task_id}, meta=stateless_meta(TASKS))
            status: str = http.post("/mcp", json=asked, headers=stateless_headers("tasks/get", task_id)).json()[
                "result"
            ]["status"]
            return status

        created = crunch(stateless_meta(TASKS)).json()["result"]
        assert (created["resultType"], created["status"]) == ("task", "working")
        # Its request has ended; its route runs on, and is the caller's one running call.
        _refused(crunch(stateless_meta(TASKS)), 429, "(Limits.max_calls_per_caller)")
        seen.release.set()
        deadline = time.monotonic() + WAIT_S
        while task_status(created["taskId"]) == "working" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert task_status(created["taskId"]) == "completed"
        # Given back once its route ended: the caller runs a call again.
        served = crunch()
        assert served.status_code == 200, served.text
        assert served.json()["result"]["structuredContent"] == {"released": True}


# -- a sample whose client left ------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_sample_whose_client_hung_up_ends_early_and_keeps_its_frames(version: str) -> None:
    # One call per session: the next call is served only once the hung-up sample has ended.
    with callers(calls_app(Seen(), Limits(max_calls_per_session=1))) as peers:
        client = peers.client("127.0.7.1")
        session = peers.session("127.0.7.1", version=version)
        message = tool_call("feed", {"durationMs": 30_000}, progress_token="p")
        last_id = None
        with client.stream("POST", "/mcp", json=message, headers=session) as stream:
            last_id = read_to_first_message(stream)  # a frame arrived: the sample runs
        # The connection closed 30 s before the window's end: the sample ends once noticed.
        # (Not told by the feed's generator unwinding: FastAPI's SSE producer, cancelled while it
        # hands a frame over, leaves the generator to the garbage collector.)
        _served_once_the_sample_ended(client, session)
        if version == "2025-11-25":  # resumable: the result, with the frames read, awaits a resume
            resumed = client.get("/mcp", headers={**session, "accept": "text/event-stream", "last-event-id": last_id})
            answer = [m for m in iter_sse_messages(resumed.text) if "result" in m][-1]
            sample = answer["result"]["structuredContent"]
            assert sample["frameCount"] >= 1
            assert sample["elapsedMs"] < 30_000
            assert not sample["ended"]


def _served_once_the_sample_ended(client: httpx.Client, session: dict[str, str]) -> None:
    deadline = time.monotonic() + WAIT_S
    request_id = 100
    while True:
        request_id += 1
        again = client.post("/mcp", json=tool_call("feed", {"durationMs": 30}, request_id=request_id), headers=session)
        if "result" in (final_message(again) or {}):
            return
        assert "(Limits.max_calls_per_session)" in again.text, again.text  # still running: the sample
        assert time.monotonic() < deadline, "the hung-up sample still holds its session's one call"
        time.sleep(0.1)


def test_a_plain_call_runs_on_when_its_session_era_client_hangs_up() -> None:
    with callers(calls_app(Seen(), Limits(max_calls_per_session=1))) as peers:
        client = peers.client("127.0.8.1")
        session = peers.session("127.0.8.1")
        with client.stream("POST", "/mcp", json=tool_call("hold", progress_token="p"), headers=session) as stream:
            read_to_first_message(stream)
        # The hung-up call still runs (a mutation must not stop half-way), so it holds its slot.
        refused = client.post("/mcp", json=tool_call("feed", {"durationMs": 30}, request_id=2), headers=session)
        _refused(refused, 429, "(Limits.max_calls_per_session)")


# -- threads ----------------------------------------------------------------------------------------


THREADS = Limits(max_threads_per_caller=1, max_threads=2)


@pytest.mark.anyio
async def test_a_caller_past_its_thread_share_waits_while_a_rest_sync_route_answers() -> None:
    seen = Seen()
    app = calls_app(seen, THREADS)
    async with connected(app) as http:
        session = await _open_async_session(http)

        async def crunch(request_id: int) -> dict[str, Any]:
            answer = await http.post("/mcp", json=tool_call("crunch", request_id=request_id), headers=session)
            return answer.json()

        results: list[dict[str, Any]] = []
        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as group:
                for n in (1, 2):
                    group.start_soon(lambda n=n: _append(results, crunch(n)))
                assert await anyio.to_thread.run_sync(seen.first_entered.wait, WAIT_S)
                rest = await http.get("/rest-sync")  # REST's sync route gets a thread at once
                assert rest.json() == {"ok": True}
                assert seen.entered == 1  # the caller's second call waits for its thread share
                seen.release.set()
        assert seen.entered == 2
        assert all(result["result"]["structuredContent"] == {"released": True} for result in results)


@pytest.mark.anyio
async def test_a_cancelled_sync_task_keeps_its_thread_share_until_its_thread_returns() -> None:
    seen = Seen()
    app = calls_app(seen, THREADS)
    async with connected(app) as http:
        call = stateless_request("tools/call", {"name": "crunch", "arguments": {}}, meta=stateless_meta(TASKS))
        with anyio.fail_after(WAIT_S):
            created = await http.post("/mcp", json=call, headers=stateless_headers("tools/call", "crunch"))
            task_id = created.json()["result"]["taskId"]
            assert await anyio.to_thread.run_sync(seen.first_entered.wait, WAIT_S)
            cancel = stateless_request("tasks/cancel", {"taskId": task_id}, meta=stateless_meta(TASKS))
            cancelled = await http.post("/mcp", json=cancel, headers=stateless_headers("tasks/cancel", task_id))
            assert cancelled.status_code == 200, cancelled.text
            results: list[dict[str, Any]] = []
            async with anyio.create_task_group() as group:
                again = stateless_request("tools/call", {"name": "crunch", "arguments": {}})

                async def call_again() -> dict[str, Any]:
                    answer = await http.post("/mcp", json=again, headers=stateless_headers("tools/call", "crunch"))
                    return answer.json()

                group.start_soon(_append, results, call_again())
                # The cancelled task's thread still runs: the caller's next sync call waits for it.
                await anyio.wait_all_tasks_blocked()
                assert seen.entered == 1
                seen.release.set()
        assert seen.entered == 2
        assert results[0]["result"]["structuredContent"] == {"released": True}


async def _open_async_session(http: httpx.AsyncClient) -> dict[str, str]:
    hello = rpc(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        0,
    )
    headers = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
    opened = await http.post("/mcp", json=hello, headers=headers)
    return {**headers, "mcp-session-id": opened.headers["mcp-session-id"]}


async def _append(results: list[dict[str, Any]], answer: Any) -> None:
    results.append(await answer)


AGENT_BURST = 24  # an agent's parallel calls, more than the twenty the review saw refused at 16


def test_an_agents_burst_of_parallel_calls_in_one_session_meets_no_bound_at_the_defaults() -> None:
    app = FastAPI(title="Burst")
    app.include_router(mcp_routes(app))
    arrived = 0
    everyone = anyio.Event()

    @mcp_tool()
    @app.get("/together")
    async def together() -> dict[str, int]:
        nonlocal arrived
        arrived += 1
        if arrived == AGENT_BURST:
            everyone.set()
        await everyone.wait()  # every call runs at once before any answers
        return {"arrived": arrived}

    async def burst(url: str) -> list[Any]:
        async with mcp_client(url) as client:
            results: list[Any] = []

            async def one() -> None:
                results.append(await client.call_tool("together", {}))

            with anyio.fail_after(WAIT_S):
                async with anyio.create_task_group() as calls:
                    for _ in range(AGENT_BURST):
                        calls.start_soon(one)
            return results

    with serve(app) as url:
        results = anyio.run(burst, url)
    assert len(results) == AGENT_BURST
    assert not any(result.is_error for result in results)
