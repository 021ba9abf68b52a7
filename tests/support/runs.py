"""Runs of many clients at once across several processes of tests/workers_app.py, and the tally
of how they went: which operations succeeded, why the others failed, which processes served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from mcp import types

from tests.support.confirmation import is_pending, sdk_pending_of
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, final_message, initialize, refusal, tool_call
from tests.support.sdk import mcp_client
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

WORKERS_APP = "tests.workers_app:app"
CONCURRENT_SESSIONS = 5  # two cores serve the servers and the clients
PID_HEADER = "x-worker-pid"
FRESH_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)  # a new connection per request
ELICITATION: dict[str, Any] = {"elicitation": {}}  # the capability of a client that can ask its user
ORDER = {"item": "tea", "quantity": 2}
COLOUR = {"colour": "teal"}


@dataclass
class Tally:
    """How a run went: the operations that succeeded, why the others failed (an error, a
    refusal, an error result; an error ends its session), and which processes served them."""

    succeeded: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    pids: set[str] = field(default_factory=set)

    def failed(self, reason: str) -> None:
        self.failures[reason[:300]] += 1

    def note(self, response: httpx.Response) -> dict[str, Any] | None:
        """Count one answer over plain HTTP; its result when it succeeded."""
        self.pids.add(response.headers.get(PID_HEADER, "none"))
        message = final_message(response)
        reason = refusal(message) if message is not None else "no JSON-RPC answer"
        if message is None or reason is not None:
            self.failed(f"{response.status_code} {reason}")
            return None
        self.succeeded += 1
        result: dict[str, Any] = message["result"]
        return result

    def note_result(self, result: types.CallToolResult) -> None:
        """Count one SDK tool call, whose structured result says which process ran it."""
        if result.is_error:
            text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
            self.failed(f"isError: {text}")
            return
        self.succeeded += 1
        self.pids.add(str((result.structured_content or {}).get("pid", "none")))

    def add(self, other: Tally) -> None:
        self.succeeded += other.succeeded
        self.failures.update(other.failures)
        self.pids |= other.pids

    def report(self) -> str:
        reasons = "; ".join(f"{count} x {reason}" for reason, count in self.failures.most_common())
        return f"{self.failures.total()} failures ({reasons}), {self.succeeded} successes"


async def over_processes(run: Callable[[], Awaitable[Tally]], processes: int, tries: int = 3) -> Tally:
    """`run`, again (at most `tries` times in all) until `processes` processes served it, or
    something failed: uvicorn's workers take connections as the kernel hands them out, and on a
    busy machine one worker may take a whole run."""
    total = Tally()
    for _ in range(tries):
        total.add(await run())
        if len(total.pids) >= processes or total.failures:
            break
    return total


def assert_all_succeeded(tally: Tally, processes: int) -> None:
    """Every operation of the run succeeded, served by this many processes."""
    assert not tally.failures, tally.report()
    assert len(tally.pids) == processes, f"served by {sorted(tally.pids)}, expected {processes} processes"


def describe(error: BaseException) -> str:
    """An error in a line: the first of a group, by type and message."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


async def a_few_at_once(task: Callable[[], Awaitable[None]], times: int, tally: Tally) -> None:
    """Run `task` `times` times, `CONCURRENT_SESSIONS` at once (one client at a time would find
    one uvicorn worker taking nearly every connection), each within `WAIT_S`. An error ends its
    task and is counted as a failure; the first task that hangs stops the run."""
    limiter = anyio.CapacityLimiter(CONCURRENT_SESSIONS)
    async with anyio.create_task_group() as running:

        async def bounded() -> None:
            async with limiter:
                try:
                    with anyio.fail_after(WAIT_S):
                        await task()
                except TimeoutError:
                    tally.failed(f"no answer within {WAIT_S} s: the run stopped there")
                    running.cancel_scope.cancel()
                except Exception as error:
                    tally.failed(describe(error))

        for _ in range(times):
            running.start_soon(bounded)


