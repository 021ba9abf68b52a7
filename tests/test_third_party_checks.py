"""What third-party conformance suites check beyond the official one, each held to what the
2026-07-28 and 2025-11-25 specifications say: `server/discover` answered alike each time and
naming the version it serves, tools listed in a deterministic order, an invalid cursor refused
-32602, the server's identity in the `_meta` of every 2026-07-28 result and never the
2026-07-28 envelope on a 2025-11-25 result, `MCP-Protocol-Version` on requests, and the
acknowledgment that opens a `subscriptions/listen` stream."""

from __future__ import annotations

import json
from typing import Any, Final

import anyio
import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastapi_mcp_routes import Limits, ServerInfo, ToolCalls, mcp_routes, mcp_tool
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, open_session, rpc
from tests.support.servers import serve
from tests.support.stateless import (
    STATELESS_VERSION,
    post_stateless,
    stateless_headers,
    stateless_request,
)
from tests.support.waits import WAIT_S

SERVER_INFO: Final = {"name": "checked", "version": "4.2.0"}
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
# What only a 2026-07-28 result carries (basic/index "resultType", server/utilities/caching).
STATELESS_ONLY_FIELDS: Final = frozenset({"resultType", "ttlMs", "cacheScope"})
# Marked in this order, so a list in declaration order or in the order of a set would differ.
TOOL_NAMES: Final = ("zeta", "alpha", "mike", "bravo", "yankee")


def checked_app(**options: Any) -> FastAPI:
    """Tools marked out of alphabetical order, and a prompt; `options` go to `mcp_routes`."""
    app = FastAPI()
    for name in TOOL_NAMES:

        def answer(name: str = name) -> dict[str, str]:
            return {"tool": name}

        app.get(f"/{name}", name=name)(mcp_tool(name=name, description=f"The {name} tool.")(answer))
    app.include_router(
        mcp_routes(
            app,
            server=ServerInfo(**SERVER_INFO),
            tool_calls=ToolCalls(require_confirmation_for_mutations=False),
            **options,
        )
    )
    return app


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def tool_names(result: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in result["tools"]]


# -- server/discover ----------------------------------------------------------------------------


def test_discover_answers_alike_twice_and_names_the_version_it_serves() -> None:
    with TestClient(checked_app()) as http:
        first = result_of(post_stateless(http, "server/discover"))
        second = result_of(post_stateless(http, "server/discover"))
    assert first == second
    assert STATELESS_VERSION in first["supportedVersions"]  # the version a client defaults to
    assert first["_meta"][SERVER_INFO_META] == SERVER_INFO


# -- tools/list order (server/tools: "Servers SHOULD return tools in a deterministic order") ----


def test_tools_are_listed_in_one_order_in_both_eras_and_across_pages() -> None:
    with TestClient(checked_app()) as http:
        stateless = [tool_names(result_of(post_stateless(http, "tools/list"))) for _ in range(2)]
        session = open_session(http)
        sessioned = [
            tool_names(result_of(http.post("/mcp", json=rpc("tools/list", {}), headers=session))) for _ in range(2)
        ]
    assert stateless == sessioned == [sorted(TOOL_NAMES)] * 2


def test_pages_of_two_tools_list_every_tool_once_in_the_same_order() -> None:
    with TestClient(checked_app(limits=Limits(page_size=2))) as http:
        listed: list[str] = []
        cursor: str | None = None
        for _ in TOOL_NAMES:  # one page per tool at most
            page = result_of(post_stateless(http, "tools/list", {"cursor": cursor} if cursor else {}))
            listed += tool_names(page)
            cursor = page.get("nextCursor")
            if cursor is None:
                break
    assert listed == sorted(TOOL_NAMES)


# -- invalid cursor (server/utilities/pagination: "SHOULD result in an error with code -32602") -


