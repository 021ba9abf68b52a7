"""The example apps' tools as agents' frameworks see them, each converted by the framework's own
code from what a real server lists: openai-agents' strict converter, pydantic-ai's MCP toolset
and OpenAI tool preparation, and langchain-mcp-adapters with LangChain's strict OpenAI tool.

Every tool of `example_app.main:app` and `example_app.conformance:app` must convert, and every
one whose schemas hold no recursive model must convert strictly (OpenAI's strict tool calls).
openai-agents and pydantic-ai run here, beside the MCP SDK 2.x; langchain-mcp-adapters needs
the SDK 1.x, so it gets a virtualenv of its own under `.tools/clients/`, made on first use, and
runs `tests/langchain_schemas.py` against the server.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator, Mapping
from typing import Any, Final

import anyio
import pytest
from agents import FunctionTool
from agents.mcp import MCPServerStreamableHttp, MCPUtil
from agents.tool_context import ToolContext
from pydantic_ai import RunContext
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RunUsage

import example_app.conformance
import example_app.main
from tests.support.discovery import registry_of
from tests.support.machine import ROOT
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.venvs import client_python
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

# A bearer token (any, for listing) shows the tool behind the JWT scheme too, so every tool is listed.
HEADERS: Final = {"authorization": "Bearer anything", "x-api-key": example_app.main.API_KEY}
APPS: Final = {"notes": example_app.main.app, "conformance": example_app.conformance.app}
# Tools that cannot be strict, and why. No tool of the example apps takes a recursive model.
NOT_STRICT: Final = {
    # The conformance suite checks that its hand-written JSON Schema 2020-12 keeps its $defs (a
    # bare $ref to one), allOf and if/then/else as written (SEP-1613); OpenAI's strict mode has
    # no if/then/else, and openai-agents refuses the bare $ref.
    "json_schema_2020_12_tool": "a hand-written schema kept as written",
}
# langchain-mcp-adapters 0.3.2 requires mcp<2; 0.3.1, the last without that bound, imports
# `mcp.server.fastmcp`, which the SDK 2.x no longer has.
LANGCHAIN_PACKAGES: Final = ("langchain-mcp-adapters==0.3.2", "langchain-core==1.8.3", "mcp==1.30.0")
LANGCHAIN_RUN_S: Final = 60.0  # the script's run, LangChain's imports included (about 4 s here)
OPENAI_MODEL: Final = "gpt-5.4"  # its profile decides how pydantic-ai prepares tools; nothing is sent


@dataclasses.dataclass(frozen=True, slots=True)
class Served:
    """An example app on a real server, and its tools as the official SDK client lists them."""

    url: str
    tools: Mapping[str, dict[str, Any]]  # name -> the tool as JSON


@pytest.fixture(scope="module", params=sorted(APPS))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    with serve(APPS[request.param]) as url:
        tools = anyio.run(listed, url)
        assert tools, f"{request.param} lists no tool"
        yield Served(url, tools)


async def listed(url: str) -> dict[str, dict[str, Any]]:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(url, HEADERS) as client:
            tools = (await client.list_tools()).tools
    return {tool.name: tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools}


def strict_expected(served: Served) -> set[str]:
    return {name for name, tool in served.tools.items() if name not in NOT_STRICT and not recursive(tool)}


# -- the schemas themselves --------------------------------------------------------------------


def references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from references(value)
    elif isinstance(node, list):
        for item in node:
            yield from references(item)


def recursive_definitions(schema: Mapping[str, Any]) -> set[str]:
    """The `$defs` entries of `schema` that reach themselves through their references."""
    definitions = schema.get("$defs", {})
    graph = {
        name: {ref.removeprefix("#/$defs/").split("/")[0] for ref in references(definition)}
        for name, definition in definitions.items()
    }
    found = set()
    for name in graph:
        pending, seen = list(graph[name]), set()
        while pending:
            current = pending.pop()
            if current == name:
                found.add(name)
                break
            if current not in seen:
                seen.add(current)
                pending.extend(graph.get(current, ()))
    return found


def optional(node: Any) -> bool:
    """Whether a schema has something optional: a property not required, or a default."""
    if isinstance(node, list):
        return any(optional(item) for item in node)
    if not isinstance(node, dict):
        return False
    properties = node.get("properties", {})
    if "default" in node or set(properties) - set(node.get("required", ())):
        return True
    values = (value for key, value in node.items() if key not in ("properties", "const", "enum", "examples"))
    return any(optional(value) for value in (*properties.values(), *values))


def recursive(tool: Mapping[str, Any]) -> bool:
    return bool(recursive_definitions(tool["inputSchema"]))


def test_every_schema_writes_its_models_out_and_keeps_only_recursive_ones_in_defs(served: Served) -> None:
    for name, tool in served.tools.items():
        for which in ("inputSchema", "outputSchema"):
            schema = tool.get(which)
            if schema is None or name in NOT_STRICT:
                continue
            kept = recursive_definitions(schema)
            assert set(schema.get("$defs", {})) == kept, f"{name}: the {which} keeps models that are not recursive"
            outside = {ref for ref in references(schema) if ref.removeprefix("#/$defs/") not in kept}
            assert not outside, f"{name}: the {which} refers to {sorted(outside)}"


def test_each_tool_allowed_not_to_be_strict_is_one_of_the_apps_tools() -> None:
    names = {name for app in APPS.values() for name in registry_of(app).table().by_name}
    assert set(NOT_STRICT) <= names


# -- openai-agents -------------------------------------------------------------------------------


async def test_openai_agents_converts_every_tool_and_the_non_recursive_ones_strictly(served: Served) -> None:
    with anyio.fail_after(WAIT_S):
        params: Any = {"url": f"{served.url}/mcp", "headers": HEADERS, "timeout": WAIT_S}
        async with MCPServerStreamableHttp(params, name="example") as server:
            tools = await server.list_tools()
            converted = {
                tool.name: MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True) for tool in tools
            }
    assert set(converted) == set(served.tools)
    strict = {name for name, function in converted.items() if function.strict_json_schema}
    assert strict == strict_expected(served)


@pytest.mark.parametrize("none", ["", None], ids=["empty", "null"])
async def test_a_strict_openai_agents_tool_completes_the_token_flow(none: str | None) -> None:
    """A strict model must send every argument, `confirmationToken` too: its first call sends
    none (an empty string, or null), gets the plan and token, and runs the route with them."""
    title = f"Strict {none!r}"
    notes = example_app.main.store.notes
    with serve(example_app.main.app) as url, anyio.fail_after(WAIT_S):
        params: Any = {"url": f"{url}/mcp", "headers": HEADERS, "timeout": WAIT_S}
        async with MCPServerStreamableHttp(params, name="example") as server:
            [tool] = [tool for tool in await server.list_tools() if tool.name == "create_note"]
            function = MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True)
            schema = function.params_json_schema
            assert function.strict_json_schema
            assert set(schema["required"]) == set(schema["properties"]) >= {"confirmationToken"}
            arguments = {"title": title, "body": "", "tags": [], "priority": "normal"}
            pending = await invoke(function, {**arguments, "confirmationToken": none})
            assert pending.startswith("Not run yet"), pending
            assert [note for note in notes.values() if note.title == title] == []
            token = json.loads(pending.rsplit("\n", 1)[1])["token"]  # the plan on the answer's last line
            done = await invoke(function, {**arguments, "confirmationToken": token})
    assert json.loads(done)["title"] == title
    assert len([note for note in notes.values() if note.title == title]) == 1


async def invoke(function: FunctionTool, arguments: dict[str, Any]) -> str:
    """The tool's answer to one call, as an agent run hands the model its text."""
    raw = json.dumps(arguments)
    context = ToolContext(context=None, tool_name=function.name, tool_call_id="call", tool_arguments=raw)
    output = await function.on_invoke_tool(context, raw)
    text = output["text"] if isinstance(output, dict) else output
    assert isinstance(text, str), output
    return text


