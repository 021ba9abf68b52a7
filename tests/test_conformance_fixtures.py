"""The conformance suite can pass some tool scenarios against a server that lacks the fixture,
so check here that the fixtures are really listed and behave as the scenarios expect."""

from __future__ import annotations

import base64
from typing import Any

from fastapi.testclient import TestClient

from example_app.conformance import RED_PIXEL_PNG, app

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def call(client: TestClient, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    response = client.post("/mcp", json=body, headers={**HEADERS, "mcp-protocol-version": "2025-11-25"})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def test_fixture_tools_are_listed_with_descriptions() -> None:
    with TestClient(app) as client:
        client.headers["mcp-session-id"] = client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            },
            headers=HEADERS,
        ).headers["mcp-session-id"]
        tools = {tool["name"]: tool for tool in call(client, "tools/list")["tools"]}
        assert {
            "test_simple_text",
            "test_image_content",
            "test_audio_content",
            "test_error_handling",
            "test_embedded_resource",
            "test_multiple_content_types",
            "test_tool_with_logging",
            "test_tool_with_progress",
            "test_sampling",
            "test_elicitation",
            "test_elicitation_sep1034_defaults",
            "test_elicitation_sep1330_enums",
            "test_input_required_result_elicitation",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_capabilities",
            "test_missing_capability",
            "test_streaming_elicitation",
            "test_logging_tool",
            "test_trigger_tool_change",
            "json_schema_2020_12_tool",
            "header_mirroring",
        } <= set(tools)
        schema = tools["json_schema_2020_12_tool"]["inputSchema"]
        for keyword in ("$schema", "$defs", "allOf", "if", "then", "else"):
            assert keyword in schema, keyword
        assert schema["$defs"]["address"]["$anchor"] == "addressDef"
        assert schema["additionalProperties"] is False
        region = tools["header_mirroring"]["inputSchema"]["properties"]["region"]
        assert region["x-mcp-header"] == "Region"
        assert tools["test_sampling"]["inputSchema"]["required"] == ["prompt"]
        assert tools["test_elicitation"]["inputSchema"]["required"] == ["message"]
        assert all(tool["description"] for tool in tools.values())

        text = call(client, "tools/call", {"name": "test_simple_text", "arguments": {}})
        assert text["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]

        image = call(client, "tools/call", {"name": "test_image_content", "arguments": {}})["content"][0]
        assert (image["type"], image["mimeType"]) == ("image", "image/png")
        assert base64.b64decode(image["data"]) == RED_PIXEL_PNG

        audio = call(client, "tools/call", {"name": "test_audio_content", "arguments": {}})["content"][0]
        assert (audio["type"], audio["mimeType"]) == ("audio", "audio/wav")
        assert base64.b64decode(audio["data"]).startswith(b"RIFF")

        embedded = call(client, "tools/call", {"name": "test_embedded_resource", "arguments": {}})["content"]
        assert embedded == [
            {
                "type": "resource",
                "resource": {
                    "uri": "test://embedded-resource",
                    "mimeType": "text/plain",
                    "text": "This is an embedded resource content.",
                },
            }
        ]
        mixed = call(client, "tools/call", {"name": "test_multiple_content_types", "arguments": {}})["content"]
        assert [block["type"] for block in mixed] == ["text", "image", "resource"]

        error = call(client, "tools/call", {"name": "test_error_handling", "arguments": {}})
        assert error["isError"] is True
        assert "intentionally returns an error" in error["content"][0]["text"]