async def sessions_over_fresh_connections(url: str, sessions: int, calls: int) -> Tally:
    """Session-era sessions over plain HTTP, a new connection for each request (as clients
    without a pool, and balancers that turn per connection, send them)."""
    tally = Tally()
    opening = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:

        async def one_session() -> None:
            opened = await http.post("/mcp", json=initialize(), headers=opening)
            if tally.note(opened) is None:
                return
            headers = {**opening, "mcp-session-id": opened.headers["mcp-session-id"]}
            for number in range(calls):
                call = tool_call("read_note", {"note_id": number}, request_id=number + 1)
                tally.note(await http.post("/mcp", json=call, headers=headers))

        await a_few_at_once(one_session, sessions, tally)
    return tally


async def sdk_sessions(url: str, mode: str, sessions: int, calls: int) -> Tally:
    """The official client's sessions (`legacy`), or its stateless calls (`auto`)."""
    tally = Tally()

    async def one_session() -> None:
        async with mcp_client(url, mode=mode) as client:
            for number in range(calls):
                tally.note_result(await client.call_tool("read_note", {"note_id": number}))

    await a_few_at_once(one_session, sessions, tally)
    return tally


async def stateless_rounds(url: str, rounds: int) -> Tally:
    """2026-07-28 requests, a new connection each: a list, a read, and a mutation the user
    confirms through `input_required`, whose retry carries the requestState."""
    tally = Tally()
    capable = stateless_meta(ELICITATION)
    order = {"name": "place_order", "arguments": ORDER}
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:

        async def post(
            method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
        ) -> dict[str, Any] | None:
            headers = stateless_headers(method, params.get("name"))
            return tally.note(await http.post("/mcp", json=stateless_request(method, params, meta), headers=headers))

        async def one_round() -> None:
            await post("tools/list", {})
            await post("tools/call", {"name": "read_note", "arguments": {"note_id": 1}})
            asked = await post("tools/call", order, capable)
            if asked is None:
                return
            if asked.get("resultType") != "input_required":
                tally.failed(f"a mutation ran unconfirmed: {asked!r}")
                return
            [key] = asked["inputRequests"]
            answer = {key: {"action": "accept", "content": {}}}
            done = await post(
                "tools/call", {**order, "requestState": asked["requestState"], "inputResponses": answer}, capable
            )
            if done is not None and "order" not in done.get("structuredContent", {}):
                tally.failed(f"a confirmed mutation did not run: {done!r}")

        await a_few_at_once(one_round, rounds, tally)
    return tally


async def sdk_confirmed_mutations(url: str, mode: str, sessions: int) -> tuple[Tally, int]:
    """The official client's sessions whose calls ask the user, who accepts: two orders (the
    confirmation asks) and a question the route asks; and how many questions came."""
    tally = Tally()
    asked = 0

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        return types.ElicitResult(action="accept", content=dict(COLOUR) if params.message == "Which colour?" else {})

    async def one_session() -> None:
        async with mcp_client(url, mode=mode, elicitation_callback=on_elicit) as client:
            for _ in range(2):
                ordered = await client.call_tool("place_order", ORDER)
                tally.note_result(ordered)
                if not ordered.is_error and "order" not in (ordered.structured_content or {}):
                    tally.failed(f"a confirmed mutation did not run: {ordered.structured_content!r}")
            answered = await client.call_tool("ask", {})
            tally.note_result(answered)
            if (answered.structured_content or {}).get("content") != COLOUR:
                tally.failed(f"the route did not get the answer: {answered.structured_content!r}")

    await a_few_at_once(one_session, sessions, tally)
    return tally, asked


async def sdk_token_mutations(url: str, mode: str, mutations: int) -> Tally:
    """The official client's sessions (`legacy`) or stateless calls (`auto`) with no way to ask
    its user: each order comes back as a plan and a confirmation token, and runs once called
    again with the token, which a balancer may send to another process than the one that issued it."""
    tally = Tally()

    async def one_mutation() -> None:
        async with mcp_client(url, mode=mode) as client:
            planned = await client.call_tool("place_order", ORDER)
            if not is_pending(planned.model_dump(by_alias=True, exclude_none=True)):
                tally.failed(f"a mutation gave no plan to confirm: {planned.content!r}")
                return
            token = sdk_pending_of(planned)["token"]
            ordered = await client.call_tool("place_order", {**ORDER, "confirmationToken": token})
            tally.note_result(ordered)
            if not ordered.is_error and "order" not in (ordered.structured_content or {}):
                tally.failed(f"a confirmed mutation did not run: {ordered.structured_content!r}")

    await a_few_at_once(one_mutation, mutations, tally)
    return tally