@pytest.mark.parametrize("cursor", ["not-a-cursor", "", "eyJwYWdlIjogMn0=", "x" * 10_000])
def test_an_invalid_cursor_is_refused_with_invalid_params_in_both_eras(cursor: str) -> None:
    with TestClient(checked_app()) as http:
        stateless = post_stateless(http, "tools/list", {"cursor": cursor})
        session = open_session(http)
        sessioned = http.post("/mcp", json=rpc("tools/list", {"cursor": cursor}), headers=session)
    assert stateless.status_code == 400  # the status of -32602 in the 2026-07-28 transport
    assert stateless.json()["error"]["code"] == -32602
    assert sessioned.status_code == 200
    assert sessioned.json()["error"]["code"] == -32602


# -- the server's identity in the _meta of every 2026-07-28 result (basic/index: SHOULD) ---------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("server/discover", {}),
        ("tools/list", {}),
        ("tools/call", {"name": "alpha", "arguments": {}}),
        ("resources/list", {}),
        ("prompts/list", {}),
    ],
)
def test_every_stateless_result_names_the_server_in_its_meta(method: str, params: dict[str, Any]) -> None:
    with TestClient(checked_app()) as http:
        # Twice: a repeated tools/list page is served from the pages kept already shaped.
        results = [result_of(post_stateless(http, method, params)) for _ in range(2)]
    for result in results:
        assert result["resultType"] == "complete"
        assert result["_meta"][SERVER_INFO_META] == SERVER_INFO


# -- no 2026-07-28 envelope on a 2025-11-25 result ----------------------------------------------


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/list", {}),
        ("tools/call", {"name": "alpha", "arguments": {}}),
        ("resources/list", {}),
        ("prompts/list", {}),
        ("ping", {}),
    ],
)
def test_a_session_era_result_carries_none_of_the_stateless_fields(method: str, params: dict[str, Any]) -> None:
    with TestClient(checked_app()) as http:
        initialized = result_of(
            http.post(
                "/mcp",
                json=rpc(
                    "initialize",
                    {
                        "protocolVersion": SESSION_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                    0,
                ),
                headers=HEADERS,
            )
        )
        session = open_session(http)
        result = result_of(http.post("/mcp", json=rpc(method, params), headers=session))
    for answered in (initialized, result):
        assert not STATELESS_ONLY_FIELDS & answered.keys(), answered
        assert SERVER_INFO_META not in answered.get("_meta", {})
    assert initialized["serverInfo"] == SERVER_INFO  # the session era names the server here


# -- MCP-Protocol-Version (2026-07-28 transports: "Every POST request ... MUST include") --------


def test_a_stateless_request_without_the_protocol_version_header_is_refused_as_a_mismatch() -> None:
    headers = stateless_headers("tools/list")
    del headers["mcp-protocol-version"]
    with TestClient(checked_app()) as http:
        refused = http.post("/mcp", json=stateless_request("tools/list"), headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32020


# -- subscriptions/listen (basic/patterns/subscriptions, "Acknowledgment") ---------------------


async def listen_first_message(url: str, notifications: dict[str, Any], request_id: int) -> dict[str, Any]:
    message = stateless_request("subscriptions/listen", {"notifications": notifications})
    message["id"] = request_id
    async with (
        httpx.AsyncClient(base_url=url) as http,
        http.stream("POST", "/mcp", json=message, headers=stateless_headers("subscriptions/listen")) as stream,
    ):
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data: {"):
                first: dict[str, Any] = json.loads(line[len("data: ") :])
                return first
    raise AssertionError("the stream ended before its first message")


@pytest.mark.anyio
async def test_a_listen_stream_opens_with_its_acknowledgment_of_what_it_honors() -> None:
    # Tools change and are served; the app has no prompts, so their changes are not honored.
    asked = {"toolsListChanged": True, "promptsListChanged": True}
    with serve(checked_app()) as url, anyio.fail_after(WAIT_S):
        first = await listen_first_message(url, asked, request_id=41)
    assert first == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {"_meta": {SUBSCRIPTION_ID: 41}, "notifications": {"toolsListChanged": True}},
    }
