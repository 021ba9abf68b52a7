"""Routes as tasks (2026-07-28 tasks extension, SEP-2663), served in process with the app's
lifespan running: when a call becomes a task and what the client is told, the extension's gates
and errors, the bounds on tasks kept, time to live, the client going away, tasks/cancel,
tasks/update in part, progress and logs of a task, REST callers of task routes, and the
`Tasks` options; and what the fixes made alongside keep fixed. Routes wait on events the test
sets, and the tests wait with bounds (`anyio.fail_after`), polling a task where they must."""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from fastapi_mcp_routes import InputRequest, Tasks, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from tests.support.apps import Context
from tests.support.jsonrpc import HEADERS, final_message, initialize
from tests.support.servers import connected
from tests.support.stateless import stateless_headers, stateless_meta
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/tasks"
TASKS: dict[str, Any] = {"extensions": {EXTENSION: {}}}  # a client that declared the extension
ASKING = {**TASKS, "elicitation": {}}
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
# What the CreateTaskResult of a running task carries, by type.
CREATED: dict[str, type] = {"resultType": str, "taskId": str, "status": str, "createdAt": str, "lastUpdatedAt": str}
CREATED |= {"ttlMs": int, "pollIntervalMs": int}
ACK = {"resultType": "complete"}  # all tasks/update and tasks/cancel answer
AFTER_S = 0.5  # Tasks.after_s of the test app: long enough for a quick route on a busy machine
POLL_S = 0.05  # how often a test reads a task it waits for (each wait bounded by WAIT_S)


