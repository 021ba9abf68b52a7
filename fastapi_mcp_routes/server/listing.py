"""The lists: `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`, as
the registry's pages, or for a caller-dependent list, what this caller sees.

Visibility is never authorization (DESIGN.md, decision 4): a list may hide what a caller
statically cannot use, by side-effect-free checks only, and a hidden tool's guards still
refuse its calls.

Listeners learn that a list changed from the registry's generations, through a `ChangeFeed`:
nothing announces a route added at runtime, so one waiter looks at the route table every
`LOOK_S` for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from fastapi_mcp_routes.server.changes import ChangeFeed
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.paging import decode_cursor
from fastapi_mcp_routes.tools.registry import ToolRegistry, ToolTable
from fastapi_mcp_routes.wire.errors import InvalidParams
from fastapi_mcp_routes.wire.json import RawJSON

# How soon a route added at runtime reaches listeners: one look at the route table per
# interval for the whole process, and only while someone listens (a look costs about 10 µs
# with 12 tools, 0.5 ms with 1,000: `ToolRegistry.table()` on `benchmarks/bench_app.py`).
LOOK_S: Final = 0.5
LIST_METHODS: Final = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})


class Generations(NamedTuple):
    """Where each list stands: each number moves whenever its list changes."""

    tools: int
    resources: int
    prompts: int


class _List(NamedTuple):
    key: str  # the result's array
    pages: tuple[RawJSON, ...]
    entries: Iterable[tuple[Mapping[str, Any], Access | None]]  # (definition, who sees it), in order
    restricted: bool


def generations(table: ToolTable) -> Generations:
    return Generations(table.generation, table.resources_generation, table.prompts_generation)


class Lists:
    """Answers the list methods from the registry."""

    def __init__(self, *, registry: ToolRegistry, visible_only: bool, credential_headers: frozenset[bytes]) -> None:
        self._registry = registry
        self._visible_only = visible_only
        self._credential_headers = credential_headers
        self._changes = ChangeFeed(lambda: generations(self._registry.table()), LOOK_S)

    def personal(self, method: str) -> bool:
        """Whether the list depends on who asks (then no one else may cache it)."""
        return self._visible_only and _list(self._registry.cached(), method).restricted

    def generation(self) -> Generations:
        """The lists' generations now: each moves whenever its list changes."""
        return self._changes.now()

    async def generation_after(self, seen: Generations) -> Generations:
        """The generations, once a list has changed since `seen`."""
        return await self._changes.after(seen)

    def page(self, method: str, cursor: object, channel: ClientChannel) -> Result:
        table = self._registry.table()
        self._changes.note(generations(table))  # a change seen here reaches listeners at once
        listed = _list(table, method)
        if self._visible_only and listed.restricted:
            if cursor is not None:
                raise InvalidParams("Invalid params: the cursor is not one this server issued.")
            return {listed.key: [definition for definition, access in listed.entries if self.shows(access, channel)]}
        if cursor is None:
            return listed.pages[0]
        index = decode_cursor(cursor, len(listed.pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return listed.pages[index]

    def shows(self, access: Access | None, channel: ClientChannel) -> bool:
        """Whether lists show this caller what `access` guards."""
        return self.shown_to(access, channel.principal, channel.caller.headers)

    def shown_to(self, access: Access | None, principal: Any, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether lists show what `access` guards to a caller with this principal (what the
        endpoint's `auth` returned, or None) and these request headers (lower-case names): the
        one rule for the lists and for whatever else tells a caller what it may see."""
        if access is None or not self._visible_only:
            return True

        def presents_credential() -> bool:
            return any(name in self._credential_headers for name, _ in headers)

        return access.shown_to(principal, presents_credential)


def _list(table: ToolTable, method: str) -> _List:
    catalog = table.catalog
    if method == "resources/list":
        resources = sorted(catalog.resources.values(), key=lambda entry: entry.template.text)
        entries = [(entry.definition, entry.access) for entry in resources]
        return _List("resources", catalog.resource_pages, entries, _any(entries))
    if method == "resources/templates/list":
        entries = [(entry.definition, entry.access) for entry in catalog.templates]
        return _List("resourceTemplates", catalog.template_pages, entries, _any(entries))
    if method == "prompts/list":
        entries = [(prompt.definition, prompt.access) for prompt in catalog.prompts.values()]
        return _List("prompts", catalog.prompt_pages, entries, _any(entries))
    tools = ((tool.definition, tool.access) for tool in table.by_name.values())
    return _List("tools", table.pages, tools, table.restricted)


def _any(entries: list[tuple[Mapping[str, Any], Access | None]]) -> bool:
    return any(access is not None for _, access in entries)
