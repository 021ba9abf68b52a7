"""A new MCP primitive is one package: `tests/ping2` declares `example/ping2` (and a list of its
own), and the endpoint serves it in both eras, offers its capability, lists it, lets a
listener follow its list, and shows it in the explorer and the command line, without a line
of the library naming it."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastapi_mcp_routes import Limits, Origins, ServerInfo, Sessions, Streaming, Tasks, ToolCalls, mcp_tool
from fastapi_mcp_routes.building import EndpointOptions, build_endpoint
from fastapi_mcp_routes.cli.endpoints import find_endpoint
from fastapi_mcp_routes.cli.inventory import take_inventory
from fastapi_mcp_routes.mounting import mount
from tests.ping2 import PING2, PING2_LIST, ping2_feature

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
SESSION_VERSION = "2025-11-25"
STATELESS_VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}
PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "fastapi_mcp_routes"


def app_with_ping2(*, declared: bool = True) -> FastAPI:
    app = FastAPI()

    @app.get("/notes")
    @mcp_tool(name="list_notes")
    def list_notes() -> list[str]:
        """The notes."""
        return []

    features = (ping2_feature(),) if declared else ()
    app.include_router(mount(build_endpoint(app, endpoint_options(app), features)))
    return app


def endpoint_options(app: FastAPI) -> EndpointOptions:
    """`mcp_routes(app)`'s options, as it reads them (router.py), for `build_endpoint`."""
    return EndpointOptions(
        path="/mcp",
        server=ServerInfo(),
        auth=None,
        protected_resource=None,
        dependencies=(),
        origins=Origins(),
        forward_headers=frozenset(),
        sessions=Sessions(),
        secret=None,
        store=None,
        limits=Limits(),
        tasks=Tasks(),
        streaming=Streaming(),
        tool_calls=ToolCalls(),
        list_visible_only=True,
        explorer=True,
    )


def session_headers(http: TestClient) -> dict[str, str]:
    params = {"protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = http.post("/mcp", json=rpc("initialize", params), headers=HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["result"]["capabilities"]["experimental"] == {PING2: {}}
    return {**HEADERS, "mcp-protocol-version": SESSION_VERSION, "mcp-session-id": response.headers["mcp-session-id"]}


def rpc(method: str, params: dict[str, Any], request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def stateless(http: TestClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {**HEADERS, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method}
    response = http.post("/mcp", json=rpc(method, {**params, "_meta": META}), headers=headers)
    body: dict[str, Any] = response.json()
    return body


def test_the_new_method_is_served_in_the_session_era() -> None:
    with TestClient(app_with_ping2()) as http:
        headers = session_headers(http)
        response = http.post("/mcp", json=rpc(PING2, {"echo": "hi"}), headers=headers)
        assert response.json()["result"] == {"pong": "hi", "era": "session"}
        refused = http.post("/mcp", json=rpc(PING2, {"echo": 3}), headers=headers).json()
        assert refused["error"]["code"] == -32602


def test_the_new_method_and_capability_are_served_in_the_stateless_era() -> None:
    with TestClient(app_with_ping2()) as http:
        discovered = stateless(http, "server/discover", {})["result"]
        assert discovered["capabilities"]["experimental"] == {PING2: {}}
        answered = stateless(http, PING2, {"echo": "hi"})["result"]
        assert answered["pong"] == "hi"
        assert answered["era"] == "stateless"
        assert answered["resultType"] == "complete"


def test_the_new_list_is_served_with_its_entries() -> None:
    with TestClient(app_with_ping2()) as http:
        headers = session_headers(http)
        listed = http.post("/mcp", json=rpc(PING2_LIST, {}), headers=headers).json()["result"]
        assert listed == {"ping2s": [{"name": "ping2-list_notes"}]}


def test_a_listener_may_follow_the_new_list() -> None:
    with (
        TestClient(app_with_ping2()) as http,
        http.stream(
            "POST",
            "/mcp",
            json=rpc("subscriptions/listen", {"notifications": {"ping2sListChanged": True}, "_meta": META}),
            headers={**HEADERS, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": "subscriptions/listen"},
        ) as stream,
    ):
        acknowledgement = next(line for line in stream.iter_lines() if line.startswith("data:"))
        assert '"notifications":{"ping2sListChanged":true}' in acknowledgement.replace(" ", "")


def test_without_the_package_the_method_is_unknown() -> None:
    with TestClient(app_with_ping2(declared=False)) as http:
        headers = session_headers_without_ping2(http)
        answer = http.post("/mcp", json=rpc(PING2, {"echo": "hi"}), headers=headers).json()
        assert answer["error"]["code"] == -32601


def session_headers_without_ping2(http: TestClient) -> dict[str, str]:
    params = {"protocolVersion": SESSION_VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = http.post("/mcp", json=rpc("initialize", params), headers=HEADERS)
    assert "experimental" not in response.json()["result"]["capabilities"]
    return {**HEADERS, "mcp-protocol-version": SESSION_VERSION, "mcp-session-id": response.headers["mcp-session-id"]}


def test_the_explorer_and_the_command_line_show_the_new_list() -> None:
    app = app_with_ping2()
    endpoint = find_endpoint(app, "app")  # as the command line reads an app it does not serve
    inventory = take_inventory(endpoint, endpoint.served.registry.table())
    assert inventory.as_json()["ping2s"][0]["route"] == {"method": "GET", "path": "/notes"}
    with TestClient(app) as http:
        about = http.get("/mcp/explorer/about").json()
        assert about["ping2s"][0]["name"] == "ping2-list_notes"
        assert about["ping2s"][0]["route"]["path"] == "/notes"


def test_two_features_cannot_declare_one_method() -> None:
    app = FastAPI()
    with pytest.raises(ValueError, match="'ping2' and 'ping2' both declare 'example/ping2'"):
        build_endpoint(app, endpoint_options(app), (ping2_feature(), ping2_feature()))


def test_no_module_of_the_library_names_the_new_primitive() -> None:
    named = [path for path in PACKAGE.rglob("*.py") if "ping2" in path.read_text()]
    assert named == []