def answer(name: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": name}}


# -- the app ---------------------------------------------------------------------------------------


@dataclass
class Probe:
    """What the routes did, by the `key` of each call, and the gates the test opens for them."""

    started: defaultdict[str, anyio.Event] = field(default_factory=lambda: defaultdict(anyio.Event))
    gates: defaultdict[str, anyio.Event] = field(default_factory=lambda: defaultdict(anyio.Event))
    ended: defaultdict[str, anyio.Event] = field(default_factory=lambda: defaultdict(anyio.Event))
    cancelled: set[str] = field(default_factory=set)

    async def hold(self, ctx: ToolContext, key: str, start: bool, ttl_s: float | None) -> dict[str, Any]:
        """Become a task at once (`start`), then wait for the test to open the gate."""
        try:
            became = await ctx.start_task(ttl_s=ttl_s) if start else False
            self.started[key].set()
            await self.gates[key].wait()
            return {"key": key, "task": became}
        except anyio.get_cancelled_exc_class():
            self.cancelled.add(key)
            raise
        finally:
            self.ended[key].set()


def tasks_app(*, with_task_tools: bool = True, store: Store | None = None, **options: Any) -> tuple[FastAPI, Probe]:
    app, probe = FastAPI(), Probe()
    app.include_router(mcp_routes(app, store=store, tasks=Tasks(**{"after_s": AFTER_S, **options})))

    @mcp_tool()
    @app.get("/plain")
    def plain() -> dict[str, str]:
        return {"answer": "plain"}

    if not with_task_tools:
        return app, probe

    @mcp_tool(task="optional")
    @app.get("/hold")
    async def hold(ctx: Context, key: str, start: bool = True, ttl_s: float | None = None) -> dict[str, Any]:
        return await probe.hold(ctx, key, start, ttl_s)

    @mcp_tool(task="required")
    @app.get("/hold-required")
    async def hold_required(ctx: Context, key: str, start: bool = True) -> dict[str, Any]:
        return await probe.hold(ctx, key, start, None)

    @mcp_tool(task="optional")
    @app.get("/quick")
    async def quick() -> dict[str, str]:
        return {"answer": "quick"}

    @mcp_tool(task="required")
    @app.get("/quick-required")
    async def quick_required(size: int = 1) -> dict[str, str]:
        return {"answer": "x" * size}

    @mcp_tool(task="optional")
    @app.get("/nan-ttl")
    async def nan_ttl(ctx: Context) -> str:
        try:
            return f"a task: {await ctx.start_task(ttl_s=float('nan'))}"
        except ValueError as error:
            return str(error)

    @mcp_tool(task="optional")
    @app.get("/report")
    async def report(ctx: Context, key: str) -> dict[str, str]:
        await ctx.start_task()
        await ctx.report_progress(1, 3, "a third")
        await ctx.report_progress(2, 3)  # sooner than a task saves progress again
        await ctx.log("info", "a task has nowhere to send this")
        probe.started[key].set()
        await probe.gates[key].wait()
        return {"key": key}

    @mcp_tool(task="optional")
    @app.get("/ask-two")
    async def ask_two(ctx: Context) -> dict[str, Any]:
        await ctx.start_task()
        asked = {"first": InputRequest.elicitation("First?", NAME), "second": InputRequest.elicitation("Second?", NAME)}
        answers = await ctx.ask(asked)
        return {key: (given.get("content") or {}).get("name") for key, given in answers.items()}

    @mcp_tool(task="optional")
    @app.get("/ask-then-tidy")
    async def ask_then_tidy(ctx: Context) -> str:
        try:
            given = await ctx.elicit("Your name?", NAME, key="name")
            return f"Hello, {(given.content or {}).get('name')}"
        finally:
            with anyio.CancelScope(shield=True):  # tidying up takes longer than Tasks.after_s
                await anyio.sleep(options.get("after_s", AFTER_S) * 3)

    return app, probe


# -- a 2026-07-28 client -----------------------------------------------------------------------------


@dataclass
class Peer:
    """A client of the endpoint, known by its credential (`key`); it declares `capabilities`
    on every request unless told otherwise."""

    http: httpx.AsyncClient
    key: str = "alice"
    capabilities: dict[str, Any] = field(default_factory=lambda: TASKS)

    def request(
        self, method: str, params: dict[str, Any], capabilities: dict[str, Any] | None = None, meta: Any = None
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The JSON-RPC message (`meta` added to its envelope) and the headers of a request."""
        meta = {**stateless_meta(self.capabilities if capabilities is None else capabilities), **(meta or {})}
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        named = params.get("taskId", params.get("name"))
        routing = stateless_headers(method, named if isinstance(named, str) else None)
        return message, {**routing, "authorization": f"Bearer {self.key}"}

    async def send(
        self, method: str, params: dict[str, Any], *, headers: dict[str, str] | None = None, **options: Any
    ) -> tuple[int, dict[str, Any]]:
        message, sent = self.request(method, params, **options)
        with anyio.fail_after(WAIT_S):
            response = await self.http.post("/mcp", json=message, headers={**sent, **(headers or {})})
        answer = final_message(response)
        assert answer is not None, response.text
        return response.status_code, answer

    async def result(self, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
        status, message = await self.send(method, params, **options)
        assert status == 200, message
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        result.pop("_meta", None)
        return result

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return await self.result("tools/call", {"name": tool, "arguments": arguments})

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.result("tasks/get", {"taskId": task_id})

    async def until(self, task_id: str, status: str) -> dict[str, Any]:
        """The task once it has `status` (read every POLL_S, for WAIT_S at most)."""
        with anyio.fail_after(WAIT_S):
            while (task := await self.get(task_id))["status"] != status:
                await anyio.sleep(POLL_S)
        return task

    async def unknown(self, task_id: str) -> str:
        """The message of the -32602 a task id the server does not know is answered with."""
        status, message = await self.send("tasks/get", {"taskId": task_id})
        assert (status, message.get("error", {}).get("code")) == INVALID, message
        return str(message["error"]["message"])


def text_of(result: dict[str, Any]) -> str:
    return " ".join(block.get("text", "") for block in result.get("content", []))


async def wait_for(event: anyio.Event) -> None:
    with anyio.fail_after(WAIT_S):
        await event.wait()


async def post_asgi(app: FastAPI, request: tuple[dict[str, Any], dict[str, str]], leave: anyio.Event) -> bytes:
    """POST a request straight to the app's ASGI interface, as a client that closes the
    connection once `leave` is set; the body of the answer it was sent."""
    message, headers = request
    incoming = [{"type": "http.request", "body": json.dumps(message).encode()}]
    sent: list[bytes] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(event: MutableMapping[str, Any]) -> None:
        sent.append(event.get("body", b""))

    raw_headers = [(name.encode(), value.encode()) for name, value in {"host": "testserver", **headers}.items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "query_string": b"", "headers": raw_headers}
    await app({**scope, "client": ("127.0.0.1", 50000), "scheme": "http", "http_version": "1.1"}, receive, send)
    return b"".join(sent)


# -- advertising, and when a call becomes a task ---------------------------------------------------


async def test_discover_advertises_the_extension_only_when_a_tool_may_be_a_task_and_initialize_never() -> None:
    for with_task_tools, offered in ((True, {EXTENSION: {}}), (False, None)):
        app, _ = tasks_app(with_task_tools=with_task_tools)
        async with connected(app) as http:
            discovered = await Peer(http).result("server/discover", {})
            assert discovered["capabilities"].get("extensions") == offered
            assert "tasks" not in discovered["capabilities"]  # the 2025-11-25 slot
            sent = {**HEADERS, "mcp-protocol-version": "2025-11-25"}
            with anyio.fail_after(WAIT_S):
                opened = await http.post("/mcp", json=initialize(capabilities=TASKS), headers=sent)
            assert opened.status_code == 200, opened.text
            capabilities = opened.json()["result"]["capabilities"]
            assert "extensions" not in capabilities
            assert "tasks" not in capabilities


async def test_a_quick_optional_call_answers_directly_a_required_one_is_still_a_task_and_a_slow_one_becomes_one() -> (
    None
):
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        # The first request after startup: the task group is already there.
        created = await peer.call("quick_required")
        assert (created["resultType"], created["status"], "result" in created) == ("task", "completed", False)
        task = await peer.get(created["taskId"])
        assert (task["status"], task["result"]["structuredContent"]) == ("completed", {"answer": "x"})
        quick = await peer.call("quick")
        assert (quick["resultType"], quick["structuredContent"]) == ("complete", {"answer": "quick"})
        created = await peer.call("hold", key="slow", start=False)  # no start_task: Tasks.after_s decides
        assert {key: type(value) for key, value in created.items()} == CREATED  # and nothing else
        assert (created["resultType"], created["status"]) == ("task", "working")
        assert ISO.fullmatch(created["createdAt"])
        assert ISO.fullmatch(created["lastUpdatedAt"])
        assert min(created["ttlMs"], created["pollIntervalMs"], len(created["taskId"])) > 0
        assert (await peer.get(created["taskId"]))["status"] == "working"
        probe.gates["slow"].set()
        done = await peer.until(created["taskId"], "completed")
        assert done["result"]["structuredContent"] == {"key": "slow", "task": False}
        assert "pollIntervalMs" not in done


async def test_a_call_stopped_for_a_question_asks_it_directly_however_long_its_route_takes_to_unwind() -> None:
    app, _ = tasks_app()
    async with connected(app) as http:
        asked = await Peer(http, capabilities=ASKING).call("ask_then_tidy")
    assert asked["resultType"] == "input_required", asked
    assert list(asked["inputRequests"]) == ["name"]
    assert "requestState" in asked


# -- gates and errors ----------------------------------------------------------------------------------

MISSING, NOT_FOUND, MISMATCH, INVALID = (400, -32021), (404, -32601), (400, -32020), (400, -32602)
NO_EXTENSION: dict[str, Any] = {"capabilities": {}}
T = "{task}"  # the id of a task the caller holds
REFUSALS = {
    "tasks/get without the extension": ("tasks/get", {"taskId": T}, NO_EXTENSION, MISSING),
    "tasks/update without the extension": ("tasks/update", {"taskId": T, "inputResponses": {}}, NO_EXTENSION, MISSING),
    "tasks/cancel without the extension": ("tasks/cancel", {"taskId": T}, NO_EXTENSION, MISSING),
    "a required tool without the extension": ("tools/call", {"name": "quick_required"}, NO_EXTENSION, MISSING),
    "tasks/result": ("tasks/result", {"taskId": T}, {}, NOT_FOUND),
    "tasks/list": ("tasks/list", {}, {}, NOT_FOUND),
    "Mcp-Name not the task id": ("tasks/get", {"taskId": T}, {"headers": {"mcp-name": "other"}}, MISMATCH),
    "Mcp-Name not the task id to update": (
        "tasks/update",
        {"taskId": T, "inputResponses": {}},
        {"headers": {"mcp-name": "other"}},
        MISMATCH,
    ),
    "Mcp-Name not the task id to cancel": ("tasks/cancel", {"taskId": T}, {"headers": {"mcp-name": "other"}}, MISMATCH),
    "an empty Mcp-Name": ("tasks/get", {"taskId": T}, {"headers": {"mcp-name": ""}}, MISMATCH),
    "no taskId": ("tasks/get", {}, {}, INVALID),
    "a taskId of null": ("tasks/get", {"taskId": None}, {}, INVALID),
    "inputResponses not an object": ("tasks/update", {"taskId": T, "inputResponses": ["x"]}, {}, INVALID),
    "an unknown task id": ("tasks/cancel", {"taskId": "no-such-task"}, {}, INVALID),
    "another caller's task": ("tasks/cancel", {"taskId": T}, {"headers": {"authorization": "Bearer eve"}}, INVALID),
}


@pytest.mark.parametrize("case", REFUSALS.values(), ids=REFUSALS.keys())
async def test_what_the_extension_cannot_serve_is_refused_with_its_error_and_the_server_serves_on(
    case: tuple[str, dict[str, Any], dict[str, Any], tuple[int, int]],
) -> None:
    method, params, options, expected = case
    app, _ = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        task_id = (await peer.call("quick_required"))["taskId"]
        filled = {key: task_id if value == T else value for key, value in params.items()}
        status, message = await peer.send(method, filled, **options)
        error = message.get("error", {})
        assert (status, error.get("code")) == expected, message
        if expected == MISSING:
            assert error["data"]["requiredCapabilities"]["extensions"] == {EXTENSION: {}}
        assert (await peer.get(task_id))["status"] == "completed"
        assert (await peer.call("quick"))["structuredContent"] == {"answer": "quick"}


async def test_tasks_requests_without_mcp_name_are_served_as_the_spec_requires_it_only_of_the_client() -> None:
    """SEP-2663 asks clients to name the task in `Mcp-Name`; the core revision requires the
    header only on tools/call, resources/read and prompts/get. A poll without it is answered."""
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        created = await peer.call("hold", key="unnamed", start=True)

        async def unnamed(method: str, params: dict[str, Any]) -> dict[str, Any]:
            message, headers = peer.request(method, params)
            del headers["mcp-name"]
            with anyio.fail_after(WAIT_S):
                response = await http.post("/mcp", json=message, headers=headers)
            answer = final_message(response)
            assert (response.status_code, answer is not None and "result" in answer) == (200, True), response.text
            assert answer is not None
            result: dict[str, Any] = answer["result"]
            return result

        task_id = created["taskId"]
        assert (await unnamed("tasks/get", {"taskId": task_id}))["status"] == "working"
        assert (await unnamed("tasks/update", {"taskId": task_id, "inputResponses": {}}))["resultType"] == "complete"
        assert (await unnamed("tasks/cancel", {"taskId": task_id}))["resultType"] == "complete"
        assert (await unnamed("tasks/get", {"taskId": task_id}))["status"] == "cancelled"
    probe.gates["unnamed"].set()


# -- bounds ---------------------------------------------------------------------------------------------


BOUNDS = {
    # The bound, the callers whose tasks reach it, the caller then refused, a caller still served.
    # Unchecked credentials (no `auth=`) count against their address: bob, from alice's, is refused
    # too (tests/test_review_tasks.py has callers of other addresses and a signed-in one).
    "max_per_caller": ({"max_per_caller": 2}, ("alice", "alice"), "alice", None),
    # Unchecked credentials (no `auth=`) count as none: anonymous callers may hold half of max_tasks, 2 of 4.
    "max_tasks": ({"max_tasks": 4}, ("alice", "bob"), "carol", None),
}


@pytest.mark.parametrize("case", BOUNDS.values(), ids=BOUNDS.keys())
async def test_past_a_bound_on_tasks_a_required_call_is_refused_naming_it_and_an_optional_one_answers_directly(
    case: tuple[dict[str, Any], tuple[str, str], str, str | None],
) -> None:
    bound, holders, refused_caller, other = case
    app, probe = tasks_app(**bound)
    async with connected(app) as http:
        first, second = [
            await Peer(http, name).call("hold_required", key=f"held-{i}") for i, name in enumerate(holders)
        ]
        assert (first["status"], second["status"]) == ("working", "working")
        caller = Peer(http, refused_caller)
        refused = await caller.call("hold_required", key="refused")
        assert refused["isError"] is True
        assert f"Tasks.{next(iter(bound))}" in text_of(refused)
        await wait_for(probe.ended["refused"])  # its route was stopped, not left waiting
        assert probe.cancelled == {"refused"}
        if other is not None:
            assert (await Peer(http, other).call("hold_required", key="other"))["status"] == "working"
        probe.gates["direct"].set()
        assert (await caller.call("hold", key="direct"))["structuredContent"] == {"key": "direct", "task": False}
        probe.gates["held-0"].set()
        holder = Peer(http, holders[0])
        await holder.until(first["taskId"], "completed")
        assert (await caller.call("hold_required", key="kept"))["status"] == "working"
        await holder.unknown(first["taskId"])  # the finished task was pushed out for it
        assert (await Peer(http, holders[1]).get(second["taskId"]))["status"] == "working"


async def test_a_result_larger_than_max_result_bytes_ends_the_task_completed_with_an_error_naming_it() -> None:
    app, _ = tasks_app(max_result_bytes=200)
    async with connected(app) as http:
        peer = Peer(http)
        small = await peer.get((await peer.call("quick_required", size=10))["taskId"])
        assert small["result"]["structuredContent"] == {"answer": "x" * 10}
        large = await peer.get((await peer.call("quick_required", size=1000))["taskId"])
        assert large["status"] == "completed"
        assert large["result"]["isError"] is True
        assert "Tasks.max_result_bytes" in text_of(large["result"])


# -- time to live -----------------------------------------------------------------------------------------


async def test_a_task_lives_as_long_as_asked_within_bounds_then_is_unknown_and_its_route_cancelled() -> None:
    app, probe = tasks_app(ttl_s=1, max_ttl_s=5)
    async with connected(app) as http:
        peer = Peer(http)
        asked = {"default": {}, "short": {"ttl_s": 0.01}, "long": {"ttl_s": 60.0}}
        kept = {key: await peer.call("hold", key=key, **ttl) for key, ttl in asked.items()}
        assert {key: task["ttlMs"] for key, task in kept.items()} == {"default": 1000, "short": 1000, "long": 5000}
        await wait_for(probe.ended["default"])
        await wait_for(probe.ended["short"])
        assert probe.cancelled == {"default", "short"}
        for key in ("default", "short"):
            assert "Unknown task" in await peer.unknown(kept[key]["taskId"])
        assert (await peer.get(kept["long"]["taskId"]))["status"] == "working"


async def test_a_time_to_live_that_is_not_a_number_is_refused_to_the_route_as_over_rest() -> None:
    app, _ = tasks_app()
    async with connected(app) as http:
        called = await Peer(http).call("nan_ttl")
        with anyio.fail_after(WAIT_S):
            rest = await http.get("/nan-ttl")
    assert called["resultType"] == "complete"
    assert json.loads(text_of(called)) == rest.json() == "ttl_s must be a number of seconds, got nan"


# -- the client going away, and tasks/cancel --------------------------------------------------------------


@pytest.mark.parametrize("how", ["closes the connection", "cancels the request"])
async def test_a_client_leaving_before_the_call_became_a_task_cancels_its_route(how: str) -> None:
    app, probe = tasks_app(after_s=60)
    async with connected(app) as http:
        peer = Peer(http)
        leave = anyio.Event()
        async with anyio.create_task_group() as requests:
            if how == "closes the connection":
                request = peer.request("tools/call", {"name": "hold", "arguments": {"key": "gone", "start": False}})
                requests.start_soon(post_asgi, app, request, leave)
            else:
                requests.start_soon(functools.partial(peer.call, "hold", key="gone", start=False))
            await wait_for(probe.started["gone"])
            leave.set()
            if how == "cancels the request":
                requests.cancel_scope.cancel()
            await wait_for(probe.ended["gone"])
        assert probe.cancelled == {"gone"}
        assert (await peer.call("quick"))["structuredContent"] == {"answer": "quick"}


async def test_a_client_leaving_after_the_call_became_a_task_leaves_its_route_running_to_the_end() -> None:
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        left = anyio.Event()
        left.set()  # the client closes the connection as soon as it has sent its request
        request = peer.request("tools/call", {"name": "hold", "arguments": {"key": "left"}})
        created = json.loads(await post_asgi(app, request, left))["result"]
        assert created["status"] == "working"
        await wait_for(probe.started["left"])
        probe.gates["left"].set()
        done = await peer.until(created["taskId"], "completed")
        assert done["result"]["structuredContent"] == {"key": "left", "task": True}
        assert not probe.cancelled


async def test_tasks_cancel_ends_a_running_task_at_once_and_cancels_its_route() -> None:
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        created = await peer.call("hold", key="doomed")
        await wait_for(probe.started["doomed"])
        assert await peer.result("tasks/cancel", {"taskId": created["taskId"]}) == ACK
        cancelled = await peer.get(created["taskId"])
        assert cancelled["status"] == "cancelled"
        assert not {"result", "error", "inputRequests", "pollIntervalMs"} & cancelled.keys()
        await wait_for(probe.ended["doomed"])
        assert probe.cancelled == {"doomed"}
        assert await peer.result("tasks/cancel", {"taskId": created["taskId"]}) == ACK
        finished = (await peer.call("quick_required"))["taskId"]
        assert await peer.result("tasks/cancel", {"taskId": finished}) == ACK
        assert (await peer.get(finished))["status"] == "completed"  # an ended task never changes


# -- tasks/update, progress and logs ----------------------------------------------------------------------


async def test_tasks_update_takes_answers_in_part_and_ignores_what_answers_nothing() -> None:
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http, capabilities=ASKING)
        held = (await peer.call("hold", key="busy"))["taskId"]
        assert await peer.result("tasks/update", {"taskId": held, "inputResponses": {"x": answer("A")}}) == ACK
        assert (await peer.get(held))["status"] == "working"
        task_id = (await peer.call("ask_two"))["taskId"]
        asking = await peer.until(task_id, "input_required")
        assert set(asking["inputRequests"]) == {"first", "second"}
        assert asking["inputRequests"]["first"]["method"] == "elicitation/create"

        async def update(responses: Any) -> dict[str, Any]:
            assert await peer.result("tasks/update", {"taskId": task_id, "inputResponses": responses}) == ACK
            return await peer.get(task_id)

        partial = await update({"first": answer("Ada")})
        assert (partial["status"], set(partial["inputRequests"])) == ("input_required", {"second"})
        ignored = await update({"nobody-asked": answer("Eve"), "second": "not an answer", "third": 3})
        assert (ignored["status"], set(ignored["inputRequests"])) == ("input_required", {"second"})
        await update({"second": answer("Bob")})
        done = await peer.until(task_id, "completed")
        assert done["result"]["structuredContent"] == {"first": "Ada", "second": "Bob"}
        assert (await update({"first": answer("Late")}))["status"] == "completed"
        probe.gates["busy"].set()


async def test_a_task_asking_what_its_client_cannot_answer_ends_failed_with_the_missing_capability() -> None:
    app, _ = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)  # the extension, but no elicitation
        failed = await peer.until((await peer.call("ask_two"))["taskId"], "failed")
        assert failed["error"]["code"] == -32021
        assert failed["error"]["data"]["requiredCapabilities"] == {"elicitation": {"form": {}}}
        assert failed["statusMessage"]
        assert "result" not in failed


async def test_progress_of_a_task_is_its_status_message_and_its_log_messages_are_dropped() -> None:
    app, probe = tasks_app()
    async with connected(app) as http:
        peer = Peer(http)
        params = {"name": "report", "arguments": {"key": "busy"}}
        status, message = await peer.send("tools/call", params, meta={LOG_LEVEL: "debug"})  # every log message
        assert (status, message["result"]["resultType"]) == (200, "task")
        task_id = message["result"]["taskId"]
        await wait_for(probe.started["busy"])  # it reported twice and logged, without error
        assert (await peer.get(task_id))["statusMessage"] in ("a third", "2/3")
        with anyio.fail_after(WAIT_S):  # the latest progress is saved soon, though nothing follows it
            while (await peer.get(task_id))["statusMessage"] != "2/3":
                await anyio.sleep(POLL_S)
        probe.gates["busy"].set()
        done = await peer.until(task_id, "completed")
        assert done["result"]["structuredContent"] == {"key": "busy"}
        assert "statusMessage" not in done


class LeaseOutage(MemoryStore):
    """A store shared by every process, as far as the server knows, whose next claim of a task's
    lease fails as Redis out of reach would."""

    shared = True

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        if self.down and name.startswith("task-lease/"):
            self.down = False
            raise StoreUnavailable("the test cut it")
        return await super().claim(name, holder, ttl_s)


async def test_a_task_whose_lease_could_not_be_taken_still_runs_to_its_end() -> None:
    store = LeaseOutage()
    app, probe = tasks_app(store=store)
    async with connected(app) as http:
        peer = Peer(http)
        store.down = True
        status, message = await peer.send("tools/call", {"name": "hold", "arguments": {"key": "leased"}})
        assert (status, message["result"]["status"]) == (200, "working"), message
        await wait_for(probe.started["leased"])  # start_task returned
        probe.gates["leased"].set()
        done = await peer.until(message["result"]["taskId"], "completed")
        assert done["result"]["structuredContent"] == {"key": "leased", "task": True}


# -- REST callers, and no lifespan --------------------------------------------------------------------------


async def test_rest_callers_of_task_routes_notice_nothing_and_start_task_is_false() -> None:
    app, probe = tasks_app()
    async with connected(app) as http:
        probe.gates["rest"].set()
        with anyio.fail_after(WAIT_S):
            held = await http.get("/hold-required", params={"key": "rest"})
            quick = await http.get("/quick-required")
        assert (held.status_code, held.json()) == (200, {"key": "rest", "task": False})
        assert (quick.status_code, quick.json()) == (200, {"answer": "x"})


async def test_without_the_lifespan_running_a_task_route_answers_directly() -> None:
    app, probe = tasks_app()
    probe.gates["direct"].set()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        direct = await Peer(http).call("hold_required", key="direct")
    assert direct["structuredContent"] == {"key": "direct", "task": False}


# -- options ----------------------------------------------------------------------------------------------

INVALID_OPTIONS: dict[str, tuple[Callable[[], object], str]] = {
    "after_s of 0": (lambda: Tasks(after_s=0), "Tasks.after_s"),
    "ttl_s past max_ttl_s": (lambda: Tasks(ttl_s=10, max_ttl_s=5), "Tasks.ttl_s"),
    "max_per_caller of 0": (lambda: Tasks(max_per_caller=0), "Tasks.max_per_caller"),
    "max_tasks of 0": (lambda: Tasks(max_tasks=0), "Tasks.max_tasks"),
    "max_result_bytes of 0": (lambda: Tasks(max_result_bytes=0), "Tasks.max_result_bytes"),
    "max_result_bytes past max_result_bytes_per_caller": (
        lambda: Tasks(max_result_bytes=2000, max_result_bytes_per_caller=1000),
        "Tasks.max_result_bytes must not exceed Tasks.max_result_bytes_per_caller",
    ),
    "max_result_bytes_per_caller past max_kept_result_bytes": (
        lambda: Tasks(max_result_bytes=100, max_result_bytes_per_caller=2000, max_kept_result_bytes=1000),
        "Tasks.max_kept_result_bytes",
    ),
    "max_kept_result_bytes of 0": (lambda: Tasks(max_kept_result_bytes=0), "Tasks.max_kept_result_bytes"),
    "an infinite poll_interval_s": (lambda: Tasks(poll_interval_s=float("inf")), "Tasks.poll_interval_s"),
    "a lease_s of 0": (lambda: Tasks(lease_s=0), "Tasks.lease_s"),
    "task='sometimes'": (lambda: mcp_tool(task="sometimes"), "'task'"),
    "tasks not a Tasks": (lambda: mcp_routes(FastAPI(), tasks={"ttl_s": 1}), "Tasks(...)"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", INVALID_OPTIONS.values(), ids=INVALID_OPTIONS.keys())
def test_invalid_task_options_are_refused_naming_the_option(case: tuple[Callable[[], object], str]) -> None:
    make, named = case
    with pytest.raises(ValueError, match=re.escape(named)):
        make()
