"""Clients that type results, and an agent's loop, against the example app on a real uvicorn
server: a gated tool's outputSchema is the route's own, so FastMCP's client types `.data` after
confirmation, and a model completes the token flow from the pending answer's text alone."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from fastmcp import Client as FastMCPClient
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from example_app.main import API_KEY, app
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

HEADERS = {"x-api-key": API_KEY}
TOKEN_IN_TEXT = re.compile(r"confirmationToken='([^']+)'")


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(app) as url:
        yield url


def notes_titled(base_url: str, title: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        page = http.get("/notes", params={"limit": 100}).json()
    return [note for note in page["items"] if note["title"] == title]


def fastmcp_client(base_url: str) -> FastMCPClient[Any]:
    return FastMCPClient(StreamableHttpTransport(f"{base_url}/mcp", headers=HEADERS))


async def test_fastmcp_types_a_confirmed_create_note_as_the_routes_model(base_url: str) -> None:
    title = f"typed {uuid.uuid4().hex[:8]}"
    with anyio.fail_after(WAIT_S):
        async with fastmcp_client(base_url) as client:
            tools = {tool.name: tool for tool in await client.list_tools()}
            pending = await client.call_tool("create_note", {"title": title}, raise_on_error=False)
            assert pending.is_error  # nothing ran: a pending plan is not the tool's result
            assert pending.meta is not None
            token = pending.meta[PENDING_META_KEY]["token"]
            assert notes_titled(base_url, title) == []
            done = await client.call_tool("create_note", {"title": title, "confirmationToken": token})
    assert "anyOf" not in (tools["create_note"].output_schema or {})
    assert not isinstance(done.data, dict)  # typed from the route's outputSchema, not a plain mapping
    assert done.data.title == title
    assert done.data.revision == 1
    assert done.structured_content is not None
    assert [note["id"] for note in notes_titled(base_url, title)] == [done.structured_content["id"]]


async def test_fastmcp_raises_the_plan_and_token_a_program_can_act_on(base_url: str) -> None:
    title = f"raised {uuid.uuid4().hex[:8]}"
    with anyio.fail_after(WAIT_S):
        async with fastmcp_client(base_url) as client:
            with pytest.raises(ToolError) as raised:
                await client.call_tool("create_note", {"title": title})
    match = TOKEN_IN_TEXT.search(str(raised.value))
    assert match is not None, str(raised.value)
    assert notes_titled(base_url, title) == []


def retried(part: RetryPromptPart | ToolReturnPart) -> bool:
    return isinstance(part, RetryPromptPart) or part.outcome == "retried"


def confirming_model(title: str, seen: list[str]) -> FunctionModel:
    """A scripted model: asks for a note, reads the pending answer's text (as a model reads a
    tool's error), retries with the token it names, then reports the route's result."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts
        # A tool's isError answer comes back as a retry: what the model is told to fix.
        retries = [part for part in last if isinstance(part, (RetryPromptPart, ToolReturnPart)) and retried(part)]
        returns = [part for part in last if isinstance(part, ToolReturnPart) and not retried(part)]
        if returns:
            seen.append("returned")
            return ModelResponse(parts=[TextPart(json.dumps(returns[0].model_response_object()))])
        if retries:
            seen.append("pending")
            told = str(retries[0].content)
            match = TOKEN_IN_TEXT.search(told)
            assert match is not None, told
            arguments = {"title": title, "confirmationToken": match.group(1)}
            return ModelResponse(parts=[ToolCallPart("create_note", arguments)])
        assert "create_note" in {tool.name for tool in info.function_tools}
        seen.append("asked")
        return ModelResponse(parts=[ToolCallPart("create_note", {"title": title})])

    return FunctionModel(respond)


async def test_a_pydantic_ai_agent_completes_the_confirmation_from_the_pending_text(base_url: str) -> None:
    title = f"agent {uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    toolset = MCPToolset(f"{base_url}/mcp", headers=HEADERS)
    agent = Agent(confirming_model(title, seen), toolsets=[toolset])
    with anyio.fail_after(WAIT_S):
        async with agent:
            run = await agent.run("Add a note.")
    assert seen == ["asked", "pending", "returned"]
    (created,) = notes_titled(base_url, title)  # the route ran once
    assert json.loads(run.output)["id"] == created["id"]
