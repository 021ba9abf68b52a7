"""Tool discovery: which routes are tools, their definitions, and a cache that follows the app.

Discovery is lazy and cached. The cache is keyed by the identity of the app's routes, so a
route added (or removed) at runtime is noticed by the next `tools/list`; a change that touches
no tool keeps the tools as they are. `tools/call` trusts the cache and refreshes it only for a
name it does not know, keeping the call path free of work proportional to the size of the
route table.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts

from fastapi_mcp_routes.options import DEFAULT_PAGE_SIZE
from fastapi_mcp_routes.tools.access import access_of
from fastapi_mcp_routes.tools.catalog.entries import EMPTY_CATALOG, Catalog, FeatureMark, Kind, build_catalog
from fastapi_mcp_routes.tools.catalog.marks import (
    CompletionOptions,
    PromptOptions,
    ResourceOptions,
    read_completion_options,
    read_prompt_options,
    read_resource_options,
)
from fastapi_mcp_routes.tools.confirmation import gated_input_schema
from fastapi_mcp_routes.tools.inline import INLINED_SCHEMA_LIMIT, inline_models
from fastapi_mcp_routes.tools.marking import ToolOptions, read_tool_options
from fastapi_mcp_routes.tools.paging import pages
from fastapi_mcp_routes.tools.recipe import Tool, recipe, route_description
from fastapi_mcp_routes.tools.request_models import request_models
from fastapi_mcp_routes.tools.schema import Definitions, ToolSchema, build_tool_schema
from fastapi_mcp_routes.tools.scopes import scopes_of, with_scopes
from fastapi_mcp_routes.tools.streams import STREAM_ARGUMENTS, Streamed, WindowBounds, output_schema, stream_of
from fastapi_mcp_routes.tools.urls import url_arguments
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.json import RawJSON

logger = logging.getLogger("fastapi_mcp_routes")
_TOOL_NAME: Final = re.compile(c.TOOL_NAME_PATTERN)

# Hints derived from the HTTP method (documented in docs/guides/tools.md): what a REST author promises
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


# A marked route as discovered: the route, its effective dependant, method, name, path, kind.
_Mark = tuple[Any, Any, str, str, str, type]
_Options = ToolOptions | ResourceOptions | PromptOptions | CompletionOptions
_KINDS: Final[Mapping[type, Kind]] = {
    ResourceOptions: "resource",
    PromptOptions: "prompt",
    CompletionOptions: "completion",
}


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
    # Resources, templates, prompts and completions; their lists' generations move as the
    # tools' does, each when its own list changes.
    catalog: Catalog = EMPTY_CATALOG
    resources_generation: int = 0
    prompts_generation: int = 0

    @property
    def offers_tasks(self) -> bool:
        """Whether some tool's call may run as a task (the tasks extension is advertised)."""
        return any(tool.task != "never" for tool in self.by_name.values())


@dataclass(frozen=True, slots=True)
class _Marked:
    route: Any  # an APIRoute, or FastAPI's view of one inside an included router
    options: _Options
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
        windows: WindowBounds | None = None,
    ) -> None:
        self._app = app
        self._windows = windows if windows is not None else WindowBounds()
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
        # A route that is not a tool (or a resource, a prompt) changes nothing.
        changed = table.pages != previous.pages
        now, before = table.catalog, previous.catalog
        resources = (now.resource_pages, now.template_pages) != (before.resource_pages, before.template_pages)
        prompts = now.prompt_pages != before.prompt_pages
        return dataclasses.replace(
            table,
            generation=previous.generation + changed,
            resources_generation=previous.resources_generation + resources,
            prompts_generation=previous.prompts_generation + prompts,
        )

    def _build(self, routes: list[Any], originals: tuple[Any, ...]) -> ToolTable:
        return _build_table(
            self._app, routes, originals, self._caller_headers, self._confirm_mutations, self._page_size, self._windows
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
    windows: WindowBounds,
) -> ToolTable:
    marked = _marked_routes(routes)
    _check_names(marked)
    operations = _operations(app, marked)
    components = operations.get("components", {}).get("schemas", {})
    definitions: Definitions = {}
    tools = []
    features = []
    for entry in marked:
        operation = operations["paths"][entry.route.path_format][entry.method.lower()]
        schema = build_tool_schema(operation, components, caller_headers, entry.where, definitions)
        if isinstance(entry.options, ToolOptions):
            tools.append(_tool(entry, entry.options, schema, confirm_mutations, windows))
        else:
            kind = _KINDS[type(entry.options)]
            call = recipe(entry.route, entry.method, f"{kind}:{entry.name}", schema, entry.where)
            features.append(FeatureMark(kind, entry.route, entry.options, call, entry.where))
    tools.sort(key=lambda tool: tool.name)
    by_name = {tool.name: tool for tool in tools}
    restricted = any(tool.access is not None for tool in tools)
    tool_pages = pages("tools", [tool.definition for tool in tools], page_size)
    catalog = build_catalog(features, page_size)
    return ToolTable(originals, 0, by_name, tool_pages, restricted, _marks(marked), catalog)


