"""Confirming mutations: a tool that changes data runs only once its call is confirmed, by a
single-use token bound to the caller, the tool and the arguments, or by the user through the
client (elicitation in a session, an input request in the stateless revision)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI
from mcp import Client, types
from pydantic import BaseModel

from fastapi_mcp_routes import ToolCalls, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.call import QUESTION_KEY, STATE_KEY
from fastapi_mcp_routes.server.confirmation.gate import PLAN_META_KEY, Kind, Refused, TokenStore
from fastapi_mcp_routes.server.sealing.secret import KEY_ID_BYTES, TAG_BYTES
from fastapi_mcp_routes.store.base import Holder, Trust
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.tools.registry import ToolRegistry
from tests.support.confirmation import pending_of, sdk_pending_of
from tests.support.deployments import one_process
from tests.support.jsonrpc import call_tool, open_session
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio


def anonymous(caller: bytes) -> Holder:
    return Holder(caller, Trust.ANONYMOUS)


class Item(BaseModel):
    name: str
    quantity: int = 1


class Order(BaseModel):
    id: int
    shop: str
    item: Item


class Ledger:
    def __init__(self) -> None:
        self.orders: list[Order] = []
        self.answers: list[Any] = []


ledger = Ledger()


def make_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

    @mcp_tool()
    @app.post("/shops/{shop}/orders", response_model=Order, status_code=201)
    def place_order(shop: str, item: Item) -> Order:
        order = Order(id=len(ledger.orders) + 1, shop=shop, item=item)
        ledger.orders.append(order)
        return order

    @mcp_tool()
    @app.get("/orders")
    def count_orders() -> dict[str, int]:
        return {"orders": len(ledger.orders)}

    @mcp_tool(confirm=False)
    @app.post("/notes")
    def jot(text: str) -> dict[str, str]:
        return {"noted": text}

    @mcp_tool(confirm=True)
    @app.get("/export")
    def export() -> dict[str, str]:
        return {"export": "everything"}

    @mcp_tool()
    @app.post("/survey")
    async def survey(ctx: Annotated[ToolContext, Depends()]) -> dict[str, Any]:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        ledger.answers.append(answer.content)
        return {"name": (answer.content or {}).get("name")}

    @mcp_tool(confirm=False)
    @app.post("/sneaky")
    async def sneaky(ctx: Annotated[ToolContext, Depends()]) -> dict[str, str]:
        answer = await ctx.elicit("Go?", {"type": "object", "properties": {}}, key="fastapi-mcp-routes/confirm")
        return {"action": answer.action}

    return app


@pytest.fixture(autouse=True)
def empty_ledger() -> None:
    ledger.orders.clear()
    ledger.answers.clear()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


def stateless(
    http: httpx.Client,
    name: str,
    arguments: dict[str, Any],
    capabilities: dict[str, Any] | None = None,
    who: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One 2026-07-28 tools/call, with the headers a conforming client sends; its result.
    `who`: the caller's bearer credential; `extra`: more params (requestState, inputResponses)."""
    params = {"name": name, "arguments": arguments, **extra}
    credential = {"authorization": f"Bearer {who}"} if who is not None else {}
    response = post_stateless(http, "tools/call", params, meta=stateless_meta(capabilities), headers=credential)
    assert response.status_code in (200, 400), response.text  # a result, or a protocol error
    answer: dict[str, Any] = response.json()
    return answer.get("result", answer)


ORDER = {"shop": "north", "name": "tea", "quantity": 2}
CAPABLE = {"elicitation": {}}  # the client capabilities of one that can ask its user


# -- the token store ---------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def token_store(clock: Clock | None = None, capacity: int = 100, per_caller: int = 10) -> TokenStore:
    clock = clock or Clock()
    return TokenStore(one_process(MemoryStore(clock)), capacity=capacity, per_caller=per_caller, clock=clock)


