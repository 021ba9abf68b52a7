"""`mcp_routes`: the one call that puts an MCP endpoint beside a FastAPI app's REST API. It
reads its options; building.py wires the endpoint, mounting.py serves it from a router."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, params

from fastapi_mcp_routes.auth.protected_resource import ProtectedResource
from fastapi_mcp_routes.building import EndpointOptions, build_endpoint
from fastapi_mcp_routes.explorer.pages import serves_explorer
from fastapi_mcp_routes.mounting import mount
from fastapi_mcp_routes.old_keywords import fold_old_keywords
from fastapi_mcp_routes.options import (
    Limits,
    Origins,
    ServerInfo,
    Sessions,
    Skills,
    Streaming,
    Tasks,
    Telemetry,
    ToolCalls,
)
from fastapi_mcp_routes.server.sealing.secret import SecretOption
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.wire import constants as c

Group = TypeVar("Group")


def mcp_routes(
    app: FastAPI,
    *,
    path: str = "/mcp",
    server: ServerInfo | None = None,
    auth: Callable[..., Any] | params.Depends | None = None,
    protected_resource: ProtectedResource | None = None,
    dependencies: Sequence[params.Depends] | None = None,
    origins: Origins | None = None,
    forward_headers: Iterable[str] = c.DEFAULT_FORWARD_HEADERS,
    sessions: bool | Sessions = True,
    secret: SecretOption = None,
    store: Store | None = None,
    limits: Limits | None = None,
    tasks: Tasks | None = None,
    streaming: Streaming | None = None,
    tool_calls: ToolCalls | None = None,
    list_visible_only: bool = True,
    explorer: bool | None = None,
    telemetry: Telemetry | None = None,
    skills: Skills | str | os.PathLike[str] | None = None,
    **deprecated: Any,
) -> APIRouter:
    """Build the router that serves the app's marked routes as MCP tools, resources, prompts
    and completions (`mcp_tool`, `mcp_resource`, `mcp_prompt`, `mcp_completion`); use it as
    `app.include_router(mcp_routes(app))`. Routes added to the app later are served too.

    Args:
        path: where the Streamable-HTTP endpoint listens.
        server: `ServerInfo(...)`: the name, version and instructions sent to clients, and the
            Server Card served beside the endpoint (`ServerCard`, experimental).
        auth: a FastAPI dependency (e.g. a `JWTBearer`) every request to the endpoint must pass;
            its result is the caller's principal (`ToolContext.principal`), sessions are bound to it.
        protected_resource: serve RFC 9728 metadata, so clients find the authorization server.
        dependencies: FastAPI dependencies run on every request to the endpoint.
        origins: `Origins(...)`: the browser origins and Host values the endpoint answers.
        forward_headers: request headers passed from the MCP caller to the routes besides
            `Authorization` and `Cookie`; they are credentials, never tool arguments.
        sessions: issue and require `Mcp-Session-Id` (session-era clients); `False` serves them
            without sessions; `Sessions(...)` sets how sessions live.
        secret: seals session ids, `requestState` and confirmation tokens, so every process
            accepts what any issued: 32 bytes or more, or a list (the first seals, all open). By
            default `FASTAPI_MCP_ROUTES_SECRET` (comma-separated), else random per process.
        store: where shared state lives, e.g. `RedisStore.from_url("redis://...")` for several
            processes; by default this process's memory. Closed when the app shuts down.
        limits: `Limits(...)`: bounds on bodies, responses, pages, tokens, streams, argument
            nesting, and the endpoint's rate limit per caller.
        tasks: `Tasks(...)`: how routes marked `mcp_tool(task=...)` run as tasks clients poll.
        streaming: `Streaming(...)`: how long streaming routes are sampled and streams last.
        tool_calls: `ToolCalls(...)`: confirming mutations, the server URLs a call may pass,
            and the hook that hears of each call.
        list_visible_only: the lists hide what a caller statically cannot use (routes needing
            a credential the caller does not present, `visible=...` saying no); scopes a token
            lacks hide nothing (its client may step up); calls still run every guard.
        explorer: serve the MCP explorer at `{path}/explorer` and link it from the OpenAPI
            description: `None` where the app serves its docs, `True` always, `False` never.
        telemetry: `Telemetry(...)`: what the endpoint reports to OpenTelemetry when the app
            configures an SDK (spans, metrics, the trace context carried to the routes), and
            the correlation headers (`X-Request-Id`) the routes receive.
        skills: a folder of agent skills to serve beside the tools (SEP-2640), or `Skills(...)`
            to guard them with dependencies and bound them; read when this is called.
        **deprecated: keywords of the previous release, such as `server_name=`, each warned
            of with its new spelling (old_keywords.py).
    """
    given = EndpointOptions(
        path=_path(path),
        server=_group("server", server, ServerInfo),
        auth=auth,
        protected_resource=protected_resource,
        dependencies=tuple(dependencies or ()),
        origins=_group("origins", origins, Origins),
        forward_headers=_header_names(forward_headers),
        sessions=_sessions(sessions),
        secret=secret,
        store=store,
        limits=_group("limits", limits, Limits),
        tasks=_group("tasks", tasks, Tasks),
        streaming=_group("streaming", streaming, Streaming),
        tool_calls=_group("tool_calls", tool_calls, ToolCalls),
        list_visible_only=list_visible_only,
        explorer=serves_explorer(app, explorer),
        telemetry=_group("telemetry", telemetry, Telemetry),
        skills=_skills(skills),
    )
    options = fold_old_keywords(given, deprecated)
    return mount(build_endpoint(app, options))


def _group(keyword: str, value: object, kind: type[Group]) -> Group:
    """An option group: the value given, else one with every default."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ValueError(f"{keyword} must be a {kind.__name__}(...), got {value!r}")
    return value


def _skills(skills: Skills | str | os.PathLike[str] | None) -> Skills | None:
    if skills is None or isinstance(skills, Skills):
        return skills
    if isinstance(skills, (str, os.PathLike)):
        return Skills(skills)
    raise ValueError(f"skills must be a folder's path or a Skills(...), got {skills!r}")


def _path(path: object) -> str:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")
    return path


def _sessions(sessions: bool | Sessions) -> Sessions | None:
    if isinstance(sessions, Sessions):
        return sessions
    if isinstance(sessions, bool):
        return Sessions() if sessions else None
    raise ValueError(f"sessions must be True, False or a Sessions(...), got {sessions!r}")


def _header_names(names: Iterable[str]) -> frozenset[str]:
    if isinstance(names, str):
        raise ValueError(f"forward_headers must be a list of header names, got the single string {names!r}")
    result = frozenset(name.lower() for name in names)
    transport = sorted(result & c.TRANSPORT_HEADERS)
    if transport:
        raise ValueError(f"forward_headers cannot name MCP transport headers, got {transport!r}")
    return result
