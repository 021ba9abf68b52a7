"""A throwaway primitive, `example/ping2`, in a package of its own: what a new MCP feature is.

It declares its method, the eras that serve it, its capability and a list of its own with the
notification that announces the list's changes; the dispatcher, the channels, `initialize`,
`server/discover`, `subscriptions/listen`, the explorer and the command line find it through
that declaration alone (tests/test_new_primitive.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.features import BOTH_ERAS, Feature, ListChange, Listed, Listing, Method
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.wire.errors import InvalidParams
from fastapi_mcp_routes.wire.jsonrpc import Request

PING2: Final = "example/ping2"
PING2_LIST: Final = "example/ping2s/list"
PING2_LIST_CHANGED: Final = "notifications/example/ping2s/list_changed"


async def _answer(request: Request, channel: ClientChannel) -> Result:
    echo = request.params.get("echo")
    if not isinstance(echo, str):
        raise InvalidParams("Invalid params: 'echo' must be a string.")
    return {"pong": echo, "era": channel.era}


def _entries(table: ToolTable) -> Sequence[Listed]:
    # One entry per tool, so the list has something to show: the tool's route behind it.
    return [Listed({"name": f"ping2-{tool.name}"}, None, tool, {"type": "object"}) for tool in table.by_name.values()]


def _pages(table: ToolTable) -> tuple[Any, ...]:
    return ({"ping2s": [entry.definition for entry in _entries(table)]},)


def _capability(table: ToolTable) -> Mapping[str, Any]:
    return {"experimental": {PING2: {}}}


def ping2_feature() -> Feature:
    return Feature(
        "ping2",
        methods=(Method(PING2, _answer, BOTH_ERAS),),
        listings=(Listing(PING2_LIST, "ping2s", "ping2", "ping2", "name", "Ping2", _entries, _pages),),
        changes=(ListChange(PING2_LIST_CHANGED, "ping2sListChanged", "experimental", lambda table: table.generation),),
        capability=_capability,
    )
