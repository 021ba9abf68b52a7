"""The lists the features declare (`tools/list`, `resources/list`, `resources/templates/list`,
`prompts/list`: server/features.py, `Listing`), as the registry's pages, or for a
caller-dependent list, what this caller sees.

Visibility is never authorization: a list may hide what a caller
statically cannot use, by side-effect-free checks only, and a hidden tool's guards still
refuse its calls. A `Viewer` decides for one caller and one request, so the security schemes
its `visible` predicates read the caller's credentials with run once for the whole list.

Listeners learn that a list changed from the registry's generations, through a `ChangeFeed`:
nothing announces a route added at runtime, so one waiter looks at the route table every
`LOOK_S` for all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.changes import ChangeFeed
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.features import ListChange, Listed, Listing
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.credentials import SchemeReads
from fastapi_mcp_routes.tools.invoke import Caller
from fastapi_mcp_routes.tools.paging import decode_cursor
from fastapi_mcp_routes.tools.registry import ToolRegistry, ToolTable
from fastapi_mcp_routes.wire.errors import InvalidParams

# How soon a route added at runtime reaches listeners: one look at the route table per
# interval for the whole process, and only while someone listens (`ToolRegistry.table()`'s
# cost grows with the routes: benchmarks/bench_app.py).
LOOK_S: Final = 0.5

# Where each declared list stands: one number per `ListChange`, in the order declared.
Generations = tuple[int, ...]


class Lists:
    """Answers the declared list methods from the registry."""

    def __init__(
        self,
        *,
        registry: ToolRegistry,
        visible_only: bool,
        credential_headers: frozenset[bytes],
        changes: Sequence[ListChange] = (),
    ) -> None:
        self._registry = registry
        self._visible_only = visible_only
        self._credential_headers = credential_headers
        self._watched = tuple(changes)
        self._changes = ChangeFeed(lambda: self._generations(self._registry.table()), LOOK_S)
        # A list's entries and whether any is restricted, for the table they were read from.
        self._read: dict[str, tuple[ToolTable, Sequence[Listed], bool]] = {}

    @property
    def watched(self) -> tuple[ListChange, ...]:
        """The list-change notifications, in the order of the generations."""
        return self._watched

    def personal(self, listing: Listing) -> bool:
        """Whether the list depends on who asks (then no one else may cache it)."""
        return self._visible_only and self._entries(listing, self._registry.cached())[1]

    def generation(self) -> Generations:
        """The lists' generations now: each moves whenever its list changes."""
        return self._changes.now()

    async def generation_after(self, seen: Generations) -> Generations:
        """The generations, once a list has changed since `seen`."""
        return await self._changes.after(seen)

    async def page(self, listing: Listing, cursor: object, channel: ClientChannel) -> Result:
        table = self._registry.table()
        self._changes.note(self._generations(table))  # a change seen here reaches listeners at once
        entries, restricted = self._entries(listing, table)
        if self._visible_only and restricted:
            if cursor is not None:
                raise InvalidParams("Invalid params: the cursor is not one this server issued.")
            viewer = self.viewer(channel.principal, channel.caller)
            return {listing.key: [entry.definition for entry in entries if await viewer.sees(entry.access)]}
        pages = listing.pages(table)
        if cursor is None:
            return pages[0]
        index = decode_cursor(cursor, len(pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return pages[index]

    def viewer(self, principal: Any, caller: Caller) -> Viewer:
        """What lists show one caller, with this principal (what the endpoint's `auth`
        returned, or None) and this request (what a route would inherit of it): the one rule
        for the lists and for whatever else tells a caller what it may see."""
        return Viewer(principal, caller, self._credential_headers, self._visible_only)

    def _generations(self, table: ToolTable) -> Generations:
        return tuple(change.generation(table) for change in self._watched)

    def _entries(self, listing: Listing, table: ToolTable) -> tuple[Sequence[Listed], bool]:
        read = self._read.get(listing.method)
        if read is None or read[0] is not table:
            entries = listing.entries(table)
            read = (table, entries, any(entry.access is not None for entry in entries))
            self._read[listing.method] = read
        return read[1], read[2]


class Viewer:
    """One caller's view of the lists, for one request."""

    __slots__ = ("_caller", "_credential_headers", "_credentials", "_principal", "_visible_only")

    def __init__(
        self, principal: Any, caller: Caller, credential_headers: frozenset[bytes], visible_only: bool
    ) -> None:
        self._principal = principal
        self._caller = caller
        self._credential_headers = credential_headers
        self._visible_only = visible_only
        self._credentials: SchemeReads | None = None

    async def sees(self, access: Access | None) -> bool:
        """Whether lists show this caller what `access` guards."""
        if access is None or not self._visible_only:
            return True
        if self._credentials is None:
            self._credentials = SchemeReads(self._caller)
        credentials = self._credentials
        return await credentials.settled(
            lambda: access.shown_to(self._principal, self._presents_credential, credentials)
        )

    def _presents_credential(self) -> bool:
        return any(name in self._credential_headers for name, _ in self._caller.headers)
