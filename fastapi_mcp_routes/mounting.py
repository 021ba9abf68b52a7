"""Mounting a built endpoint (building.py): the APIRouter that serves it at its path beside the
RFC 9728 metadata and the explorer, and the lifespan that starts its background work."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final
from urllib.parse import quote

import anyio
from fastapi import APIRouter, Depends, params
from starlette.requests import Request
from starlette.responses import Response

from fastapi_mcp_routes.auth.protected_resource import add_metadata_routes
from fastapi_mcp_routes.building import Endpoint, skills_path
from fastapi_mcp_routes.explorer.about import About
from fastapi_mcp_routes.explorer.docs_link import link_docs_to
from fastapi_mcp_routes.explorer.facts import ServerFacts, auth_name
from fastapi_mcp_routes.explorer.pages import add_explorer_routes
from fastapi_mcp_routes.options import Sessions
from fastapi_mcp_routes.served import ServedEndpoint, check_served_once, mark_served
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS
from fastapi_mcp_routes.server.skills.catalog import SCHEME
from fastapi_mcp_routes.server.skills.methods import SkillMethods
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.transport.endpoint import StreamableHTTPEndpoint
from fastapi_mcp_routes.transport.plain_routes import ENDPOINT_METHODS, Swap, serve_plainly
from fastapi_mcp_routes.transport.server_card import add_card_route
from fastapi_mcp_routes.wire import constants as c

logger = logging.getLogger("fastapi_mcp_routes")

PlainEndpoint = Callable[[Request], Awaitable[Response]]
_SKILL_FILE_HEADERS: Final = {
    "x-content-type-options": "nosniff",
    "content-security-policy": "sandbox; default-src 'none'",
}


def mount(endpoint: Endpoint) -> APIRouter:
    """The router that serves `endpoint`, for its app to include (`app.include_router(...)`)."""
    return _Mounted(endpoint).router


class _Mounted:
    """The endpoint's router, and what its lifespan needs: all set when it is made, before the
    app can start."""

    def __init__(self, endpoint: Endpoint) -> None:
        options = endpoint.options
        self.endpoint = endpoint
        self.plain_endpoint = _plain_endpoint(endpoint.transport)
        origin_first = _origin_first(endpoint.transport)
        self.guards: list[params.Depends] = [Depends(origin_first), *options.dependencies]
        # Nothing but the Origin check guards the endpoint: it may be served plainly at startup.
        self.plain_guards_only = options.auth is None and not options.dependencies
        # The router's other FastAPI routes (by id: routes are not hashable), served as these where
        # the Origin check is all that guards them (`serve_plainly`, transport/plain_routes.py).
        self.plain_others: dict[int, PlainEndpoint] = {}
        self.swaps: list[Swap] = []
        self.router = APIRouter(lifespan=self.lifespan)
        if options.protected_resource is not None:
            add_metadata_routes(self.router, options.protected_resource, options.path)
        self.route = self._add_endpoint_route()
        if options.server.card is not None:
            card, transport = options.server.card, endpoint.transport
            add_card_route(
                self.router,
                card,
                endpoint.identity,
                options.path,
                endpoint.versions,
                transport.host_refusal,
                transport.over_rate_limit,
            )
        if options.explorer:
            self._add_explorer(origin_first)
        if endpoint.skills is not None:
            self._add_skill_files(endpoint.skills)

    def _add_endpoint_route(self) -> Any:
        endpoint, options = self.endpoint, self.endpoint.options
        served = self.plain_endpoint if options.auth is None else _authenticated(endpoint.transport, options.auth)
        # What the command line reads back from the app's route table (served.py).
        mark_served(
            served,
            ServedEndpoint(
                endpoint.registry, endpoint.urls, endpoint.deployment, options.list_visible_only, endpoint.listings
            ),
        )
        # A FastAPI route, so the dependencies of the app, of parent routers and of the inclusion
        # guard the endpoint as they guard every other route.
        self.router.add_api_route(
            options.path,
            served,
            methods=ENDPOINT_METHODS,
            include_in_schema=False,
            dependencies=self.guards,
            name="mcp",
        )
        return self.router.routes[-1]

    def _add_skill_files(self, skills: SkillMethods) -> None:
        """The skills' files over REST, guarded as the endpoint and by the skills' own
        dependencies; each MCP request for skills runs this route's guards (server/skills/)."""
        options = self.endpoint.options
        guards = [*self.guards, *(options.skills.dependencies if options.skills is not None else ())]
        if options.auth is not None:
            guards.append(options.auth if isinstance(options.auth, params.Depends) else Depends(options.auth))
        files = skills.catalog.files
        # A skill's HTML or SVG file is never run as a page of the app's origin; and what a
        # guard decides per caller is no shared cache's to keep.
        headers = dict(_SKILL_FILE_HEADERS)
        if options.auth is not None or options.dependencies or skills.guarded:
            headers["cache-control"] = "private"

        over_rate_limit = self.endpoint.transport.over_rate_limit

        async def skill_file(request: Request, file_path: str) -> Response:
            if not file_path:  # the guards' own request, for an MCP request already counted
                return Response(status_code=204)
            # A file may be 16 MiB: its reads count against the endpoint's rate limit.
            refusal = await over_rate_limit(request)
            if refusal is not None:
                return refusal
            file = files.get(SCHEME + quote(file_path))
            if file is None:
                return Response(status_code=404)
            return Response(file.data, media_type=file.mime_type, headers=headers)

        self.router.add_api_route(
            skills_path(options.path) + "/{file_path:path}",
            skill_file,
            methods=["GET"],
            include_in_schema=False,
            dependencies=guards,
            name="mcp_skill_file",
        )

    def _add_explorer(self, origin_first: Callable[[Request], None]) -> None:
        endpoint, options = self.endpoint, self.endpoint.options
        about = About(
            app=endpoint.app,
            registry=endpoint.registry,
            lists=endpoint.lists,
            listings=endpoint.listings,
            facts=_server_facts(endpoint),
            forward_headers=endpoint.transport.forward_headers,
        )
        routes = add_explorer_routes(
            self.router, endpoint.app, options.path, about, self.guards, options.auth, origin_first
        )
        self.plain_others[id(routes.about)] = routes.plain_about
        link_docs_to(endpoint.app)

    @asynccontextmanager
    async def lifespan(self, _: Any) -> AsyncIterator[None]:
        endpoint = self.endpoint
        deployment = endpoint.deployment
        try:
            check_served_once(endpoint.app)
            # First the route, then the tools: moving the route changes the route table.
            self._serve_plainly()
            table = endpoint.registry.table()  # a misnamed or duplicate tool stops the app here, not on a call
            endpoint.urls.log_startup(table.by_name.values())
            _say_where_state_lives(_startup_line(endpoint.options.path, table, endpoint.options.sessions, deployment))
            async with anyio.create_task_group() as background:
                # Started, not only scheduled: a request right after startup may become a task.
                await background.start(endpoint.task_runs.serve)
                # Started too: a stream opened right after startup hears the updates it watches.
                await background.start(endpoint.listened.serve)
                if endpoint.sessions is not None and deployment.store.shared:
                    background.start_soon(endpoint.sessions.forward_news)
                if endpoint.sessions is not None:
                    background.start_soon(endpoint.transport.senders.renew_forever)
                yield
                background.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await deployment.store.aclose()
            for swap in self.swaps:
                swap.undo(endpoint.app)
            self.swaps.clear()

    def _serve_plainly(self) -> None:
        if self.plain_guards_only and not self.swaps:
            swap = serve_plainly(self.endpoint.app, self.route, self.guards, self.plain_endpoint, self.plain_others)
            if swap is not None:
                self.swaps.append(swap)


