"""The tool-call pipeline, step by step, with a fake invoke in place of the app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest
from fastapi import FastAPI

from fastapi_mcp_routes import ToolCallEvent, mcp_tool
from fastapi_mcp_routes.server.call import InputRequest, ToolCall
from fastapi_mcp_routes.server.channel import ClientChannel, SessionChannel, StatelessChannel
from fastapi_mcp_routes.server.confirmation.gate import ConfirmationGate, TokenStore
from fastapi_mcp_routes.server.envelope import Envelope, ResultShaper
from fastapi_mcp_routes.server.pipeline import ToolCallPipeline, parse_call
from fastapi_mcp_routes.server.sealing.request_state import RequestStateSealer
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.tools.invoke import Caller, CapturedResponse
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import (
    CallCancelled,
    InvalidParams,
    InvalidRequest,
    MissingClientCapability,
    ToolContextError,
    ToolError,
)
from fastapi_mcp_routes.wire.json import RawJSON, loads
from fastapi_mcp_routes.wire.jsonrpc import Request
from tests.support.confirmation import pending_of
from tests.support.deployments import one_process

CALLER = Caller(headers=(), client=None, server=None, scheme="http", root_path="", http_version="1.1", state=None)
JSON = ((b"content-type", b"application/json"),)
ELICITATION = {"elicitation": {}}


def registry() -> ToolRegistry:
    app = FastAPI()

    @mcp_tool()
    @app.get("/items/{item_id}")
    def get_item(item_id: int) -> dict[str, int]:
        return {"id": item_id}

    @mcp_tool()
    @app.post("/orders")
    def place_order(name: str) -> dict[str, str]:
        return {"name": name}

    return ToolRegistry(app, frozenset(), confirm_mutations=True)


def session_channel() -> SessionChannel:
    return SessionChannel(caller=CALLER, principal=None, identity=b"alice", protocol_version="2025-11-25")


def stateless_channel(capabilities: Mapping[str, Any] | None = None) -> StatelessChannel:
    envelope = Envelope("2026-07-28", dict(capabilities or {}), None, None, {})
    return StatelessChannel(
        caller=CALLER,
        principal=None,
        identity=b"alice",
        envelope=envelope,
        sealer=RequestStateSealer(SECRET),
        shaper=ResultShaper({"name": "t", "version": "1"}),
    )


# One secret for every round of a call, as one process has.
SECRET = one_process().secret


class FakeApp:
    """Stands in for the route: answers, raises, or asks, and remembers what it saw."""

    def __init__(self, behaviour: str = "ok") -> None:
        self.behaviour = behaviour
        self.calls: list[Mapping[str, Any]] = []

    async def __call__(self, tool: Tool, arguments: Mapping[str, Any], call: ToolCall) -> CapturedResponse:
        self.calls.append(arguments)
        if self.behaviour == "invalid":
            raise ToolError("Argument 'item_id' must be a non-empty path segment without '/'.")
        if self.behaviour == "no capability":
            raise ToolContextError("the client did not declare the 'sampling' capability")
        if self.behaviour == "crash":
            raise RuntimeError("the database is down")
        if self.behaviour == "ask":
            answers = await call.ask({"colour": InputRequest.elicitation("Colour?", {"type": "object"})})
            return CapturedResponse(200, JSON, b'{"colour": "%s"}' % str(answers["colour"]).encode())
        if self.behaviour == "hang":
            await anyio.sleep_forever()
        return CapturedResponse(200, JSON, b'{"id": 7}')


def pipeline(app: FakeApp, events: list[ToolCallEvent] | None = None) -> ToolCallPipeline:
    store = MemoryStore()
    gate = ConfirmationGate(tokens=TokenStore(one_process(store), capacity=100, per_caller=10))
    return ToolCallPipeline(
        app=FastAPI(),
        registry=registry(),
        gate=gate,
        on_tool_call=(events.append if events is not None else lambda event: None),
        invoker=app,
    )


def call(name: str, arguments: Mapping[str, Any], request_id: int = 1, **params: Any) -> Request:
    return Request(request_id, "tools/call", {"name": name, "arguments": dict(arguments), **params})


# -- step 1: parse -------------------------------------------------------------------------------


def test_parse_takes_the_confirmation_token_out_of_the_routes_arguments() -> None:
    parsed = parse_call({"name": "place_order", "arguments": {"name": "tea", "confirmationToken": "t"}}, registry())
    assert parsed.tool.name == "place_order"
    assert parsed.arguments == {"name": "tea"}
    assert parsed.token == "t"


@pytest.mark.anyio
async def test_a_call_keeps_a_progress_token_only_when_it_is_a_string_or_an_integer() -> None:
    params: dict[str, Any] = {"name": "get_item", "arguments": {}, "_meta": {"progressToken": True}}
    assert ToolCall.of(1, params, session_channel(), "get_item", {}, {}).progress_token is None
    params["_meta"] = {"progressToken": 5}
    assert ToolCall.of(1, params, session_channel(), "get_item", {}, {}).progress_token == 5


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": 5}, "'name' must be a string"),
        ({"name": "get_item", "arguments": []}, "'arguments' must be an object"),
        ({"name": "nope"}, "Unknown tool: 'nope'"),
    ],
)
def test_parse_refuses_params_of_the_wrong_shape(params: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParams, match=message):
        parse_call(params, registry())


# -- steps 2 to 4, with the audit around them --------------------------------------------------


@pytest.mark.anyio
async def test_a_call_that_runs_is_its_routes_result_and_one_audit_event() -> None:
    events: list[ToolCallEvent] = []
    result = await pipeline(FakeApp(), events)(call("get_item", {"item_id": 7}), session_channel())
    assert result["structuredContent"] == {"id": 7}
    assert [(event.tool, event.outcome, event.status) for event in events] == [("get_item", "ok", 200)]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("behaviour", "outcome", "text"),
    [
        ("invalid", "invalid_arguments", "non-empty path segment"),
        ("no capability", "error", "The tool could not finish: the client did not declare"),
        ("crash", "crashed", "internal error. Reference:"),
    ],
)
async def test_a_failing_call_is_an_error_result_the_model_can_read(behaviour: str, outcome: str, text: str) -> None:
    events: list[ToolCallEvent] = []
    result = await pipeline(FakeApp(behaviour), events)(call("get_item", {"item_id": 7}), session_channel())
    assert result["isError"] is True
    assert text in result["content"][0]["text"]
    assert "database" not in result["content"][0]["text"]  # nothing of the exception leaks
    assert [event.outcome for event in events] == [outcome]


@pytest.mark.anyio
async def test_a_gated_call_without_confirmation_runs_nothing_and_answers_a_plan() -> None:
    app, events = FakeApp(), []
    result = await pipeline(app, events)(call("place_order", {"name": "tea"}), session_channel())
    assert pending_of(result)["pending"] is True
    assert pending_of(result)["plan"] == {"method": "POST", "path": "/orders", "arguments": {"name": "tea"}}
    assert app.calls == []
    assert [event.outcome for event in events] == ["confirmation_required"]


@pytest.mark.anyio
async def test_a_stateless_question_ends_the_call_input_required_and_the_answer_runs_it() -> None:
    app = FakeApp("ask")
    steps = pipeline(app)
    asked = await steps(call("get_item", {"item_id": 7}), stateless_channel(ELICITATION))
    assert asked["resultType"] == "input_required"
    assert list(asked["inputRequests"]) == ["colour"]
    answer = {"colour": {"action": "accept", "content": {"colour": "red"}}}
    retry = call("get_item", {"item_id": 7}, inputResponses=answer, requestState=asked["requestState"])
    done = await steps(retry, stateless_channel(ELICITATION))
    assert "accept" in done["content"][0]["text"]
    assert len(app.calls) == 2  # the route ran again from the start, with the answer


@pytest.mark.anyio
async def test_a_stateless_question_without_the_capability_is_a_protocol_error() -> None:
    with pytest.raises(MissingClientCapability):
        await pipeline(FakeApp("ask"))(call("get_item", {"item_id": 7}), stateless_channel())


@pytest.mark.anyio
async def test_a_cancelled_call_is_not_answered_and_frees_its_id() -> None:
    steps, channel = pipeline(FakeApp("hang")), session_channel()

    async def cancel_soon() -> None:
        while 1 not in channel.running():
            await anyio.sleep(0)
        await channel.cancel({"requestId": 1})

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_soon)
            with pytest.raises(CallCancelled):
                await steps(call("get_item", {"item_id": 7}), channel)
    assert channel.running() == {}


@pytest.mark.anyio
async def test_a_second_call_with_the_id_of_a_running_one_is_refused() -> None:
    events: list[ToolCallEvent] = []
    steps, channel = pipeline(FakeApp(), events), session_channel()
    first = channel.running()[1] = anyio.CancelScope()
    with pytest.raises(InvalidRequest, match="still running"):
        await steps(call("get_item", {"item_id": 7}), channel)
    # Refused before it ran: not audited, and the running call keeps its id.
    assert events == []
    assert channel.running() == {1: first}


def test_channels_of_both_eras_answer_the_same_questions() -> None:
    channels: list[ClientChannel] = [session_channel(), stateless_channel({"sampling": {}})]
    ask = InputRequest.sampling([], 10)
    assert [channel.cannot_ask(ask) is None for channel in channels] == [False, True]
    # The session era without a session logs everything; the stateless one only what it asked for.
    assert [channel.wants_log("debug") for channel in channels] == [True, False]


def test_a_pre_encoded_empty_object_is_shaped_whole_in_the_stateless_revision() -> None:
    shaper = ResultShaper({"name": "t", "version": "1"})
    shaped = shaper.shape("tools/list", RawJSON(b"{}"))
    assert isinstance(shaped, RawJSON)
    assert loads(shaped.data) == {
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "t", "version": "1"}},
    }