async def refusal(store: TokenStore, token: object, caller: bytes, tool: str, digest: str, kind: Kind = "model") -> str:
    with pytest.raises(Refused) as refused:
        await store.redeem(token, caller, tool, digest, kind)
    return str(refused.value)


@pytest.mark.anyio
async def test_a_token_runs_one_call_of_the_tool_and_arguments_it_was_issued_for() -> None:
    store = token_store()
    token = await store.issue(b"alice", anonymous(b"alice"), "place_order", "d1", "model", expires=2e9)
    assert "issued for another tool" in await refusal(store, token, b"alice", "cancel_order", "d1")
    assert "other arguments" in await refusal(store, token, b"alice", "place_order", "d2")
    await store.redeem(token, b"alice", "place_order", "d1", "model")
    assert "already used" in await refusal(store, token, b"alice", "place_order", "d1")


@pytest.mark.anyio
async def test_a_foreign_expired_forged_or_other_kind_of_token_is_answered_alike() -> None:
    clock = Clock()
    store = token_store(clock)
    token = await store.issue(b"alice", anonymous(b"alice"), "t", "d", "model", expires=clock.now + 300)
    question = await store.issue(b"alice", anonymous(b"alice"), "t", "d", "question", expires=clock.now + 300)
    unknown = await refusal(store, "forged-token", b"alice", "t", "d")
    assert await refusal(store, token, b"mallory", "t", "d") == unknown  # says nothing of its owner
    assert await refusal(store, question, b"alice", "t", "d", "model") == unknown  # no argument
    assert await refusal(store, ["not", "a", "string"], b"alice", "t", "d") == unknown
    clock.now += 301
    assert await refusal(store, token, b"alice", "t", "d") == unknown


@pytest.mark.anyio
async def test_a_foreign_attempt_does_not_burn_the_owners_token() -> None:
    store = token_store()
    token = await store.issue(b"alice", anonymous(b"alice"), "t", "d", "model", expires=2e9)
    assert "not valid" in await refusal(store, token, b"mallory", "t", "d")
    await store.redeem(token, b"alice", "t", "d", "model")


@pytest.mark.anyio
async def test_a_revoked_token_cannot_run_anything() -> None:
    store = token_store()
    token = await store.issue(b"alice", anonymous(b"alice"), "t", "d", "question", expires=2e9)
    await store.revoke(token, b"alice")
    assert "already used" in await refusal(store, token, b"alice", "t", "d", "question")


@pytest.mark.anyio
async def test_a_full_store_drops_the_callers_own_oldest_token_first() -> None:
    store = token_store(capacity=3, per_caller=2)
    alice = await store.issue(b"alice", anonymous(b"alice"), "t", "d", "model", expires=2e9)
    first, second, third = [
        await store.issue(b"mallory", anonymous(b"mallory"), "t", "d", "model", expires=2e9) for _ in range(3)
    ]
    assert "not valid" in await refusal(store, first, b"mallory", "t", "d")  # mallory's own went first
    await store.redeem(alice, b"alice", "t", "d", "model")
    await store.redeem(third, b"mallory", "t", "d", "model")
    for _ in range(3):
        await store.issue(b"eve", anonymous(b"eve"), "t", "d", "model", expires=2e9)
    assert "not valid" in await refusal(store, second, b"mallory", "t", "d")  # then the oldest of all


def test_store_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        TokenStore(MemoryStore(), capacity=0, per_caller=1)


# -- what tools/list publishes -----------------------------------------------------------------


