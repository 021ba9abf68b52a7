"""The lists the features declare (`tools/list`, `resources/list`, `resources/templates/list`,
`prompts/list`: server/features.py, `Listing`), as the registry's pages, or for a
caller-dependent list, what this caller sees.

Visibility is never authorization: a list may hide what a caller
statically cannot use, by side-effect-free checks only, and a hidden tool's guards still
refuse its calls.

Listeners learn that a list changed from the registry's generations, through a `ChangeFeed`:
nothing announces a route added at runtime, so one waiter looks at the route table every
`LOOK_S` for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.changes import ChangeFeed
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.features import ListChange, Listed, Listing
from fastapi_mcp_routes.tools.access import Access
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

    def page(self, listing: Listing, cursor: object, channel: ClientChannel) -> Result:
        table = self._registry.table()
        self._changes.note(self._generations(table))  # a change seen here reaches listeners at once
        entries, restricted = self._entries(listing, table)
        if self._visible_only and restricted:
            if cursor is not None:
                raise InvalidParams("Invalid params: the cursor is not one this server issued.")
            return {listing.key: [entry.definition for entry in entries if self.shows(entry.access, channel)]}
        pages = listing.pages(table)
        if cursor is None:
            return pages[0]
        index = decode_cursor(cursor, len(pages))
        if index is None:
            raise InvalidParams("Invalid params: the cursor is not one this server issued.")
        return pages[index]

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

    def _generations(self, table: ToolTable) -> Generations:
        return tuple(change.generation(table) for change in self._watched)

    def _entries(self, listing: Listing, table: ToolTable) -> tuple[Sequence[Listed], bool]:
        read = self._read.get(listing.method)
        if read is None or read[0] is not table:
            entries = listing.entries(table)
            read = (table, entries, any(entry.access is not None for entry in entries))
            self._read[listing.method] = read
        return read[1], read[2]
