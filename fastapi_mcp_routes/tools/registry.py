"""Tool discovery: which routes are tools, their definitions, and a cache that follows the app.

Discovery is lazy and cached. The cache is keyed by the identity of the app's routes, so a
route added (or removed) at runtime is noticed by the next `tools/list`; a change that touches
no tool keeps the tools as they are. `tools/call` trusts the cache and refreshes it only for a
name it does not know, keeping the call path free of work proportional to the size of the
route table.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from fastapi_mcp_routes.options import DEFAULT_PAGE_SIZE
from fastapi_mcp_routes.tools.access import Access, access_of
from fastapi_mcp_routes.tools.confirmation import gated_input_schema, gated_output_schema
from fastapi_mcp_routes.tools.marking import ToolOptions, read_tool_options
from fastapi_mcp_routes.tools.schema import Definitions, ToolSchema, build_tool_schema
from fastapi_mcp_routes.tools.urls import UrlArguments, url_arguments
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.json import RawJSON, dumps

logger = logging.getLogger("fastapi_mcp_routes")
_TOOL_NAME: Final = re.compile(c.TOOL_NAME_PATTERN)
_PATH_CONVERTOR: Final = re.compile(r"{([^}:]+):path}")
_PLACEHOLDER: Final = re.compile(r"{([^}]+)}")
_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token

# Hints derived from the HTTP method (documented in the README): what a REST author promises
# by choosing the method. Explicit `mcp_tool` options override each one.
METHOD_HINTS: Final[Mapping[str, Mapping[str, bool]]] = {
    "GET": {"readOnlyHint": True},
    "HEAD": {"readOnlyHint": True},
    "POST": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    "PUT": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
    "PATCH": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    "DELETE": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}
_OPTION_HINTS: Final = (
    ("read_only", "readOnlyHint"),
    ("destructive", "destructiveHint"),
    ("idempotent", "idempotentHint"),
    ("open_world", "openWorldHint"),
)


@dataclass(frozen=True, slots=True)
class Tool:
    """One route method exposed as a tool, as discovered; request handling only reads it."""

    name: str
    method: str
    path_format: str
    # (literal text, the same percent-encoded, the placeholder after it or None), in path order
    path_parts: tuple[tuple[str, str, str | None], ...]
    slash_params: frozenset[str]  # path parameters declared with the `path` convertor
    schema: ToolSchema
    required: frozenset[str]
    definition: Mapping[str, Any]
    # Arguments a 2026-07-28 client mirrors in an `Mcp-Param-<Name>` header ("x-mcp-header"):
    # (argument, lower-case header name, JSON type).
    header_params: tuple[tuple[str, str, str], ...] = ()
    access: Access | None = None  # None: anyone sees it in tools/list
    confirm: bool = False  # a call runs only once confirmed (the `confirmationToken` argument)
    urls: UrlArguments | None = None  # where its arguments hold URLs; None: it takes none


# A marked route as discovered: the route, its effective dependant, method, tool name, path.
_Mark = tuple[Any, Any, str, str, str]


@dataclass(frozen=True, slots=True)
class ToolTable:
    """All tools of one state of the route table, with the `tools/list` pages pre-encoded."""

    routes: tuple[Any, ...]  # what it was built from (`_identities`), held so identity checks stay sound
    generation: int  # goes up whenever the tool list itself changes
    by_name: Mapping[str, Tool]
    pages: tuple[RawJSON, ...]
    restricted: bool = False  # some tool is not listed for every caller
    # What each marked route was built from: a route table that changed only in routes that
    # are not tools needs no new table.
    marked: tuple[_Mark, ...] = ()


@dataclass(frozen=True, slots=True)
class _Marked:
    route: Any  # an APIRoute, or FastAPI's view of one inside an included router
    options: ToolOptions
    method: str
    name: str
    where: str


class ToolRegistry:
    """Discovers the app's tools and keeps them in step with its route table."""

    def __init__(
        self,
        app: FastAPI,
        caller_headers: frozenset[str],
        confirm_mutations: bool = False,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        self._app = app
        self._page_size = page_size
        self._caller_headers = caller_headers  # headers that are never tool arguments
        self._confirm_mutations = confirm_mutations  # gate tools that are not read-only
        self._table: ToolTable | None = None

    def table(self) -> ToolTable:
        """The current tools, rebuilt when the app's tools changed since the last look."""
        # Included routers stay live in FastAPI, so their views are read afresh each time.
        top = self._app.routes
        routes = list(iter_route_contexts(top))
        originals = _identities(top, routes)
        table = self._table
        if table is None or not _same_routes(table.routes, originals):
            table = self._table = self._rebuild(routes, originals)
        return table

    def _rebuild(self, routes: list[Any], originals: tuple[Any, ...]) -> ToolTable:
        previous = self._table
        if previous is None:
            return self._build(routes, originals)  # at startup, a misdeclared tool stops the app
        try:
            marked = _marked_routes(routes)
            if _same_marks(previous.marked, _marks(marked)):
                return dataclasses.replace(previous, routes=originals)  # no tool changed
            table = self._build(routes, originals)
        except ValueError:
            # A route added at runtime is misdeclared: keep serving the last good tools, and
            # remember these routes so the error is logged once, not on every request.
            logger.exception("MCP tools were not updated after the route table changed")
            return dataclasses.replace(previous, routes=originals)
        changed = table.pages != previous.pages  # a route that is not a tool changes nothing
        return dataclasses.replace(table, generation=previous.generation + changed)

    def _build(self, routes: list[Any], originals: tuple[Any, ...]) -> ToolTable:
        return _build_table(
            self._app, routes, originals, self._caller_headers, self._confirm_mutations, self._page_size
        )

    def cached(self) -> ToolTable:
        """The table as last built, without looking at the route table again."""
        return self._table or self.table()

    def lookup(self, name: str) -> Tool | None:
        """The tool called `name`; the cache is refreshed only when the name is unknown."""
        table = self._table or self.table()
        tool = table.by_name.get(name)
        if tool is None and self._table is not None:
            tool = self.table().by_name.get(name)
        return tool


def _identities(top: list[Any], routes: list[Any]) -> tuple[Any, ...]:
    """What tells one route table from another: the app's own entries (a router included
    again, say with other dependencies, is a new entry) and every route inside them."""
    return (*top, *map(_original, routes))


def _original(route: Any) -> Any:
    return getattr(route, "original_route", route)


def _same_routes(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return len(before) == len(now) and all(map(operator.is_, before, now))


def _build_table(
    app: FastAPI,
    routes: list[Any],
    originals: tuple[Any, ...],
    caller_headers: frozenset[str],
    confirm_mutations: bool,
    page_size: int,
) -> ToolTable:
    marked = _marked_routes(routes)
    _check_names(marked)
    operations = _operations(app, marked)
    components = operations.get("components", {}).get("schemas", {})
    definitions: Definitions = {}
    tools = []
    for entry in marked:
        operation = operations["paths"][entry.route.path_format][entry.method.lower()]
        schema = build_tool_schema(operation, components, caller_headers, entry.where, definitions)
        tools.append(_tool(entry, schema, confirm_mutations))
    tools.sort(key=lambda tool: tool.name)
    by_name = {tool.name: tool for tool in tools}
    restricted = any(tool.access is not None for tool in tools)
    pages = _pages([tool.definition for tool in tools], page_size)
    return ToolTable(originals, 0, by_name, pages, restricted, _marks(marked))


def _marks(marked: list[_Marked]) -> tuple[_Mark, ...]:
    # The dependant tells an inclusion with other dependencies (another visibility) apart.
    return tuple(
        (
            _original(entry.route),
            getattr(entry.route, "dependant", None),
            entry.method,
            entry.name,
            entry.route.path_format,
        )
        for entry in marked
    )


def _same_marks(before: tuple[_Mark, ...], now: tuple[_Mark, ...]) -> bool:
    return len(before) == len(now) and all(
        a[0] is b[0] and a[1] is b[1] and a[2:] == b[2:] for a, b in zip(before, now, strict=True)
    )


def _marked_routes(routes: list[Any]) -> list[_Marked]:
    marked = []
    for route in routes:
        if not isinstance(_original(route), APIRoute):
            continue
        where = f"route {route.name!r} ({', '.join(sorted(route.methods))} {route.path})"
        options = read_tool_options(route.endpoint, route.openapi_extra, where)
        if options is None:
            continue
        if not route.include_in_schema:
            raise ValueError(
                f"{where}: a route with include_in_schema=False cannot be an MCP tool, because "
                "its tool schema is its OpenAPI operation"
            )
        methods = sorted(route.methods)
        if len(methods) > 1 and options.name is not None:
            raise ValueError(f"{where}: one tool name {options.name!r} cannot serve {len(methods)} methods")
        for method in methods:
            name = options.name if options.name is not None else route.name
            if len(methods) > 1:
                name = f"{name}_{method.lower()}"
            marked.append(_Marked(route, options, method, name, where))
    return marked


def _check_names(marked: list[_Marked]) -> None:
    seen: dict[str, _Marked] = {}
    for entry in marked:
        if not _TOOL_NAME.fullmatch(entry.name):
            raise ValueError(
                f"{entry.where}: the tool name {entry.name!r} must be 1-128 characters of "
                "letters, digits, '_', '-' and '.'"
            )
        if entry.name in seen:
            raise ValueError(
                f"two tools are named {entry.name!r}: {seen[entry.name].where} and {entry.where}; "
                "give one of them another name with mcp_tool(name=...)"
            )
        seen[entry.name] = entry


def _operations(app: FastAPI, marked: list[_Marked]) -> dict[str, Any]:
    if not marked:
        return {"paths": {}}
    routes = list({id(entry.route): entry.route for entry in marked}.values())
    return get_openapi(
        title=app.title,
        version=app.version,
        routes=routes,
        separate_input_output_schemas=app.separate_input_output_schemas,
    )


def _tool(entry: _Marked, schema: ToolSchema, confirm_mutations: bool) -> Tool:
    route, options = entry.route, entry.options
    annotations = _annotations(entry.method, options)
    confirm = options.confirm
    if confirm is None:
        confirm = confirm_mutations and not annotations.get("readOnlyHint")
    definition: dict[str, Any] = {"name": entry.name}
    title = options.title or route.summary
    if title:
        definition["title"] = title
    definition["description"] = _description(entry)
    definition["inputSchema"] = gated_input_schema(schema.input_schema, entry.where) if confirm else schema.input_schema
    if schema.output_schema is not None:
        output = schema.output_schema
        definition["outputSchema"] = gated_output_schema(output) if confirm else output
    definition["annotations"] = annotations
    if options.meta:
        definition["_meta"] = dict(options.meta)
    return Tool(
        name=entry.name,
        method=entry.method,
        path_format=route.path_format,
        path_parts=_path_parts(route.path_format),
        slash_params=frozenset(_PATH_CONVERTOR.findall(route.path)),
        schema=schema,
        required=frozenset(schema.input_schema.get("required", ())),
        definition=definition,
        header_params=_header_params(schema.input_schema["properties"], entry.where),
        access=access_of(route, options),
        confirm=confirm,
        urls=url_arguments(schema.input_schema),
    )


def _header_params(properties: Mapping[str, Any], where: str) -> tuple[tuple[str, str, str], ...]:
    """Arguments marked "x-mcp-header", checked as the spec limits them: an integer, string or
    boolean argument, a header-token name, unique ignoring case (2026-07-28, Custom Headers)."""
    params: list[tuple[str, str, str]] = []
    for name, prop in properties.items():
        if not isinstance(prop, Mapping) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        kinds = {option.get("type") for option in prop.get("anyOf", [prop])} - {"null"}
        kind = next(iter(kinds)) if len(kinds) == 1 else None
        if not isinstance(header, str) or not _HEADER_TOKEN.fullmatch(header):
            raise ValueError(f"{where}: x-mcp-header of {name!r} must be an HTTP header token, got {header!r}")
        if kind not in ("integer", "string", "boolean"):
            raise ValueError(f"{where}: x-mcp-header needs an integer, string or boolean argument; {name!r} is {kinds}")
        lowered = c.PARAM_HEADER_PREFIX + header.lower()
        if any(lowered == taken for _, taken, _ in params):
            raise ValueError(f"{where}: two arguments use the x-mcp-header {header!r}")
        params.append((name, lowered, kind))
    return tuple(params)


def _path_parts(path_format: str) -> tuple[tuple[str, str, str | None], ...]:
    pieces = _PLACEHOLDER.split(path_format)  # literal, name, literal, name, ..., literal
    names: list[str | None] = [*pieces[1::2], None]
    return tuple((literal, quote(literal, safe="/"), name) for literal, name in zip(pieces[0::2], names, strict=True))


def _description(entry: _Marked) -> str:
    """Explicit, else the route's own description, summary, docstring, or a sentence."""
    route = entry.route
    docstring = inspect.cleandoc(route.endpoint.__doc__ or "")
    # FastAPI copies the docstring into `description` when none is given; tell the two apart.
    described = route.description if route.description != docstring else ""
    return (
        entry.options.description
        or described
        or route.summary
        or docstring
        or f"Calls {entry.method} {route.path_format}."
    )


def _annotations(method: str, options: ToolOptions) -> dict[str, bool]:
    hints = dict(METHOD_HINTS.get(method, {}))
    for option, hint in _OPTION_HINTS:
        value = getattr(options, option)
        if value is not None:
            hints[hint] = value
    return hints


def _pages(definitions: list[Mapping[str, Any]], size: int) -> tuple[RawJSON, ...]:
    starts = range(0, max(len(definitions), 1), size)
    pages = []
    for start in starts:
        page: dict[str, Any] = {"tools": definitions[start : start + size]}
        if start + size < len(definitions):
            page["nextCursor"] = encode_cursor(start // size + 1)
        pages.append(RawJSON(dumps(page)))
    return tuple(pages)


def encode_cursor(page: int) -> str:
    """An opaque `tools/list` cursor naming a page."""
    return f"p{page}"


def decode_cursor(cursor: object, page_count: int) -> int | None:
    """The page index a cursor names, or `None` when it names no page."""
    if not isinstance(cursor, str) or not re.fullmatch(r"p[1-9][0-9]{0,6}", cursor):
        return None
    index = int(cursor[1:])
    return index if index < page_count else None
