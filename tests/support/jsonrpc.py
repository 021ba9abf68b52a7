"""JSON-RPC over streamable HTTP as a test writes it by hand: requests, a session opened over
plain HTTP, a tool call and its result; and what an answer says."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.sse import sse_messages

SESSION_VERSION = "2025-11-25"  # the latest revision that has sessions
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
JSON_ONLY = {**HEADERS, "accept": "application/json"}  # a client that reads no SSE


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | str | None = 1) -> dict[str, Any]:
    """A JSON-RPC request; a notification when `request_id` is None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if request_id is not None:
        message["id"] = request_id
    return message


def initialize(
    version: str = SESSION_VERSION, capabilities: dict[str, Any] | None = None, request_id: int = 0
) -> dict[str, Any]:
    """The `initialize` request that opens a session."""
    client = {"name": "t", "version": "1"}
    params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": client}
    return rpc("initialize", params, request_id)


def open_session(
    http: httpx.Client,
    *,
    version: str = SESSION_VERSION,
    accept: str = HEADERS["accept"],
    capabilities: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """Open a session over plain HTTP (`headers` are sent too, say a credential); the headers
    its later requests carry: the same, plus the session id and the protocol version."""
    sent = {**HEADERS, "accept": accept, "mcp-protocol-version": version, **(headers or {})}
    response = http.post("/mcp", json=initialize(version, capabilities), headers=sent)
    assert response.status_code == 200, response.text
    return {**sent, "mcp-session-id": response.headers["mcp-session-id"]}


def tool_call(
    name: str, arguments: dict[str, Any] | None = None, *, request_id: int = 1, progress_token: str | None = None
) -> dict[str, Any]:
    """A `tools/call` request; with a progress token, the call may stream."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return rpc("tools/call", params, request_id)


def result_of(http: httpx.Client, message: dict[str, Any], headers: dict[str, str] = HEADERS) -> dict[str, Any]:
    """POST one request, answered in JSON with 200; the answer's result."""
    response = http.post("/mcp", json=message, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def call_tool(
    http: httpx.Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] = HEADERS,
    request_id: int = 1,
) -> dict[str, Any]:
    """Call a tool over plain HTTP; the call's result."""
    return result_of(http, tool_call(name, arguments, request_id=request_id), headers)


def final_message(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON-RPC answer of a response, in JSON or as the last message of its SSE body."""
    content_type = response.headers.get("content-type", "")
    try:
        if content_type.startswith("application/json"):
            message: dict[str, Any] = response.json()
            return message
        if content_type.startswith("text/event-stream"):
            messages = sse_messages(response.text)
            return messages[-1] if messages else None
    except ValueError:
        return None
    return None


def refusal(message: dict[str, Any]) -> str | None:
    """Why a JSON-RPC answer is not a success: its error, or its error result's text."""
    if "error" in message:
        return str(message["error"].get("message"))
    result = message.get("result")
    if not isinstance(result, dict):
        return f"no result in {message!r}"
    if result.get("isError"):
        return " ".join(block.get("text", "") for block in result.get("content", []))
    return None
