"""The stateless revision (2026-07-28) on the same endpoint, with the official SDK v2 client in
its default mode (it calls server/discover first) and with raw HTTP for the errors it names."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI, Query
from mcp import Client, types

from fastapi_mcp_routes import mcp_routes, mcp_tool
from fastapi_mcp_routes.tools.registry import ToolRegistry
from tests.support.apps import observed, streaming_app
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages, read_to_first_message, sse_messages
from tests.support.stateless import (
    STATELESS_VERSION,
    post_stateless,
    stateless_headers,
    stateless_meta,
    stateless_request,
)
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio
META = stateless_meta()
CAPABLE = stateless_meta({"elicitation": {}})
ASK = {"name": "ask", "arguments": {}}


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(streaming_app()) as url:
        yield url


async def test_the_sdk_client_discovers_lists_and_calls_without_a_session(base_url: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, text: str | None) -> None:
        seen.append(progress)

    with anyio.fail_after(WAIT_S):
        async with Client(f"{base_url}/mcp") as client:
            assert client.protocol_version == STATELESS_VERSION
            names = {tool.name for tool in (await client.list_tools()).tools}
            counted = await client.call_tool("count", {"steps": 2}, progress_callback=on_progress)
    assert {"count", "ask", "plain"} <= names
    assert counted.structured_content == {"steps": 2}
    assert seen == [1, 2]


async def test_an_elicitation_taking_two_round_trips_reaches_the_route(base_url: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": f"reply {len(asked)}"})

    with anyio.fail_after(WAIT_S):
        async with Client(f"{base_url}/mcp", elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask_twice", {})
    assert asked == ["First question?", "Second question?"]
    assert result.structured_content == {"answers": [{"answer": "reply 1"}, {"answer": "reply 2"}]}


def test_input_required_result_then_a_tampered_request_state_is_refused(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        first = capable_call(http, ASK)
        assert first["resultType"] == "input_required"
        [(key, question)] = first["inputRequests"].items()
        assert question["method"] == "elicitation/create"
        state = first["requestState"]
        tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
        retry = {
            "name": "ask",
            "arguments": {},
            "inputResponses": {key: {"action": "accept", "content": {"colour": "red"}}},
            "requestState": tampered,
        }
        refused = post_stateless(http, "tools/call", retry, meta=CAPABLE)
        other_arguments = {**retry, "requestState": state, "arguments": {"unexpected": 1}}
        foreign = post_stateless(http, "tools/call", other_arguments, meta=CAPABLE)
        accepted = post_stateless(http, "tools/call", {**retry, "requestState": state}, meta=CAPABLE)
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": -32602,
        "message": "Invalid or expired requestState.",
        "data": {"reason": "invalid_request_state"},
    }
    assert foreign.status_code == 400  # a state is bound to the arguments it was issued for
    assert accepted.json()["result"]["structuredContent"] == {"action": "accept", "content": {"colour": "red"}}


def test_closing_the_response_stream_cancels_the_call(base_url: str) -> None:
    observed.cancelled.clear()
    call = stateless_request("tools/call", {"name": "slow", "arguments": {}}, {**META, "progressToken": "s"})
    with (
        httpx.Client(base_url=base_url, timeout=WAIT_S) as http,
        http.stream("POST", "/mcp", json=call, headers=stateless_headers("tools/call", "slow")) as response,
    ):
        read_to_first_message(response)  # the route is running; now the client goes away
    assert observed.cancelled.wait(WAIT_S)


def test_results_carry_result_type_server_info_and_cache_hints(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        discovered = post_stateless(http, "server/discover").json()
        listed = post_stateless(http, "tools/list").json()
        called = post_stateless(http, "tools/call", {"name": "plain", "arguments": {}}).json()
    result = discovered["result"]
    assert result["supportedVersions"] == [STATELESS_VERSION]
    assert result["capabilities"]["tools"] == {"listChanged": True}
    for body in (result, listed["result"]):
        assert (body["resultType"], body["ttlMs"], body["cacheScope"]) == ("complete", 0, "public")
        assert body["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "Streaming"
    assert [tool["name"] for tool in listed["result"]["tools"]] == sorted(
        tool["name"] for tool in listed["result"]["tools"]
    )
    assert called["result"]["resultType"] == "complete"
    assert called["result"]["structuredContent"] == {"is_tool_call": True, "session": False}


def test_log_messages_only_when_the_request_names_a_level(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        quiet = post_stateless(http, "tools/call", {"name": "chatty", "arguments": {}})
        leveled = {**META, "io.modelcontextprotocol/logLevel": "error"}
        loud = post_stateless(http, "tools/call", {"name": "chatty", "arguments": {}}, meta=leveled)
    assert quiet.headers["content-type"] == "application/json"
    levels = [
        message["params"]["level"]
        for message in sse_messages(loud.text)
        if message.get("method") == "notifications/message"
    ]
    assert levels == ["error"]


def test_subscriptions_listen_acknowledges_and_tags_list_changes() -> None:
    app = streaming_app()
    listen = stateless_request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True, "promptsListChanged": True}}
    )
    with (
        serve(app) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
        http.stream("POST", "/mcp", json=listen, headers=stateless_headers("subscriptions/listen")) as stream,
    ):
        events = iter_sse_messages(stream.iter_lines())
        acknowledged = next(events)

        @app.get("/late", openapi_extra={"x-mcp": True})
        def late() -> dict[str, str]:
            return {"late": "yes"}

        changed = next(events)
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    assert acknowledged["params"]["notifications"] == {"toolsListChanged": True}  # prompts are not served
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}},
    }


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


VERSION_ONLY = {"io.modelcontextprotocol/protocolVersion": STATELESS_VERSION}  # no client capabilities
BAD_REQUESTS = [
    # (case, method, params, meta, header overrides, status, code)
    ("no _meta", "tools/list", {}, None, {}, 400, -32602),
    ("no client capabilities", "tools/list", {}, VERSION_ONLY, {}, 400, -32602),
    (
        "unsupported version",
        "tools/list",
        {},
        {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"},
        {"mcp-protocol-version": "2099-01-01"},
        400,
        -32022,
    ),
    ("version header disagrees", "tools/list", {}, META, {"mcp-protocol-version": "2025-11-25"}, 400, -32020),
    ("method header disagrees", "tools/list", {}, META, {"mcp-method": "tools/call"}, 400, -32020),
    ("name header missing", "tools/call", ASK, META, {"mcp-name": None}, 400, -32020),
    ("name header disagrees", "tools/call", ASK, META, {"mcp-name": "plain"}, 400, -32020),
    ("unknown method", "tools/destroy", {}, META, {}, 404, -32601),
    ("removed ping", "ping", {}, META, {}, 404, -32601),
    ("removed initialize", "initialize", {}, META, {}, 404, -32601),
    ("undeclared client capability", "tools/call", ASK, META, {}, 400, -32021),
]


@pytest.mark.parametrize(
    ("method", "params", "meta", "overrides", "status", "code"),
    [case[1:] for case in BAD_REQUESTS],
    ids=[case[0] for case in BAD_REQUESTS],
)
def test_stateless_errors_get_the_status_and_code_the_spec_names(
    base_url: str,
    method: str,
    params: dict[str, Any],
    meta: dict[str, Any] | None,
    overrides: dict[str, str | None],
    status: int,
    code: int,
) -> None:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 41, "method": method, "params": dict(params)}
    if meta is not None:
        body["params"]["_meta"] = meta
    sent = stateless_headers(method, params.get("name"))
    for key, value in overrides.items():
        if value is None:
            sent.pop(key, None)
        else:
            sent[key] = value
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=body, headers=sent)
        assert (response.status_code, response.json()["error"]["code"]) == (status, code), response.text
        assert response.json()["id"] == 41
        assert (
            post_stateless(http, "tools/call", {"name": "plain", "arguments": {}}).status_code == 200
        )  # still serving


def test_the_error_for_an_unsupported_version_lists_the_supported_ones(base_url: str) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        sent = stateless_headers("server/discover", **{"mcp-protocol-version": "2099-01-01"})
        response = http.post("/mcp", json=stateless_request("server/discover", {}, meta), headers=sent)
    assert response.json()["error"]["data"] == {"supported": [STATELESS_VERSION], "requested": "2099-01-01"}


def test_the_missing_capability_error_names_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        response = post_stateless(http, "tools/call", ASK)
    assert response.json()["error"]["data"] == {"requiredCapabilities": {"elicitation": {"form": {}}}}


def test_a_name_header_may_come_base64_encoded(base_url: str) -> None:
    body = stateless_request("tools/call", {"name": "plain", "arguments": {}})
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=body, headers=stateless_headers("tools/call", b64("plain")))
    assert response.json()["result"]["structuredContent"] == {"is_tool_call": True, "session": False}


def test_no_get_stream_no_delete_no_batch_and_notifications_are_acknowledged(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        sent = stateless_headers("tools/list")
        assert http.get("/mcp", headers=sent).status_code == 405
        assert http.delete("/mcp", headers=sent).headers["allow"] == "POST"
        batch = http.post("/mcp", json=[stateless_request("tools/list"), stateless_request("tools/list")], headers=sent)
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "_meta": META}}
        acknowledged = http.post("/mcp", json=note, headers=stateless_headers("notifications/cancelled"))
        listen = stateless_request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
        json_only = {**stateless_headers("subscriptions/listen"), "accept": "application/json"}
        not_acceptable = http.post("/mcp", json=listen, headers=json_only)
    assert (batch.status_code, batch.json()["error"]["code"]) == (400, -32600)
    assert acknowledged.status_code == 202
    assert not_acceptable.status_code == 406


def capable_call(http: httpx.Client, params: dict[str, Any]) -> dict[str, Any]:
    """A tools/call from a client that can elicit; its result."""
    result: dict[str, Any] = post_stateless(http, "tools/call", params, meta=CAPABLE).json()["result"]
    return result


def answer_to(result: dict[str, Any], content: dict[str, Any]) -> dict[str, Any]:
    [key] = result["inputRequests"]
    return {key: {"action": "accept", "content": content}}


def test_answers_given_up_front_are_used_and_unknown_keys_ignored(base_url: str) -> None:
    responses = {
        "elicitation-1": {"action": "accept", "content": {"colour": "green"}},
        "nobody-asked": {"action": "accept", "content": {}},
    }
    call = {"name": "ask", "arguments": {}, "inputResponses": responses}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = capable_call(http, call)
    assert result["structuredContent"] == {"action": "accept", "content": {"colour": "green"}}


def test_a_sealed_answer_cannot_be_replaced_in_a_later_round(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        first = capable_call(http, {"name": "ask_twice", "arguments": {}})
        round_one = answer_to(first, {"answer": "one"})
        retry = {"name": "ask_twice", "arguments": {}, "requestState": first["requestState"]}
        second = capable_call(http, {**retry, "inputResponses": round_one})
        replaced = {**{key: {"action": "accept", "content": {"answer": "OVERRIDDEN"}} for key in round_one}}
        last = {**replaced, **answer_to(second, {"answer": "two"})}
        final = {"name": "ask_twice", "arguments": {}, "requestState": second["requestState"], "inputResponses": last}
        done = capable_call(http, final)
    assert done["structuredContent"] == {"answers": [{"answer": "one"}, {"answer": "two"}]}


def test_a_cookie_the_app_sets_between_rounds_does_not_break_the_request_state(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        first = capable_call(http, ASK)
        http.cookies.set("lb", "node2")  # as a load balancer's affinity cookie would
        retry = {**ASK, "requestState": first["requestState"], "inputResponses": answer_to(first, {"colour": "blue"})}
        done = capable_call(http, retry)
    assert done["structuredContent"] == {"action": "accept", "content": {"colour": "blue"}}


def test_a_routes_broad_except_does_not_swallow_the_question(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = capable_call(http, {"name": "broad", "arguments": {}})
    assert result["resultType"] == "input_required"


def test_a_repeated_routing_header_is_refused(base_url: str) -> None:
    sent = [(k, v) for k, v in stateless_headers("tools/list").items()] + [("mcp-method", "tools/call")]
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=stateless_request("tools/list"), headers=sent)
    assert (response.status_code, response.json()["error"]["code"]) == (400, -32020)


def test_a_request_state_key_must_be_long_bytes() -> None:
    with (
        pytest.warns(
            DeprecationWarning, match=r"mcp_routes\(request_state_key=\.\.\.\) is deprecated; use mcp_routes\(secret="
        ),
        pytest.raises(ValueError, match="request_state_key must be at least 32 bytes"),
    ):
        mcp_routes(FastAPI(), request_state_key="s" * 40)


def bad_token(value: Annotated[int, Query(json_schema_extra={"x-mcp-header": "Bad Name"})]) -> int:
    return value


def float_header(value: Annotated[float, Query(json_schema_extra={"x-mcp-header": "Weight"})]) -> float:
    return value


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [(bad_token, "must be an HTTP header token"), (float_header, "needs an integer, string or boolean")],
)
def test_an_x_mcp_header_the_spec_does_not_allow_stops_discovery(endpoint: Any, message: str) -> None:
    app = FastAPI()
    app.add_api_route("/h", mcp_tool()(endpoint), methods=["GET"])
    with pytest.raises(ValueError, match=message):
        ToolRegistry(app, frozenset()).table()


def test_background_tasks_of_endpoint_dependencies_run_for_a_stateless_request() -> None:
    ran: list[str] = []

    def audit(background: BackgroundTasks) -> None:
        background.add_task(ran.append, "audited")

    app = FastAPI()
    app.include_router(mcp_routes(app, dependencies=[Depends(audit)]))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        discovered = post_stateless(http, "server/discover")
    assert discovered.json()["result"]["resultType"] == "complete"
    assert ran == ["audited"]
