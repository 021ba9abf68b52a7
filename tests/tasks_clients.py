"""Clients that speak the 2026-07-28 tasks extension through `fastmcp-tasks`, on their defaults,
run in the virtualenv `tests/test_clients_on_defaults.py` gives them (fastmcp-tasks pins a FastMCP
older than the one this project's tests use).

    python tests/tasks_clients.py fastmcp|pydantic-ai URL HEADERS_JSON

`fastmcp`: FastMCP's client calls `export_notes` and prints how its `.data` was typed.
`pydantic-ai`: an agent whose scripted model calls `export_notes` prints what the tool returned.
Either prints one JSON object on stdout; a failure is a traceback and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import fastmcp_tasks  # noqa: F401  (importing it turns on FastMCP's task support, as installing it does for pydantic-ai)
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

TOOL = "export_notes"


async def fastmcp_export(url: str, headers: dict[str, str]) -> dict[str, Any]:
    async with Client(StreamableHttpTransport(url, headers=headers)) as client:
        done = await client.call_tool(TOOL, {})
    data = done.data
    return {
        "type": type(data).__name__,
        "mapping": isinstance(data, dict),
        "notes": data.notes,
        "markdown": data.markdown,
        "structured": done.structured_content,
    }


def exporting_model(seen: list[str]) -> FunctionModel:
    """A scripted model: calls the export, then answers with what the tool returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
        if returns:
            seen.append("returned")
            return ModelResponse(parts=[TextPart(json.dumps(returns[0].model_response_object()))])
        seen.append("asked")
        assert TOOL in {tool.name for tool in info.function_tools}
        return ModelResponse(parts=[ToolCallPart(TOOL, {})])

    return FunctionModel(respond)


async def pydantic_ai_export(url: str, headers: dict[str, str]) -> dict[str, Any]:
    seen: list[str] = []
    agent = Agent(exporting_model(seen), toolsets=[MCPToolset(url, headers=headers)])
    async with agent:
        run = await agent.run("Export my notes.")
    return {"seen": seen, "output": json.loads(run.output)}


CLIENTS = {"fastmcp": fastmcp_export, "pydantic-ai": pydantic_ai_export}

if __name__ == "__main__":
    client, url, headers = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    print(json.dumps(asyncio.run(CLIENTS[client](url, headers))))