def _marks(marked: list[_Marked]) -> tuple[_Mark, ...]:
    # The dependant tells an inclusion with other dependencies (another visibility) apart.
    return tuple(
        (
            _original(entry.route),
            getattr(entry.route, "dependant", None),
            entry.method,
            entry.name,
            entry.route.path_format,
            type(entry.options),
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
        endpoint, extra = route.endpoint, route.openapi_extra
        options = read_tool_options(endpoint, extra, where)
        features = [
            feature
            for feature in (
                read_resource_options(endpoint, extra, where),
                read_prompt_options(endpoint, extra, where),
                read_completion_options(endpoint, extra, where),
            )
            if feature is not None
        ]
        if options is None and not features:
            continue
        if not route.include_in_schema:
            raise ValueError(
                f"{where}: a route with include_in_schema=False cannot be served over MCP, because "
                "what it takes is read from its OpenAPI operation"
            )
        methods = sorted(route.methods)
        if options is not None:
            marked.extend(_tool_marks(route, options, methods, where))
        for feature in features:
            if len(methods) > 1:
                kind = _KINDS[type(feature)]
                raise ValueError(f"{where}: an MCP {kind} is served by a route with one method; give it its own route")
            marked.append(_Marked(route, feature, methods[0], getattr(feature, "name", None) or route.name, where))
    return marked


def _tool_marks(route: Any, options: ToolOptions, methods: list[str], where: str) -> list[_Marked]:
    if len(methods) > 1 and options.name is not None:
        raise ValueError(f"{where}: one tool name {options.name!r} cannot serve {len(methods)} methods")
    marked = []
    for method in methods:
        name = options.name if options.name is not None else route.name
        if len(methods) > 1:
            name = f"{name}_{method.lower()}"
        marked.append(_Marked(route, options, method, name, where))
    return marked


def _check_names(marked: list[_Marked]) -> None:
    seen: dict[str, _Marked] = {}
    for entry in marked:
        if not isinstance(entry.options, ToolOptions):
            continue
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


def _tool(
    entry: _Marked, options: ToolOptions, schema: ToolSchema, confirm_mutations: bool, windows: WindowBounds
) -> Tool:
    route = entry.route
    streamed = stream_of(route, options.stream)
    if streamed is not None:
        schema = _windowed(schema, streamed, windows, entry.where)
    for which in schema.oversized:
        logger.warning(
            "%s: the %s of the tool %r keeps its models in $defs, because written out where each is used "
            "it would pass %d bytes of JSON; a client that needs a strict schema (OpenAI's strict tool "
            "calls) may refuse it",
            entry.where,
            which,
            entry.name,
            INLINED_SCHEMA_LIMIT,
        )
    annotations = _annotations(entry.method, options)
    confirm = options.confirm
    if confirm is None:
        confirm = confirm_mutations and not annotations.get("readOnlyHint")
    definition: dict[str, Any] = {"name": entry.name}
    title = options.title or route.summary
    if title:
        definition["title"] = title
    definition["description"] = _description(entry, options)
    definition["inputSchema"] = gated_input_schema(schema.input_schema, entry.where) if confirm else schema.input_schema
    if schema.output_schema is not None:
        # A gated tool's too: its pending answer is an `isError` result (tools/confirmation.py).
        definition["outputSchema"] = schema.output_schema
    definition["annotations"] = annotations
    if options.meta:
        definition["_meta"] = dict(options.meta)
    access = access_of(route, options.visible)
    scopes = scopes_of(access)
    with_scopes(definition, scopes)
    return recipe(
        route,
        entry.method,
        entry.name,
        schema,
        entry.where,
        definition=definition,
        access=access,
        confirm=confirm,
        models=request_models(route) if confirm else None,
        urls=url_arguments(schema.input_schema),
        task=options.task,
        stream=streamed is not None,
        scopes=scopes,
    )


def _windowed(schema: ToolSchema, streamed: Streamed, windows: WindowBounds, where: str) -> ToolSchema:
    """A streaming tool's schemas: the window's two arguments, and the sample as its output."""
    properties = schema.input_schema["properties"]
    clash = sorted(set(STREAM_ARGUMENTS) & set(properties))
    if clash:
        raise ValueError(
            f"{where}: a streaming tool takes the arguments {', '.join(STREAM_ARGUMENTS)} for its window, and "
            f"the route has a parameter named {clash[0]!r}; rename the parameter (an alias keeps its wire name)"
        )
    input_schema = {**schema.input_schema, "properties": {**properties, **windows.input_properties()}}
    output = output_schema(streamed.sse, streamed.item)
    # The item's models, from pydantic, are written out as the route's are (tools/inline.py).
    inlined = inline_models(output, output.get("$defs", ()))
    oversized = tuple(which for which in schema.oversized if which != "outputSchema")
    if inlined is None:
        oversized += ("outputSchema",)
    return dataclasses.replace(
        schema,
        input_schema=input_schema,
        output_schema=output if inlined is None else inlined,
        output_wrapped=False,
        oversized=oversized,
    )


def _description(entry: _Marked, options: ToolOptions) -> str:
    """Explicit, else the route's own description (docstring), summary, or a sentence."""
    fallback = f"Calls {entry.method} {entry.route.path_format}."
    return route_description(entry.route, options.description) or fallback


def _annotations(method: str, options: ToolOptions) -> dict[str, bool]:
    hints = dict(METHOD_HINTS.get(method, {}))
    for option, hint in _OPTION_HINTS:
        value = getattr(options, option)
        if value is not None:
            hints[hint] = value
    return hints