def test_gated_tools_declare_the_token_argument_and_keep_the_routes_output_schema(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        tools = {tool["name"]: tool for tool in post_stateless(http, "tools/list").json()["result"]["tools"]}
    gated = {name for name, tool in tools.items() if "confirmationToken" in tool["inputSchema"]["properties"]}
    assert gated == {"place_order", "survey", "export"}  # not the GET, not confirm=False
    assert "confirmationToken" not in tools["place_order"]["inputSchema"].get("required", [])
    # Nullable: a strict converter makes it required, and a strict model then sends null for none.
    token = tools["place_order"]["inputSchema"]["properties"]["confirmationToken"]
    assert token["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "null or an empty string" in token["description"]
    # The pending answer is an isError result, so the outputSchema is the route's own, as if
    # the tool were not gated: clients that type results get the route's type.
    ungated = ToolRegistry(make_app(), frozenset(), confirm_mutations=False).table().by_name["place_order"]
    assert tools["place_order"]["outputSchema"] == ungated.definition["outputSchema"]
    assert "anyOf" not in tools["place_order"]["outputSchema"]


def test_an_argument_named_like_the_token_is_a_startup_error() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/pay")
    def pay(confirmationToken: str) -> None:
        return None

    with pytest.raises(ValueError, match="'confirmationToken' is taken by mutation confirmation"):
        ToolRegistry(app, frozenset(), confirm_mutations=True).table()
    assert ToolRegistry(app, frozenset(), confirm_mutations=False).table().by_name["pay"].confirm is False


# -- the token flow ----------------------------------------------------------------------------


def test_a_first_call_runs_nothing_and_returns_the_plan_and_a_token(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "place_order", ORDER)
    assert ledger.orders == []
    pending = pending_of(result)  # an isError result with no structuredContent, the plan in _meta
    assert isinstance(pending["token"], str)
    assert pending["plan"] == {"method": "POST", "path": "/shops/north/orders", "arguments": ORDER}
    assert "confirmationToken" in result["content"][0]["text"]


@pytest.mark.parametrize("none", ["", None], ids=["empty", "null"])
def test_an_empty_or_null_token_is_no_token(base_url: str, none: str | None) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        pending = pending_of(stateless(http, "place_order", {**ORDER, "confirmationToken": none}))
        asked = stateless(http, "place_order", {**ORDER, "confirmationToken": none}, CAPABLE)
        done = stateless(http, "place_order", {**ORDER, "confirmationToken": pending["token"]})
    assert asked["resultType"] == "input_required"
    assert done["structuredContent"]["shop"] == "north"
    assert len(ledger.orders) == 1


def test_the_token_runs_the_call_once(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        token = pending_of(stateless(http, "place_order", ORDER))["token"]
        done = stateless(http, "place_order", {**ORDER, "confirmationToken": token})
        replayed = stateless(http, "place_order", {**ORDER, "confirmationToken": token})
    assert done["structuredContent"]["item"] == {"name": "tea", "quantity": 2}
    assert replayed["isError"] is True
    assert "already used" in replayed["content"][0]["text"]
    assert len(ledger.orders) == 1


@pytest.mark.parametrize(
    ("attempt", "message"),
    [
        ("other arguments", "issued for other arguments"),
        ("another caller", "not valid"),
        ("another tool", "issued for another tool"),
        ("forged", "not valid"),
    ],
)
def test_a_token_used_otherwise_than_issued_is_refused(base_url: str, attempt: str, message: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        token = pending_of(stateless(http, "place_order", who="alice", arguments=ORDER))["token"]
        if attempt == "other arguments":
            refused = stateless(
                http, "place_order", who="alice", arguments={**ORDER, "quantity": 200, "confirmationToken": token}
            )
        elif attempt == "another caller":
            refused = stateless(http, "place_order", who="mallory", arguments={**ORDER, "confirmationToken": token})
        elif attempt == "another tool":
            refused = stateless(http, "export", who="alice", arguments={"confirmationToken": token})
        else:
            refused = stateless(
                http, "place_order", who="alice", arguments={**ORDER, "confirmationToken": token[:-4] + "AAAA"}
            )
        assert refused["isError"] is True
        assert message in refused["content"][0]["text"]
        assert ledger.orders == []
        # The token is still good for the call it was issued for.
        done = stateless(http, "place_order", who="alice", arguments={**ORDER, "confirmationToken": token})
    assert "isError" not in done
    assert len(ledger.orders) == 1


def test_read_only_and_opted_out_tools_run_at_once_and_confirm_true_gates_a_get(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        counted = stateless(http, "count_orders", {})
        jotted = stateless(http, "jot", {"text": "hi"})
        exported = stateless(http, "export", {})
    assert counted["structuredContent"] == {"orders": 0}
    assert jotted["content"][0]["text"] == '{"noted":"hi"}'
    assert pending_of(exported)["pending"] is True


def test_without_the_default_mutations_run_at_once_and_take_no_token() -> None:
    with (
        serve(make_app(tool_calls=ToolCalls(require_confirmation_for_mutations=False))) as url,
        httpx.Client(base_url=url) as http,
    ):
        done = stateless(http, "place_order", ORDER)
        refused = stateless(http, "place_order", {**ORDER, "confirmationToken": "x"})
    assert done["structuredContent"]["shop"] == "north"
    assert refused["isError"] is True
    assert "confirmationToken" in refused["content"][0]["text"]


def test_invalid_arguments_are_reported_before_any_token_is_issued(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "place_order", {"shop": "north", "nme": "tea"})
    assert result["isError"] is True
    assert "'nme'" in result["content"][0]["text"]


async def test_the_sdk_client_confirms_with_the_token_in_a_session(base_url: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with Client(f"{base_url}/mcp", mode="legacy") as client:
            pending = await client.call_tool("place_order", ORDER)  # the SDK validates it against outputSchema
            token = sdk_pending_of(pending)["token"]
            done = await client.call_tool("place_order", {**ORDER, "confirmationToken": token})
    assert not done.is_error
    assert done.structured_content == {"id": 1, "shop": "north", "item": {"name": "tea", "quantity": 2}}


# -- asking the user through the client ---------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_client_that_can_elicit_asks_its_user_instead(base_url: str, mode: str, action: str) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action=action, content={} if action == "accept" else None)

    with anyio.fail_after(WAIT_S):
        async with Client(f"{base_url}/mcp", mode=mode, elicitation_callback=on_elicit) as client:
            result = await client.call_tool("place_order", ORDER)
    [params] = asked
    plan = 'POST /shops/north/orders with name="tea", quantity=2, shop="north"'
    assert params.message == f"Allow place_order to run {plan}?"
    assert params.meta is not None
    assert params.meta[PLAN_META_KEY] == {"method": "POST", "path": "/shops/north/orders", "arguments": ORDER}
    if action == "accept":
        assert not result.is_error
        assert result.structured_content is not None
        assert result.structured_content["shop"] == "north"
        assert len(ledger.orders) == 1
    else:
        assert result.is_error
        assert "declined" in result.content[0].text
        assert ledger.orders == []


def test_a_stateless_confirmation_runs_once_and_a_replayed_state_is_refused(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        assert asked["resultType"] == "input_required"
        [key] = asked["inputRequests"]
        retry = {"requestState": asked["requestState"], "inputResponses": {key: {"action": "accept", "content": {}}}}
        done = stateless(http, "place_order", ORDER, CAPABLE, **retry)
        replayed = stateless(http, "place_order", ORDER, CAPABLE, **retry)
    assert done["structuredContent"]["shop"] == "north"
    assert replayed["isError"] is True
    assert "already used" in replayed["content"][0]["text"]
    assert len(ledger.orders) == 1


def test_a_stateless_retry_without_the_answer_is_asked_again(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        again = stateless(http, "place_order", ORDER, CAPABLE, requestState=asked["requestState"])
        [key] = again["inputRequests"]
        retry = {"requestState": again["requestState"], "inputResponses": {key: {"action": "accept"}}}
        done = stateless(http, "place_order", ORDER, CAPABLE, **retry)
    assert again["inputRequests"] == asked["inputRequests"]
    assert done["structuredContent"]["shop"] == "north"


def test_a_stateless_state_for_other_arguments_is_refused(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        [key] = asked["inputRequests"]
        retry = {"requestState": asked["requestState"], "inputResponses": {key: {"action": "accept"}}}
        refused = stateless(http, "place_order", {**ORDER, "quantity": 99}, CAPABLE, **retry)
    assert refused["error"]["message"] == "Invalid or expired requestState."
    assert ledger.orders == []


async def test_a_confirmed_stateless_call_whose_route_asks_too_is_not_confirmed_twice(base_url: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={} if len(asked) == 1 else {"name": "Ada"})

    with anyio.fail_after(WAIT_S):
        async with Client(f"{base_url}/mcp", elicitation_callback=on_elicit) as client:
            result = await client.call_tool("survey", {})
    assert asked == ["Allow survey to run POST /survey with no arguments?", "Your name?"]
    assert result.structured_content == {"name": "Ada"}
    assert ledger.answers == [{"name": "Ada"}]


async def test_each_round_of_a_confirmed_call_whose_route_asks_is_audited_for_who_asked() -> None:
    # The gate's question is a confirmation; once the call is confirmed, the route's own is not.
    events: list[str] = []
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={} if len(asked) == 1 else {"name": "Ada"})

    with serve(make_app(tool_calls=ToolCalls(on_tool_call=lambda event: events.append(event.outcome)))) as url:
        with anyio.fail_after(WAIT_S):
            async with Client(f"{url}/mcp", elicitation_callback=on_elicit) as client:
                result = await client.call_tool("survey", {})
    assert asked == ["Allow survey to run POST /survey with no arguments?", "Your name?"]
    assert result.structured_content == {"name": "Ada"}
    assert events == ["confirmation_required", "input_required", "ok"]


def test_the_audit_hook_sees_the_pending_and_the_confirmed_call() -> None:
    events: list[tuple[str, str]] = []
    app = make_app(
        tool_calls=ToolCalls(on_tool_call=lambda event: events.append((event.outcome, event.arguments_digest)))
    )
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        token = pending_of(stateless(http, "place_order", ORDER))["token"]
        stateless(http, "place_order", {**ORDER, "confirmationToken": token})
        stateless(http, "place_order", {**ORDER, "confirmationToken": token})
    assert [outcome for outcome, _ in events] == ["confirmation_required", "ok", "not_confirmed"]
    assert len({digest for _, digest in events}) == 1  # the token is not part of the arguments


def sealed_state(request_state: str) -> dict[str, Any]:
    """What a requestState carries: it is signed, not encrypted."""
    raw = base64.urlsafe_b64decode(request_state + "=" * (-len(request_state) % 4))
    sealed: dict[str, Any] = json.loads(raw[KEY_ID_BYTES:-TAG_BYTES])["a"]  # between key id and tag
    return sealed


def answer_question(http: httpx.Client, request_state: str, action: str) -> dict[str, Any]:
    """Retry the stateless order with the user's `action` on its confirmation question."""
    answer = {QUESTION_KEY: {"action": action}}
    return stateless(http, "place_order", ORDER, CAPABLE, requestState=request_state, inputResponses=answer)


def test_a_declined_stateless_confirmation_cannot_be_accepted_later(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        state = asked["requestState"]
        declined = answer_question(http, state, "decline")
        accepted = answer_question(http, state, "accept")
    assert declined["content"][0]["text"] == "Not run: the user declined this call."
    assert accepted["isError"] is True
    assert "already used" in accepted["content"][0]["text"]
    assert ledger.orders == []


def test_the_token_behind_a_stateless_question_is_no_confirmation_token(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        token = sealed_state(asked["requestState"])[STATE_KEY]["token"]
        refused = stateless(http, "place_order", {**ORDER, "confirmationToken": token})
    assert refused["isError"] is True
    assert "not valid" in refused["content"][0]["text"]
    assert ledger.orders == []


def test_an_answer_sent_before_the_question_was_asked_counts_for_nothing(base_url: str) -> None:
    early = {QUESTION_KEY: {"action": "accept"}, STATE_KEY: {"token": "x", "kind": "confirmed"}}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        asked = stateless(http, "place_order", ORDER, CAPABLE, inputResponses=early)
        state = asked["requestState"]
        declined = answer_question(http, state, "decline")
    assert asked["resultType"] == "input_required"
    assert QUESTION_KEY not in sealed_state(state)
    assert declined["content"][0]["text"] == "Not run: the user declined this call."
    assert ledger.orders == []


def test_a_route_cannot_ask_under_the_confirmations_keys(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "sneaky", {}, CAPABLE, inputResponses={QUESTION_KEY: {"action": "accept"}})
    assert result["isError"] is True
    assert "internal error" in result["content"][0]["text"]


async def test_a_token_from_one_sdk_session_runs_the_call_in_the_next(base_url: str) -> None:
    # What the MCP Inspector CLI and langchain-mcp-adapters' default get_tools() do: a new
    # session for every call. The token belongs to the caller, not to the session.
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as first:
            pending = await first.call_tool("place_order", ORDER)
        token = sdk_pending_of(pending)["token"]
        async with mcp_client(base_url) as second:
            done = await second.call_tool("place_order", {**ORDER, "confirmationToken": token})
        async with mcp_client(base_url) as third:
            replayed = await third.call_tool("place_order", {**ORDER, "confirmationToken": token})
    assert not done.is_error
    assert done.structured_content == {"id": 1, "shop": "north", "item": {"name": "tea", "quantity": 2}}
    assert replayed.is_error
    assert len(ledger.orders) == 1


def test_a_token_is_the_callers_in_any_of_its_sessions_and_no_one_elses(base_url: str) -> None:
    alice, mallory = {"authorization": "Bearer alice"}, {"authorization": "Bearer mallory"}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        first = open_session(http, headers=alice)
        token = pending_of(call_tool(http, "place_order", ORDER, headers=first))["token"]
        http.delete("/mcp", headers=first)  # the session that got the token is gone
        foreign = open_session(http, headers=mallory)
        refused = call_tool(http, "place_order", {**ORDER, "confirmationToken": token}, headers=foreign)
        stateless_refused = stateless(http, "place_order", {**ORDER, "confirmationToken": token}, who="mallory")
        assert ledger.orders == []
        again = open_session(http, headers=alice)
        done = call_tool(http, "place_order", {**ORDER, "confirmationToken": token}, headers=again)
    assert "not valid" in refused["content"][0]["text"]
    assert "not valid" in stateless_refused["content"][0]["text"]
    assert done["structuredContent"]["shop"] == "north"
    assert len(ledger.orders) == 1


def test_a_token_from_a_session_also_confirms_the_callers_stateless_call(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        session = open_session(http, headers={"authorization": "Bearer alice"})
        token = pending_of(call_tool(http, "place_order", ORDER, headers=session))["token"]
        done = stateless(http, "place_order", {**ORDER, "confirmationToken": token}, who="alice")
    assert done["structuredContent"]["shop"] == "north"


def test_a_2025_03_26_session_is_never_sent_an_elicitation(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        old = open_session(http, version="2025-03-26", capabilities=CAPABLE)
        result = call_tool(http, "place_order", ORDER, headers=old)
    assert pending_of(result)["pending"] is True


def test_the_stateless_question_is_audited_as_a_confirmation() -> None:
    events: list[str] = []
    with (
        serve(make_app(tool_calls=ToolCalls(on_tool_call=lambda event: events.append(event.outcome)))) as url,
        httpx.Client(base_url=url) as http,
    ):
        asked = stateless(http, "place_order", ORDER, CAPABLE)
        cancelled = answer_question(http, asked["requestState"], "cancel")
    assert cancelled["content"][0]["text"] == "Not run: the user cancelled this call."
    assert events == ["confirmation_required", "not_confirmed"]
