"""`mcp_routes`: the one call that puts an MCP endpoint beside a FastAPI app's REST API."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Depends, FastAPI, params
from starlette.requests import Request
from starlette.responses import Response

from fastapi_mcp_routes.auth.protected_resource import ProtectedResource, add_metadata_routes
from fastapi_mcp_routes.explorer.about import About
from fastapi_mcp_routes.explorer.docs_link import link_docs_to
from fastapi_mcp_routes.explorer.facts import ServerFacts, auth_name
from fastapi_mcp_routes.explorer.pages import add_explorer_routes, serves_explorer
from fastapi_mcp_routes.options import Limits, Sessions, Tasks, check_seconds
from fastapi_mcp_routes.served import ServedEndpoint, check_served_once, mark_served
from fastapi_mcp_routes.server.audit import ToolCallEvent, log_tool_call
from fastapi_mcp_routes.server.channel import Channels
from fastapi_mcp_routes.server.confirmation.gate import DEFAULT_TTL_S, ConfirmationGate, TokenStore
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.dispatch import Dispatcher, Listened, ServerIdentity
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS, ResultShaper
from fastapi_mcp_routes.server.features import Feature
from fastapi_mcp_routes.server.listing import Lists
from fastapi_mcp_routes.server.pipeline import ToolCallPipeline
from fastapi_mcp_routes.server.prompts.feature import prompts_feature
from fastapi_mcp_routes.server.prompts.methods import PromptMethods
from fastapi_mcp_routes.server.resources.feature import resources_feature
from fastapi_mcp_routes.server.resources.methods import ResourceMethods
from fastapi_mcp_routes.server.resources.updates import ResourceUpdates, remember
from fastapi_mcp_routes.server.route_call import RouteRunner
from fastapi_mcp_routes.server.sealing.request_state import RequestStateSealer
from fastapi_mcp_routes.server.sealing.secret import Secret, SecretOption
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.server.tasks.feature import tasks_feature
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.server.tasks.runs import TaskRuns
from fastapi_mcp_routes.server.tools import tools_feature
from fastapi_mcp_routes.server.urls.policy import url_policy
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.tools.registry import ToolRegistry, ToolTable
from fastapi_mcp_routes.tools.streams import WindowBounds
from fastapi_mcp_routes.transport.endpoint import StreamableHTTPEndpoint, TransportConfig
from fastapi_mcp_routes.transport.origin import OriginPolicy
from fastapi_mcp_routes.transport.plain_routes import ENDPOINT_METHODS, Swap, serve_plainly
from fastapi_mcp_routes.transport.writes import ResourceWrites
from fastapi_mcp_routes.wire import constants as c

if TYPE_CHECKING:
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

logger = logging.getLogger("fastapi_mcp_routes")

# Always the caller's own: never taken from a model's arguments, always forwarded to the route.
_ALWAYS_CREDENTIALS = (c.HEADER_AUTHORIZATION, "proxy-authorization", c.HEADER_COOKIE)
# Forwarded so the route sees the request as the caller sent it, but not credentials.
_CONTEXT_HEADERS = (c.HEADER_HOST, "user-agent", "accept-language")
# Set by the library for the route's request; a model cannot set them either.
_REQUEST_HEADERS = (c.HEADER_CONTENT_TYPE, c.HEADER_CONTENT_LENGTH, c.HEADER_ACCEPT)


def mcp_routes(
    app: FastAPI,
    *,
    path: str = "/mcp",
    server_name: str | None = None,
    server_version: str | None = None,
    instructions: str | None = None,
    allowed_origins: Iterable[str] | None = None,
    allowed_hosts: Iterable[str] | None = None,
    sessions: bool | Sessions = True,
    limits: Limits | None = None,
    tasks: Tasks | None = None,
    forward_headers: Iterable[str] = c.DEFAULT_FORWARD_HEADERS,
    dependencies: Sequence[params.Depends] | None = None,
    max_stream_seconds: float | None = None,
    secret: SecretOption = None,
    store: Store | None = None,
    request_state_key: bytes | None = None,
    auth: Callable[..., Any] | params.Depends | None = None,
    protected_resource: ProtectedResource | None = None,
    on_tool_call: Callable[[ToolCallEvent], Any] = log_tool_call,
    list_visible_only: bool = True,
    rate_limit: str | None = None,
    require_confirmation_for_mutations: bool = True,
    confirmation_ttl_s: float = DEFAULT_TTL_S,
    allowed_server_urls: Iterable[str] | None = None,
    allow_arbitrary_urls: bool = False,
    allowed_server_urls_from_env: bool | str = False,
    default_subscribe_ms: int = 5000,
    max_subscribe_ms: int = 30000,
    max_subscribe_frames: int = 200,
    explorer: bool | None = None,
    extra_features: Sequence[Feature] = (),
) -> APIRouter:
    """Build the router that serves the app's marked routes as MCP tools, resources, prompts
    and completions (`mcp_tool`, `mcp_resource`, `mcp_prompt`, `mcp_completion`).

    Use it as `app.include_router(mcp_routes(app))`.

    Args:
        app: the FastAPI app whose routes become tools; routes added later are found too.
        path: where the Streamable-HTTP endpoint listens.
        server_name, server_version: the identity sent to clients; default to the app's
            title and version.
        instructions: guidance for the model, sent in the `initialize` result.
        allowed_origins: browser origins allowed besides the server's own; `["*"]` allows all.
        allowed_hosts: Host values a loopback-bound server accepts besides loopback names,
            for a reverse proxy on the same machine.
        sessions: issue and require `Mcp-Session-Id` (session-era clients); `False` serves
            them without sessions; `Sessions(idle_s=..., max_sessions=..., max_per_caller=...)`
            sets how sessions live.
        limits: `Limits(...)`: the bounds on bodies, responses, list pages, keep-alive,
            confirmation tokens, resumable streams and the nesting of arguments.
        tasks: `Tasks(...)`: how routes marked `mcp_tool(task=...)` run as tasks a 2026-07-28
            client polls: when a call becomes one, how long tasks are kept, how many per caller
            and in all, and the largest result kept.
        forward_headers: request headers passed from the MCP caller to the routes besides
            `Authorization` and `Cookie`; they are credentials, never tool arguments.
        dependencies: FastAPI dependencies run on every request to the endpoint.
        max_stream_seconds: end a resumable (2025-11-25) POST stream after this many seconds,
            for proxies that cut long responses; the call runs on and the client resumes the
            stream with `Last-Event-ID`. `None` keeps streams open until the answer.
        secret: what seals session ids, 2026-07-28 `requestState` and confirmation tokens, so
            every process serving the endpoint accepts what any of them issued: 32 bytes or more
            (text or bytes), or a list whose first entry seals and every entry opens (a rotation).
            By default the environment variable `FASTAPI_MCP_ROUTES_SECRET` (entries separated
            by commas), else random per process, which serves one process only.
        store: where state that must be shared lives (sessions' end, replay logs, the single use
            of tokens, the endpoint's rate limit) and how a client's answer or cancellation
            reaches the process running the call: `RedisStore.from_url("redis://...")` for
            several processes; by default this process's memory. It is closed when the app
            shuts down.
        request_state_key: deprecated name of `secret` (it sealed only `requestState`).
        auth: a FastAPI dependency (e.g. a `JWTBearer`, or `Security(jwt, scopes=[...])`) that
            must succeed for every request to the endpoint; its return value is the caller's
            principal (`ToolContext.principal`), and sessions are bound to it.
        protected_resource: serve RFC 9728 metadata for the endpoint, so clients can find the
            authorization server after a 401.
        on_tool_call: receives a `ToolCallEvent` per tool call (principal, tool, a digest of
            the arguments, outcome, HTTP status, duration); by default an INFO log line on the
            `fastapi_mcp_routes` logger. May be a coroutine function.
        list_visible_only: the lists (`tools/list`, `resources/list`, `resources/templates/list`,
            `prompts/list`) hide what a caller statically cannot use: entries whose routes need
            authentication from a caller with no principal (or, without `auth`, no
            credentials), whose `Security` scopes the principal lacks, or whose `visible=...`
            predicate says no. Calls, reads and prompts still run every guard.
        rate_limit: a budget per caller for the endpoint itself, in slowapi syntax
            ("120/minute"); over it, 429 with Retry-After. Kept in the app's slowapi `Limiter`
            storage when one is installed (`app.state.limiter`), else in memory.
        require_confirmation_for_mutations: a tool that is not read-only runs only once its
            call is confirmed: by the user where the client can ask (elicitation, or an input
            request in the stateless revision), else by calling again with the
            `confirmationToken` the first call returned. `mcp_tool(confirm=...)` overrides it
            per tool. Turn it off where an approval layer of your own confirms calls.
        confirmation_ttl_s: how long a confirmation token stays usable.
        allowed_server_urls: the server URLs a tool call may pass to a route, as prefixes
            (`"https://api.example.com/v1"` allows `/v1` and `/v1/...`, not `/v10`). A URL
            argument (JSON Schema `format: uri`, as pydantic's `HttpUrl` and `AnyUrl` give) must
            have the same scheme, host and port as an entry and a path under its path; any
            other is refused with an `isError` result before the route runs (and before a
            confirmation is asked for), so a prompt-injected agent cannot make the server
            fetch internal addresses. `None` or empty: every URL argument is refused, and a
            warning at startup names the tools taking URLs. REST calls are not checked.
        allow_arbitrary_urls: accept every URL argument (a warning at startup says so); cannot
            be combined with `allowed_server_urls` or `allowed_server_urls_from_env`.
        allowed_server_urls_from_env: add entries from an environment variable, read when
            `mcp_routes` is called: `True` reads `MCP_ALLOWED_SERVER_URLS`, a string names
            another variable. Entries are separated by commas or whitespace.
        default_subscribe_ms, max_subscribe_ms, max_subscribe_frames: a streaming route (SSE,
            JSON Lines) called as a tool is sampled for `durationMs` (by default
            `default_subscribe_ms`, at most `max_subscribe_ms`) and returns at most `maxFrames`
            frames (at most `max_subscribe_frames`).
        explorer: serve the MCP explorer at `{path}/explorer`, a page beside `/docs` that shows
            each viewer what the endpoint shows them (tools with their routes, resources,
            prompts, the server's options) and calls tools from a form, and link it from the
            OpenAPI description; `None` (the default) serves it where the app serves its docs
            (`docs_url`), `True` always, `False` never.
    """
    _check_options(path, max_stream_seconds)
    with_explorer = serves_explorer(app, explorer)
    check_seconds("confirmation_ttl_s", confirmation_ttl_s)
    session_options = _session_options(sessions)
    limits = limits if limits is not None else Limits()
    if not isinstance(limits, Limits):
        raise ValueError(f"limits must be a Limits(...), got {limits!r}")
    forwarded = _header_names(forward_headers)
    credentials = frozenset(_ALWAYS_CREDENTIALS) | forwarded
    caller_headers = credentials | frozenset(_CONTEXT_HEADERS) | frozenset(_REQUEST_HEADERS)
    urls = url_policy(allowed_server_urls, allow_arbitrary_urls, allowed_server_urls_from_env, os.environ)
    sampling = WindowBounds(default_subscribe_ms, max_subscribe_ms, max_subscribe_frames)
    registry = ToolRegistry(
        app, caller_headers, require_confirmation_for_mutations, page_size=limits.page_size, windows=sampling
    )
    identity = ServerIdentity(server_name or app.title, server_version or app.version, instructions)
    config = TransportConfig(
        origin_policy=OriginPolicy.build(allowed_origins, allowed_hosts),
        limits=limits,
        forward_headers=frozenset(h.encode() for h in credentials | frozenset(_CONTEXT_HEADERS)),
        # Not Cookie: clients keep whatever cookies the app sets (CSRF, load-balancer affinity),
        # so the Cookie header changes within a session without the caller changing.
        credential_headers=frozenset(h.encode() for h in credentials - {c.HEADER_COOKIE}),
        max_stream_seconds=max_stream_seconds,
    )
    sealing = Secret.configure(secret, os.environ, request_state_key)
    if store is None:
        # Processes sharing a secret each number a session's streams, from their own start.
        store = MemoryStore(first_stream=1 + secrets.randbelow(10**8) if sealing.shared else 1)
    deployment = Deployment(sealing, store)
    tokens = TokenStore(deployment, capacity=limits.max_tokens, per_caller=limits.max_tokens_per_caller)
    tasks = tasks if tasks is not None else Tasks()
    if not isinstance(tasks, Tasks):
        raise ValueError(f"tasks must be a Tasks(...), got {tasks!r}")
    task_runs = TaskRuns(deployment=deployment, options=tasks)
    calls = ToolCallPipeline(
        app=app,
        registry=registry,
        gate=ConfirmationGate(tokens=tokens, ttl_s=confirmation_ttl_s),
        on_tool_call=on_tool_call,
        max_response_bytes=limits.max_response_bytes,
        urls=urls,
        max_argument_depth=limits.max_argument_depth,
        tasks=task_runs,
        windows=sampling,
    )
    runner = RouteRunner(app=app, max_response_bytes=limits.max_response_bytes)
    updates = ResourceUpdates(store, registry)
    remember(app, updates)
    _watch_writes(app, updates)
    session_manager = (
        SessionManager(options=session_options, deployment=deployment, limits=limits) if session_options else None
    )
    listened = Listened(
        resources=ResourceMethods(
            registry=registry,
            runner=runner,
            max_subscriptions=limits.max_subscriptions,
            max_uri_chars=limits.max_uri_chars,
        ),
        updates=updates,
        tasks=TaskMethods(task_runs),
    )
    features = (
        tools_feature(calls),
        resources_feature(listened.resources),
        prompts_feature(PromptMethods(registry=registry, runner=runner)),
        tasks_feature(listened.tasks),
        *extra_features,
    )
    lists = Lists(
        registry=registry,
        visible_only=list_visible_only,
        credential_headers=config.credential_headers,
        changes=[change for feature in features for change in feature.changes],
    )
    dispatcher = Dispatcher(identity=identity, lists=lists, features=features, table=registry.table, listened=listened)
    endpoint = StreamableHTTPEndpoint(
        config=config,
        dispatcher=dispatcher,
        channels=Channels(
            sessions=session_manager,
            sealer=RequestStateSealer(sealing),
            shaper=ResultShaper({"name": identity.name, "version": identity.version}),
        ),
        deployment=deployment,
        sessions=session_manager,
        rate_limit=_endpoint_rate_limit(app, rate_limit, getattr(store, "url", None) if store.shared else None),
    )

    async def mcp_endpoint(request: Request) -> Response:
        return await endpoint(request)

    def origin_first(request: Request) -> None:
        # Runs before the endpoint's other dependencies, so a cross-site request never
        # reaches an auth check, a rate limit or an audit record.
        endpoint.refuse_foreign_origin(request)

    served_first: list[Swap] = []
    # The endpoint's router's other FastAPI routes (by id: routes are not hashable), served as
    # these where the Origin check is all that guards them (`serve_plainly`, transport/plain_routes.py).
    plain_endpoints: dict[int, Callable[[Request], Awaitable[Response]]] = {}

    @asynccontextmanager
    async def discover_at_startup(_: Any) -> AsyncIterator[None]:
        try:
            check_served_once(app)
            # First the route, then the tools: moving the route changes the route table.
            if plain_guards_only and not served_first:
                swap = serve_plainly(app, route, guards, mcp_endpoint, plain_endpoints)
                if swap is not None:
                    served_first.append(swap)
            table = registry.table()  # a misnamed or duplicate tool stops the app here, not on a call
            urls.log_startup(table.by_name.values())
            _say_where_state_lives(_startup_line(path, table, session_options, deployment))
            async with anyio.create_task_group() as background:
                # Started, not only scheduled: a request right after startup may become a task.
                await background.start(task_runs.serve)
                if session_manager is not None and deployment.store.shared:
                    background.start_soon(session_manager.forward_news)
                if session_manager is not None:
                    background.start_soon(endpoint.senders.renew_forever)
                yield
                background.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await deployment.store.aclose()
            for swap in served_first:
                swap.undo(app)
            served_first.clear()

    router = APIRouter(lifespan=discover_at_startup)
    if protected_resource is not None:
        add_metadata_routes(router, protected_resource, path)
    guards = [Depends(origin_first), *(dependencies or ())]
    served_endpoint: Callable[..., Awaitable[Response]] = mcp_endpoint
    if auth is not None:
        principal_of = auth if isinstance(auth, params.Depends) else Depends(auth)

        async def authenticated_endpoint(request: Request, principal: Any = principal_of) -> Response:
            request.scope[c.PRINCIPAL_SCOPE_KEY] = principal
            return await endpoint(request)

        served_endpoint = authenticated_endpoint
    # What the command line reads back from the app's route table (served.py).
    mark_served(served_endpoint, ServedEndpoint(registry, urls, deployment, list_visible_only, dispatcher.listings()))
    # A FastAPI route, so the dependencies of the app, of parent routers and of the inclusion
    # guard the endpoint as they guard every other route.
    router.add_api_route(
        path,
        served_endpoint,
        methods=ENDPOINT_METHODS,
        include_in_schema=False,
        dependencies=guards,
        name="mcp",
    )
    route = router.routes[-1]
    plain_guards_only = auth is None and not dependencies
    if with_explorer:
        facts = ServerFacts(
            name=identity.name,
            version=identity.version,
            instructions=identity.instructions,
            protocol_versions=(*c.SESSION_ERA_VERSIONS, *MODERN_VERSIONS),
            sessions=session_options,
            auth=auth_name(auth),
            protected_resource=protected_resource is not None,
            list_visible_only=list_visible_only,
            confirm_mutations=require_confirmation_for_mutations,
            confirmation_ttl_s=confirmation_ttl_s,
            rate_limit=rate_limit,
            limits=limits,
        )
        about = About(app=app, registry=registry, lists=lists, listings=dispatcher.listings(), facts=facts)
        explorer_routes = add_explorer_routes(router, app, path, about, guards, auth, origin_first)
        plain_endpoints[id(explorer_routes.about)] = explorer_routes.plain_about
        link_docs_to(app)
    return router


def _watch_writes(app: FastAPI, updates: ResourceUpdates) -> None:
    """Have the app's successful writes announce the resources they change (transport/writes.py)."""
    try:
        app.add_middleware(ResourceWrites, updates=updates)
    except RuntimeError:
        logger.warning(
            "mcp_routes was called after the app started: its REST writes will not notify resource "
            "subscribers (call notify_resource_updated instead)"
        )


def _endpoint_rate_limit(app: FastAPI, rate_limit: str | None, redis_url: str | None) -> EndpointRateLimit | None:
    if rate_limit is None:
        return None
    # Imported when asked for: the `limits` library takes tens of milliseconds to import.
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

    return EndpointRateLimit(app, rate_limit, redis_url)


def _say_where_state_lives(line: str) -> None:
    """Log the startup line where it is seen. Where the app has configured no logging by its
    startup (uvicorn sets up only its own loggers: no handler reaches this logger, and nobody set
    its level), an INFO line would be dropped: this one is then written to stderr by a handler
    of its own, used once and kept by nobody.

    Nothing else is written that way. The audit line of each tool call is an INFO record that
    the app's logging shows or drops, as Python's logging guide asks of a library: a handler the
    library kept on its logger wrote one line to stderr per tool call of every app that had
    configured no logging, about a sixth of a tool call's server CPU under httptools + uvloop in
    `make bench`."""
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


def _check_options(path: str, max_stream_seconds: float | None) -> None:
    if max_stream_seconds is not None:
        check_seconds("max_stream_seconds", max_stream_seconds, " or None")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must start with '/', got {path!r}")


def _session_options(sessions: bool | Sessions) -> Sessions | None:
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
