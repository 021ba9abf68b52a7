"""What a feature serves, declared in one place: its methods and the eras that serve each, its
lists and the notification that announces their changes, its capability and its extension.

Each feature package (server/resources, server/prompts, server/tasks, the tools of
server/pipeline.py, and the lifecycle methods the dispatcher answers itself) hands the
dispatcher one `Feature`. The dispatcher's method table, the era each method is served in,
`initialize` and `server/discover`'s capabilities, the lists, the list-change notifications of
a GET stream or a `subscriptions/listen`, the explorer and the command line's inventory are all
read from these declarations: adding a primitive is a package that declares itself, and nothing
central to edit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from fastapi_mcp_routes.server.channel import SESSION_ERA, STATELESS_ERA, ClientChannel, Result
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.wire.json import RawJSON
from fastapi_mcp_routes.wire.jsonrpc import Request

__all__ = [
    "BOTH_ERAS",
    "SESSION_ERA",
    "STATELESS_ERA",
    "Feature",
    "Handler",
    "ListChange",
    "Listed",
    "Listing",
    "Method",
    "ResourceReader",
    "check_features",
]

# A method served in both protocol eras (server/channel.py: each channel names its era).
BOTH_ERAS: Final = frozenset({SESSION_ERA, STATELESS_ERA})

Handler = Callable[[Request, ClientChannel], Awaitable[Result]]


@dataclass(frozen=True, slots=True)
class Method:
    """One MCP request method a feature answers.

    Args:
        name: the JSON-RPC method, e.g. `"resources/read"`.
        answer: answers one request of this method on a client's channel.
        eras: the protocol eras that serve it; a request of another era is -32601.
        private: the result depends on who asks, so no one else may cache it (2026-07-28
            `cacheScope`).
    """

    name: str
    answer: Handler
    eras: frozenset[str] = BOTH_ERAS
    private: bool = False


class ResourceReader(Protocol):
    """Resources a feature serves that no route is behind (the skills' files): `resources/read`
    hands it the URIs it serves."""

    def serves(self, uri: str) -> bool: ...

    async def read(self, request: Request, channel: ClientChannel, uri: str) -> Result: ...


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of a list, with the route behind it."""

    definition: Mapping[str, Any]  # as the list method gives it
    access: Access | None  # who sees it where lists show only what a caller may use
    route: Tool  # the route that serves it
    arguments: Mapping[str, Any]  # an object schema of what a client passes it


@dataclass(frozen=True, slots=True)
class Listing:
    """A list a feature serves (`tools/list`, `resources/list`, ...), read from the tool table.

    Args:
        method: the list method.
        key: the result's array, and the key of the entries in the explorer and `list --json`.
        kind: what one entry is called in `list --json` ("resourceTemplate").
        noun: what one entry is called in a sentence ("resource template").
        label: the definition's field that names an entry ("uriTemplate").
        heading: that field's column heading in `list` ("URI template").
        entries: every entry in list order, whoever asks.
        pages: the list's pages as served to a caller who may see everything.
        completed_as: the reference type a `completion/complete` names an entry by
            (`ref/prompt`), for lists whose entries' arguments complete; None otherwise.
    """

    method: str
    key: str
    kind: str
    noun: str
    label: str
    heading: str
    entries: Callable[[ToolTable], Sequence[Listed]]
    pages: Callable[[ToolTable], tuple[RawJSON, ...]]
    completed_as: str | None = None

    @property
    def title(self) -> str:
        """The list's name as a title ("Resource templates")."""
        return self.noun[:1].upper() + self.noun[1:] + "s"


@dataclass(frozen=True, slots=True)
class ListChange:
    """A notification that tells a listener a list changed.

    Args:
        notification: the JSON-RPC notification sent, e.g. `notifications/prompts/list_changed`.
        listen_name: what a 2026-07-28 `subscriptions/listen` names to hear it.
        capability: the capability the server offers while it can send it.
        generation: where the list stands in a table: it moves whenever the list changes.
    """

    notification: str
    listen_name: str
    capability: str
    generation: Callable[[ToolTable], int]


@dataclass(frozen=True, slots=True)
class Feature:
    """Everything one feature serves.

    Args:
        name: a short name, for messages and the docs.
        methods: the requests it answers.
        listings: the lists it serves (the dispatcher answers their methods).
        changes: the list-change notifications it sends.
        capability: the capabilities it adds for a table (`initialize`, `server/discover`);
            empty when the app has nothing of it.
        extensions: the extensions it adds for a table (`server/discover`, and `initialize`
            where `extension_eras` has the session era).
        extension_eras: the eras its extensions are offered in.
    """

    name: str
    methods: tuple[Method, ...] = ()
    listings: tuple[Listing, ...] = ()
    changes: tuple[ListChange, ...] = ()
    capability: Callable[[ToolTable], Mapping[str, Any]] = lambda table: {}
    extensions: Callable[[ToolTable], Mapping[str, Any]] = lambda table: {}
    extension_eras: frozenset[str] = frozenset({STATELESS_ERA})


def check_features(features: Iterable[Feature]) -> tuple[Feature, ...]:
    """The features, once no two of them declare the same method, list or notification;
    `ValueError` naming the clash otherwise."""
    chosen = tuple(features)
    seen: dict[str, str] = {}
    for feature in chosen:
        names = [method.name for method in feature.methods] + [listing.method for listing in feature.listings]
        names += [change.notification for change in feature.changes]
        names += [change.listen_name for change in feature.changes]
        for name in names:
            if name in seen:
                raise ValueError(f"the features {seen[name]!r} and {feature.name!r} both declare {name!r}")
            seen[name] = feature.name
    return chosen