def _plain_endpoint(transport: StreamableHTTPEndpoint) -> PlainEndpoint:
    # A function of its own: the route's endpoint carries the served record (served.py).
    async def mcp_endpoint(request: Request) -> Response:
        return await transport(request)

    return mcp_endpoint


def _origin_first(transport: StreamableHTTPEndpoint) -> Callable[[Request], None]:
    def origin_first(request: Request) -> None:
        # Runs before the endpoint's other dependencies, so a cross-site request never
        # reaches an auth check, a rate limit or an audit record.
        transport.refuse_foreign_origin(request)

    return origin_first


def _authenticated(
    transport: StreamableHTTPEndpoint, auth: Callable[..., Any] | params.Depends
) -> Callable[..., Awaitable[Response]]:
    principal_of = auth if isinstance(auth, params.Depends) else Depends(auth)

    async def authenticated_endpoint(request: Request, principal: Any = principal_of) -> Response:
        request.scope[c.PRINCIPAL_SCOPE_KEY] = principal
        return await transport(request)

    return authenticated_endpoint


def _server_facts(endpoint: Endpoint) -> ServerFacts:
    """The options the explorer shows (explorer/facts.py)."""
    options, identity = endpoint.options, endpoint.identity
    return ServerFacts(
        name=identity.name,
        version=identity.version,
        instructions=identity.instructions,
        protocol_versions=endpoint.versions,
        sessions=options.sessions,
        auth=auth_name(options.auth),
        protected_resource=options.protected_resource is not None,
        list_visible_only=options.list_visible_only,
        confirm_mutations=options.tool_calls.require_confirmation_for_mutations,
        confirmation_ttl_s=options.tool_calls.confirmation_ttl_s,
        rate_limit=options.limits.rate_limit,
        limits=options.limits,
    )


def _say_where_state_lives(line: str) -> None:
    """Log the startup line where it is seen. Where the app has configured no logging by its
    startup (uvicorn sets up only its own loggers: no handler reaches this logger, and nobody set
    its level), an INFO line would be dropped: this one is then written to stderr by a handler
    of its own, used once and kept by nobody.

    Nothing else is written that way. The audit line of each tool call is an INFO record that
    the app's logging shows or drops, as Python's logging guide asks of a library: a handler the
    library kept on its logger wrote one line to stderr per tool call of every app that had
    configured no logging, a cost `make bench` shows."""
    if logger.hasHandlers() or logger.level != logging.NOTSET:
        logger.info("%s", line)  # the app's logging decides: a handler somewhere, or a level set here
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    handler.handle(logger.makeRecord(logger.name, logging.INFO, __file__, 0, "%s", (line,), None))


def _startup_line(path: str, table: ToolTable, sessions: Sessions | None, deployment: Deployment) -> str:
    """What the endpoint serves and where its state lives, so a misconfigured deployment shows
    in its first log line."""
    versions = ", ".join((*c.SESSION_ERA_VERSIONS, *MODERN_VERSIONS) if sessions else MODERN_VERSIONS)
    era = f"sessions on (idle {sessions.idle_s:g} s)" if sessions else "sessions off"
    catalog = table.catalog
    served = f"{len(table.by_name)} tools"
    for count, what in (
        (len(catalog.resources), "resource"),
        (len(catalog.templates), "resource template"),
        (len(catalog.prompts), "prompt"),
    ):
        if count:
            served += f", {count} {what}" + ("s" if count > 1 else "")
    return f"MCP endpoint {path}: {served}, protocols {versions}, {era}; {deployment.describe()}"
