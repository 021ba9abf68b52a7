"""What a review of the layer split tried as a new user and as an attacker, against a real
server: the findings it fixed, and the attacks that were refused all along."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI

from fastapi_mcp_routes import Sessions, ToolContext, mcp_routes, mcp_tool
from tests.support.jsonrpc import call_tool, open_session, tool_call
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

Context = Annotated[ToolContext, Depends()]
CAPABLE = {"elicitation": {}}  # a client that can ask its user
# DELETE ends the session's open GET stream at once: well within the keep-alive interval (15 s),
# whose renewal would find the session gone too.
DELETE_ENDS_WITHIN_S = 5.0


class Seen:
    """What the server-side routes did, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.actions: list[str] = []
        self.later: list[str] = []


seen = Seen()


@pytest.fixture(autouse=True)
def forget() -> None:
    seen.writes.clear()
    seen.actions.clear()
    seen.later.clear()


def make_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

    @mcp_tool(confirm=False)
    @app.post("/orders")
    async def place_order(ctx: Context, tasks: BackgroundTasks) -> dict[str, bool]:
        seen.writes.append("order")  # the mutation is done; the REST client gets 200

        async def follow_up() -> None:
            # Asked after the response: over REST this raises; as a tool it must not undo the call.
            try:
                answer = await ctx.elicit("Send a receipt?", {"type": "object", "properties": {}})
                seen.later.append(answer.action)
            except Exception as exc:
                seen.later.append(type(exc).__name__)

        tasks.add_task(follow_up)
        return {"placed": True}

    @mcp_tool(confirm=False)
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Go?", {"type": "object", "properties": {}})
        seen.actions.append(answer.action)
        return {"action": answer.action}

    @mcp_tool()
    @app.get("/status")
    def status() -> dict[str, bool]:
        return {"up": True}

    @mcp_tool()
    @app.post("/notes")
    def add_note(text: str) -> dict[str, str]:
        seen.writes.append(text)
        return {"noted": text}

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


def stateless_call(http: httpx.Client, name: str, arguments: dict[str, Any], **extra: Any) -> httpx.Response:
    params = {"name": name, "arguments": arguments, **extra}
    return post_stateless(http, "tools/call", params, meta=stateless_meta(CAPABLE))


# -- a question asked after the route's response ----------------------------------------------


def test_a_question_asked_by_a_background_task_after_the_response_does_not_make_the_call_run_again(
    base_url: str,
) -> None:
    # the docs' "What a tool call does": the tool result is what the route answered. A background
    # task runs after that answer; were the call stopped there, it would answer
    # `input_required` for a mutation already done, and the retry would run it a second time.
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        first = stateless_call(http, "place_order", {}).json()["result"]
        if first["resultType"] == "input_required":
            [key] = first["inputRequests"]
            answers = {key: {"action": "accept", "content": {}}}
            stateless_call(http, "place_order", {}, requestState=first["requestState"], inputResponses=answers)
    assert first["resultType"] == "complete"
    assert first["structuredContent"] == {"placed": True}
    assert seen.writes == ["order"]
    # The task that asked learns why its question went nowhere.
    assert seen.later == ["ToolContextError"]


# -- one GET stream per session, however long it stays open ------------------------------------


def test_a_session_has_one_get_stream_for_as_long_as_that_stream_stays_open() -> None:
    # the docs' "GET stream": one at a time (a second gets 409). The claim is taken for
    # `Sessions.idle_s`, and the open stream keeps the session alive past that, so after idle_s
    # a second GET stream of the same session is accepted (with the default, after 30 minutes).
    with serve(make_app(sessions=Sessions(idle_s=1))) as url, httpx.Client(base_url=url, timeout=5) as http:
        session = open_session(http)
        with http.stream("GET", "/mcp", headers=session) as first:
            assert first.status_code == 200
            time.sleep(1.5)  # a clock passing: the open stream outlives idle_s
            with httpx.Client(base_url=url, timeout=5) as other, other.stream("GET", "/mcp", headers=session) as second:
                status = second.status_code
    assert status == 409