# -- pydantic-ai -------------------------------------------------------------------------------


async def test_pydantic_ai_takes_every_tool_whole_and_prepares_each_strictly_for_openai(served: Served) -> None:
    model = OpenAIResponsesModel(OPENAI_MODEL, provider=OpenAIProvider(api_key="not-used: nothing is sent"))
    context = RunContext(deps=None, model=model, usage=RunUsage())
    with anyio.fail_after(WAIT_S):
        async with MCPToolset(f"{served.url}/mcp", headers=HEADERS, init_timeout=WAIT_S) as toolset:
            tools = await toolset.get_tools(context)
    definitions = {name: tool.tool_def for name, tool in tools.items()}
    assert set(definitions) == set(served.tools)
    for name, definition in definitions.items():
        assert definition.parameters_json_schema == served.tools[name]["inputSchema"], name
    # What an agent run does to the tools before it calls an OpenAI model, strict asked for.
    wanted = [dataclasses.replace(definition, strict=True) for definition in definitions.values()]
    prepared = model.customize_request_parameters(ModelRequestParameters(function_tools=wanted))
    assert {tool.name for tool in prepared.function_tools if tool.strict} == set(served.tools)
    # Left to decide (its default), pydantic-ai makes strict each tool whose schema has nothing
    # optional; an optional argument would have to become a required one.
    decided = model.customize_request_parameters(ModelRequestParameters(function_tools=list(definitions.values())))
    nothing_optional = {name for name, tool in served.tools.items() if not optional(tool["inputSchema"])}
    assert {tool.name for tool in decided.function_tools if tool.strict} == nothing_optional


# -- langchain-mcp-adapters ------------------------------------------------------------------------


@pytest.mark.processes
def test_langchain_mcp_adapters_loads_every_tool_whole_and_converts_each_strictly(served: Served) -> None:
    python = client_python("langchain", LANGCHAIN_PACKAGES)
    script = ROOT / "tests" / "langchain_schemas.py"
    done = subprocess.run(
        [str(python), str(script), f"{served.url}/mcp", json.dumps(HEADERS)],
        capture_output=True,
        text=True,
        timeout=LANGCHAIN_RUN_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert set(report) == set(served.tools)
    for name, entry in report.items():
        assert entry["args"] == served.tools[name]["inputSchema"], name
        assert "error" not in entry, f"{name}: {entry.get('error')}"
        assert entry["function"]["strict"] is True, name
    for name in strict_expected(served):
        # No reference for LangChain to resolve: what the model is shown is the schema itself.
        assert not list(references(report[name]["function"]["parameters"])), name
