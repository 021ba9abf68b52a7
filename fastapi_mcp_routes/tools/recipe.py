"""A route as something to call: `Tool`, the recipe every MCP call of a route is made from.

A tool, a resource read, a prompt and a completion all run a route the same way: its method,
its path with placeholders filled, its arguments put where its OpenAPI operation says they go
(tools/invoke.py). `Tool` holds that, as discovered once; the tool list's definitions and the
other features' descriptions are built beside it (tools/registry.py, tools/catalog/entries.py).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.request_models import RequestModels
from fastapi_mcp_routes.tools.schema import ToolSchema
from fastapi_mcp_routes.tools.scopes import route_scopes
from fastapi_mcp_routes.tools.urls import UrlArguments
from fastapi_mcp_routes.wire import constants as c

PATH_CONVERTOR: Final = re.compile(r"{([^}:]+):path}")
_PLACEHOLDER: Final = re.compile(r"{([^}]+)}")
_HEADER_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token


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
    definition: Mapping[str, Any]  # the tools/list entry; empty for other features' recipes
    # Arguments a 2026-07-28 client mirrors in an `Mcp-Param-<Name>` header ("x-mcp-header"):
    # (argument, lower-case header name, JSON type).
    header_params: tuple[tuple[str, str, str], ...] = ()
    access: Access | None = None  # None: anyone sees it in tools/list
    confirm: bool = False  # a call runs only once confirmed (the `confirmationToken` argument)
    models: RequestModels | None = None  # a gated tool's request fields, validated before it is asked
    urls: UrlArguments | None = None  # where its arguments hold URLs; None: it takes none
    task: str = "never"  # whether a call may run as a task (tools/marking.py, TASK_MODES)
    stream: bool = False  # a call samples the route's streamed response (tools/streams.py)
    threaded: bool = False  # a `def` route: FastAPI runs it in the thread pool (server/threads.py)
    scopes: tuple[str, ...] = ()  # what its route's schemes ask for, named by a step-up (tools/scopes.py)


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


def recipe(route: Any, method: str, name: str, schema: ToolSchema, where: str, **extra: Any) -> Tool:
    """How to call `route` with `method`; `extra` are the tool-only fields (`definition`,
    `access`, `confirm`, `models`, `urls`, `task`, `stream`; `scopes` where already read)."""
    if "scopes" not in extra:
        extra["scopes"] = route_scopes(route)
    return Tool(
        name=name,
        method=method,
        path_format=route.path_format,
        path_parts=_path_parts(route.path_format),
        slash_params=frozenset(PATH_CONVERTOR.findall(route.path)),
        schema=schema,
        required=frozenset(schema.input_schema.get("required", ())),
        definition=extra.pop("definition", {}),
        header_params=_header_params(schema.input_schema["properties"], where),
        threaded=runs_in_thread(route),
        **extra,
    )


def runs_in_thread(route: Any) -> bool:
    """Whether FastAPI runs the route's endpoint in the thread pool: a plain `def` (a sync
    generator's items too); a coroutine or async generator runs on the event loop."""
    endpoint = getattr(route, "endpoint", None)
    if endpoint is None:
        return False
    endpoint = inspect.unwrap(endpoint)
    if not inspect.isroutine(endpoint) and callable(endpoint):
        endpoint = endpoint.__call__  # an instance with a `__call__`, as FastAPI accepts
    return not (inspect.iscoroutinefunction(endpoint) or inspect.isasyncgenfunction(endpoint))


def route_description(route: Any, explicit: str | None) -> str | None:
    """Explicit, else the route's own description (its docstring, when no `description=` is
    given: FastAPI copies it), else its summary. The summary is the title: a one-line summary
    would drop what the docstring tells the model ("Needs the API key.")."""
    return explicit or route.description or route.summary or None