# -- only the spec's three elicitation actions reach a route --------------------------------------


def test_a_route_only_ever_sees_accept_decline_or_cancel_as_an_elicitation_action(base_url: str) -> None:
    # Spec 2025-11-25 client/elicitation, ElicitResult.action: "accept" | "decline" | "cancel".
    # Any other answer is taken as the user not answering, so a route that tests
    # `action == "decline"` cannot be walked past with "maybe".
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        for action in ("maybe", 5, None):
            answers = {"elicitation-1": {"action": action, "content": {"go": True}}}
            assert stateless_call(http, "ask", {}, inputResponses=answers).status_code == 200
    assert seen.actions == ["cancel", "cancel", "cancel"]


# -- what held up (kept as regression checks) ----------------------------------------------------


def test_a_reply_or_cancellation_from_another_session_changes_nothing_and_the_owner_still_decides(
    base_url: str,
) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        owner = open_session(http, capabilities=CAPABLE)
        stranger = open_session(http, capabilities=CAPABLE)
        result: dict[str, Any] = {}
        with http.stream("POST", "/mcp", json=tool_call("ask"), headers=owner) as stream:
            lines = stream.iter_lines()
            question = next(iter_sse_messages(lines))
            foreign_reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {}}}
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
            assert http.post("/mcp", json=foreign_reply, headers=stranger).status_code == 202
            assert http.post("/mcp", json=cancel, headers=stranger).status_code == 202
            declined = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
            assert http.post("/mcp", json=declined, headers=owner).status_code == 202
            assert http.post("/mcp", json=foreign_reply, headers=owner).status_code == 202  # a duplicate
            result = next(message for message in iter_sse_messages(lines) if message.get("id") == 1)
    assert result["result"]["structuredContent"] == {"action": "decline"}
    assert seen.actions == ["decline"]


def test_a_closed_get_stream_releases_its_claim_and_delete_ends_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        session = open_session(http)
        with http.stream("GET", "/mcp", headers=session) as first:
            assert first.status_code == 200
            assert http.get("/mcp", headers=session).status_code == 409
        statuses: list[int] = []
        opened = threading.Event()  # the reader's GET stream is open (200)
        ended = threading.Event()  # and the server ended it

        def read() -> None:
            deadline = time.monotonic() + WAIT_S
            with httpx.Client(base_url=base_url, timeout=WAIT_S) as reader:
                # The first stream's claim goes once the server has seen that stream close.
                while time.monotonic() < deadline:
                    with reader.stream("GET", "/mcp", headers=session) as stream:
                        statuses.append(stream.status_code)
                        if stream.status_code == 200:
                            opened.set()
                            for _ in stream.iter_lines():
                                pass
                            ended.set()
                            return
                    time.sleep(0.05)

        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        assert opened.wait(WAIT_S), (
            f"the claim of the closed GET stream was never released: {len(statuses)} GETs answered {set(statuses)}"
        )
        assert http.get("/mcp", headers=session).status_code == 409  # the reader's stream holds it now
        assert not ended.is_set()
        assert http.delete("/mcp", headers=session).status_code == 204
        assert ended.wait(DELETE_ENDS_WITHIN_S), "DELETE did not end the session's open GET stream"
        thread.join(WAIT_S)


def test_a_credentialed_caller_past_its_own_session_cap_closes_only_its_own(base_url: str) -> None:
    app = make_app(sessions=Sessions(max_sessions=100, max_per_caller=2))
    # Keys the endpoint cannot check count per client address: mallory connects from another.
    elsewhere = httpx.HTTPTransport(local_address="127.0.0.2")
    with (
        serve(app) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
        httpx.Client(base_url=url, timeout=WAIT_S, transport=elsewhere) as mallory,
    ):
        bob = open_session(http, headers={"x-api-key": "bob-key"})
        for _ in range(5):
            open_session(mallory, headers={"x-api-key": "mallory-key"})
        assert call_tool(http, "status", headers=bob)["structuredContent"] == {"up": True}
