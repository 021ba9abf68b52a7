"""`tools/list`: the registry's pages, or for a caller-dependent list, what this caller sees.

Visibility is never authorization (DESIGN.md, decision 4): a list may hide what a caller
statically cannot use, by side-effect-free checks only, and a hidden tool's guards still
refuse its calls.

Listeners learn that the list changed from the registry's generation, through a `ChangeFeed`:
nothing announces a route added at runtime, so one waiter looks at the route table every
`LOOK_S` for all of them.
"""

from __future__ import annotations

from typing import Final

from fastapi_mcp_routes.server.changes import ChangeFeed
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.registry import ToolRegistry, decode_cursor
from fastapi_mcp_routes.wire.errors import InvalidParams

# How soon a route added at runtime reaches listeners: one look at the route table per
# interval for the whole process, and only while someone listens (a look costs about 10 µs
# with 12 tools, 0.5 ms with 1,000: `ToolRegistry.table()` on `benchmarks/bench_app.py`).
LOOK_S: Final = 0.5


class ToolLister:
    """Answers `tools/list` from the registry."""

    def __init__(self, *, registry: ToolRegistry, visible_only: bool, credential_headers: frozenset[bytes]) -> None:
        self._registry = registry
        self._visible_only = visible_only
        self._credential_headers = credential_headers
        self._changes = ChangeFeed(lambda: self._registry.table().generation, LOOK_S)

    @property
    def personal(self) -> bool:
        """Whether the list depends on who asks (then no one else may cache it)."""
        return self._visible_only and self._registry.cached().restricted

    def generation(self) -> int:
        """The tool list's generation now: it moves whenever the list changes."""
        return self._changes.now()

    async def generation_after(self, seen: int) -> int:
        """The generation, once the list has changed since generation `seen`."""
        return await self._changes.after(seen)

    def page(self, cursor: object, channel: ClientChannel) -> Result:
        table = self._registry.table()
        self._changes.note(table.generation)  # a change seen here reaches listeners at once
        if self._visible_only and table.restricted:
            if cursor is not None:
                raise InvalidParams("Invalid params: the cursor is not one this server issued.")
            return {"tools": [tool.definition for tool in table.by_name.values() if self._shows(tool.access, channel)]}
        if cursor is None:
            return table.pages[0]
        index = decode_cursor(cursor, len(table.pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return table.pages[index]

    def _shows(self, access: Access | None, channel: ClientChannel) -> bool:
        if access is None:
            return True

        def presents_credential() -> bool:
            return any(name in self._credential_headers for name, _ in channel.caller.headers)

        return access.shown_to(channel.principal, presents_credential)
