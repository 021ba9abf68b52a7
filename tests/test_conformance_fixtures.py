"""The conformance suite can pass some tool scenarios against a server that lacks the fixture,
so check here that the fixtures are really listed and behave as the scenarios expect."""

from __future__ import annotations

import base64

from fastapi.testclient import TestClient

from example_app.conformance import RED_PIXEL_PNG, app
from tests.support.jsonrpc import call_tool, open_session, result_of, rpc


def test_fixture_tools_are_listed_with_descriptions() -> None:
    with TestClient(app) as client:
        session = open_session(client)
        tools = {tool["name"]: tool for tool in result_of(client, rpc("tools/list"), session)["tools"]}
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

        text = call_tool(client, "test_simple_text", headers=session)
        assert text["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]

        image = call_tool(client, "test_image_content", headers=session)["content"][0]
        assert (image["type"], image["mimeType"]) == ("image", "image/png")
        assert base64.b64decode(image["data"]) == RED_PIXEL_PNG

        audio = call_tool(client, "test_audio_content", headers=session)["content"][0]
        assert (audio["type"], audio["mimeType"]) == ("audio", "audio/wav")
        assert base64.b64decode(audio["data"]).startswith(b"RIFF")

        embedded = call_tool(client, "test_embedded_resource", headers=session)["content"]
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
        mixed = call_tool(client, "test_multiple_content_types", headers=session)["content"]
        assert [block["type"] for block in mixed] == ["text", "image", "resource"]

        error = call_tool(client, "test_error_handling", headers=session)
        assert error["isError"] is True
        assert "intentionally returns an error" in error["content"][0]["text"]
