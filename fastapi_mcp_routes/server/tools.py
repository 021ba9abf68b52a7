"""The tools, as the dispatcher serves them: `tools/call` through the `ToolCallPipeline`,
`tools/list`, and the notification of its changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.features import Feature, ListChange, Listed, Listing, Method
from fastapi_mcp_routes.server.pipeline import ToolCallPipeline
from fastapi_mcp_routes.tools.confirmation import TOKEN_ARGUMENT
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolTable

TOOLS_LIST_CHANGED: Final = "notifications/tools/list_changed"
# Routes may be added at runtime: the list can always change.
_CAPABILITY: Final = {"tools": {"listChanged": True}}


def tools_feature(calls: ToolCallPipeline) -> Feature:
    """Declare `tools/call` and `tools/list`."""
    return Feature(
        "tools",
        methods=(Method("tools/call", calls),),
        listings=(Listing("tools/list", "tools", "tool", "tool", "name", "Tool", _tools, _pages),),
        changes=(ListChange(TOOLS_LIST_CHANGED, "toolsListChanged", "tools", _generation),),
        capability=_capability,
    )


def _capability(table: ToolTable) -> Mapping[str, Any]:
    return _CAPABILITY


def _tools(table: ToolTable) -> Sequence[Listed]:
    return [_listed(tool) for tool in table.by_name.values()]


def _listed(tool: Tool) -> Listed:
    schema = tool.definition.get("inputSchema", {})
    # The token of a gated tool is the confirmation's, not an argument a caller chooses.
    properties = {name: node for name, node in schema.get("properties", {}).items() if name != TOKEN_ARGUMENT}
    return Listed(tool.definition, tool.access, tool, {**schema, "properties": properties})


def _pages(table: ToolTable) -> tuple[Any, ...]:
    return table.pages


def _generation(table: ToolTable) -> int:
    return table.generation
