"""Building an MCP endpoint from `mcp_routes`' options: the registry, the policies, the tool-call
pipeline, the dispatcher and the transport, wired together but not yet served at any path
(mounting.py adds them to a router)."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from fastapi import FastAPI, params

from fastapi_mcp_routes.auth.jwt import WELL_KNOWN_RESOURCE, JWTBearer
from fastapi_mcp_routes.auth.protected_resource import ProtectedResource
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
from fastapi_mcp_routes.server.audit import log_tool_call
from fastapi_mcp_routes.server.budget import AnswerBudget
from fastapi_mcp_routes.server.call_slots import CallSlots
from fastapi_mcp_routes.server.channel import Channels
from fastapi_mcp_routes.server.confirmation.gate import ConfirmationGate, TokenStore
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.dispatch import Dispatcher, Listened, ServerIdentity
from fastapi_mcp_routes.server.envelope import ResultShaper
from fastapi_mcp_routes.server.features import Feature, Listing
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
from fastapi_mcp_routes.server.skills.catalog import SkillCatalog
from fastapi_mcp_routes.server.skills.feature import skills_feature
from fastapi_mcp_routes.server.skills.methods import SkillMethods
from fastapi_mcp_routes.server.tasks.feature import tasks_feature
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.server.tasks.runs import TaskRuns
from fastapi_mcp_routes.server.threads import ThreadShares
from fastapi_mcp_routes.server.tools import tools_feature
from fastapi_mcp_routes.server.urls.policy import UrlPolicy, url_policy
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.telemetry.carriers import FIELDS as TRACE_FIELDS
from fastapi_mcp_routes.telemetry.recorder import Recorder
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.tools.streams import WindowBounds
from fastapi_mcp_routes.transport.endpoint import StreamableHTTPEndpoint, TransportConfig
from fastapi_mcp_routes.transport.origin import OriginPolicy
from fastapi_mcp_routes.transport.step_up import StepUp
from fastapi_mcp_routes.transport.writes import ResourceWrites
from fastapi_mcp_routes.wire import constants as c

if TYPE_CHECKING:
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

logger = logging.getLogger("fastapi_mcp_routes")

# Always the caller's own: never taken from a model's arguments, always forwarded to the route.
_ALWAYS_CREDENTIALS: Final = (c.HEADER_AUTHORIZATION, "proxy-authorization", c.HEADER_COOKIE)
# Forwarded so the route sees the request as the caller sent it, but not credentials.
_CONTEXT_HEADERS: Final = (c.HEADER_HOST, "user-agent", "accept-language")
# Set by the library for the route's request; a model cannot set them either.
_REQUEST_HEADERS: Final = (c.HEADER_CONTENT_TYPE, c.HEADER_CONTENT_LENGTH, c.HEADER_ACCEPT)


@dataclass(frozen=True, slots=True)
class EndpointOptions:
    """`mcp_routes`' options once read: every group made, the old keywords folded in, and each
    value checked (router.py)."""

    path: str
    server: ServerInfo
    auth: Callable[..., Any] | params.Depends | None
    protected_resource: ProtectedResource | None
    dependencies: tuple[params.Depends, ...]
    origins: Origins
    forward_headers: frozenset[str]  # lower-case, besides the credentials always forwarded
    sessions: Sessions | None  # None: served without sessions
    secret: SecretOption
    store: Store | None
    limits: Limits
    tasks: Tasks
    streaming: Streaming
    tool_calls: ToolCalls
    list_visible_only: bool
    explorer: bool  # whether the explorer page is served
    telemetry: Telemetry = field(default_factory=Telemetry)
    skills: Skills | None = None  # None: no skills served


@dataclass(frozen=True, slots=True)
class Endpoint:
    """An endpoint built and not yet mounted: what its routes serve and its lifespan starts."""

    app: FastAPI
    options: EndpointOptions
    identity: ServerIdentity
    registry: ToolRegistry
    urls: UrlPolicy
    lists: Lists
    listings: tuple[Listing, ...]  # the lists the features declare, in order
    deployment: Deployment
    task_runs: TaskRuns
    sessions: SessionManager | None
    transport: StreamableHTTPEndpoint
    listened: Listened  # what the listening streams of this process hear of (its readers run in the lifespan)
    # What the endpoint serves: the session era's versions, then those `server/discover` reports.
    versions: tuple[str, ...]
    skills: SkillMethods | None = None  # the skills served, whose files mounting.py serves as a route too


def build_endpoint(app: FastAPI, options: EndpointOptions, features: Sequence[Feature] = ()) -> Endpoint:
    """Wire the endpoint `options` describe for `app`, serving the library's features and
    `features` besides (server/features.py). It reads the app's routes only when first asked (at
    startup), so routes added after this call are served too."""
    credentials = frozenset(_ALWAYS_CREDENTIALS) | options.forward_headers
    caller_headers = (
        credentials | frozenset(_CONTEXT_HEADERS) | frozenset(_REQUEST_HEADERS) | _traced_headers(options.telemetry)
    )
    calls = options.tool_calls
    urls = url_policy(
        calls.allowed_server_urls, calls.allow_arbitrary_urls, calls.allowed_server_urls_from_env, os.environ
    )
    streaming = options.streaming
    windows = WindowBounds(streaming.default_subscribe_ms, streaming.max_subscribe_ms, streaming.max_subscribe_frames)
    limits = options.limits
    registry = ToolRegistry(
        app, caller_headers, calls.require_confirmation_for_mutations, page_size=limits.page_size, windows=windows
    )
    server = options.server
    identity = ServerIdentity(server.name or app.title, server.version or app.version, server.instructions)
    config = _transport_config(options, credentials)
    deployment = _deployment(options.secret, options.store)
    task_runs = TaskRuns(deployment=deployment, options=options.tasks)
    # One per process: what the tool calls and the transport hold of answers, per caller and in all.
    budget = AnswerBudget(limits.max_answer_bytes, limits.max_answer_bytes_per_caller)
    threads = ThreadShares(per_caller=limits.max_threads_per_caller, total=limits.max_threads)
    pipeline = _pipeline(app, options, registry, urls, deployment, task_runs, windows, budget, threads)
    updates = ResourceUpdates(deployment.store, registry)
    remember(app, updates)
    _watch_writes(app, updates)
    sessions = (
        SessionManager(
            options=options.sessions,
            deployment=deployment,
            limits=limits,
            subscriptions_saved=updates.subscriptions_changed,
        )
        if options.sessions
        else None
    )
    skills = _skills(app, options, budget)
    listened, served = _features(app, limits, registry, pipeline, updates, task_runs, threads, skills, budget)
    served = (*served, *features)
    lists = Lists(
        registry=registry,
        visible_only=options.list_visible_only,
        credential_headers=config.credential_headers,
        changes=[change for feature in served for change in feature.changes],
    )
    dispatcher = Dispatcher(
        identity=identity,
        lists=lists,
        features=served,
        table=registry.table,
        listened=listened,
        recorder=Recorder(options.telemetry),
    )
    transport = StreamableHTTPEndpoint(
        config=config,
        dispatcher=dispatcher,
        channels=Channels(
            sessions=sessions,
            sealer=RequestStateSealer(deployment.secret),
            shaper=ResultShaper(identity.info()),
            call_slots=CallSlots(
                per_session=limits.max_calls_per_session, per_caller=limits.max_calls_per_caller, total=limits.max_calls
            ),
        ),
        deployment=deployment,
        sessions=sessions,
        rate_limit=_endpoint_rate_limit(app, limits.rate_limit, deployment.store),
        budget=budget,
    )
    return Endpoint(
        app,
        options,
        identity,
        registry,
        urls,
        lists,
        dispatcher.listings(),
        deployment,
        task_runs,
        sessions,
        transport,
        listened,
        (*c.SESSION_ERA_VERSIONS, *dispatcher.supported_versions()),
        skills,
    )


def _features(
    app: FastAPI,
    limits: Limits,
    registry: ToolRegistry,
    pipeline: ToolCallPipeline,
    updates: ResourceUpdates,
    task_runs: TaskRuns,
    threads: ThreadShares,
    skills: SkillMethods | None,
    budget: AnswerBudget,
) -> tuple[Listened, tuple[Feature, ...]]:
    """The library's own features, declared (server/features.py), and what a listening stream
    follows of them besides their lists."""
    runner = RouteRunner(app=app, max_response_bytes=limits.max_response_bytes, threads=threads, budget=budget)
    listened = Listened(
        resources=ResourceMethods(
            registry=registry,
            runner=runner,
            max_subscriptions=limits.max_subscriptions,
            max_uri_chars=limits.max_uri_chars,
            readers=(skills,) if skills is not None else (),
        ),
        updates=updates,
        tasks=TaskMethods(task_runs),
    )
    # Skills before resources: where the app has resources, theirs is the capability offered.
    served = () if skills is None else (skills_feature(skills, guarded=skills.guarded),)
    return listened, (
        tools_feature(pipeline),
        *served,
        resources_feature(listened.resources),
        prompts_feature(PromptMethods(registry=registry, runner=runner)),
        tasks_feature(listened.tasks),
    )


def skills_path(path: str) -> str:
    """Where the skills' files are served as a route, beside the endpoint."""
    return path.rstrip("/") + "/skills"


def _skills(app: FastAPI, options: EndpointOptions, budget: AnswerBudget) -> SkillMethods | None:
    """The skills the app names, read now, so a wrong one stops the app at startup."""
    if options.skills is None:
        return None
    guarded = bool(options.skills.dependencies)
    return SkillMethods(
        catalog=SkillCatalog.read(options.skills),
        app=app,
        guard_path=skills_path(options.path) if guarded else None,
        page_size=options.limits.page_size,
        max_uri_chars=options.limits.max_uri_chars,
        budget=budget,
    )


def _transport_config(options: EndpointOptions, credentials: frozenset[str]) -> TransportConfig:
    return TransportConfig(
        origin_policy=OriginPolicy.build(options.origins.allowed_origins, options.origins.allowed_hosts),
        limits=options.limits,
        forward_headers=frozenset(
            h.encode() for h in credentials | frozenset(_CONTEXT_HEADERS) | _traced_headers(options.telemetry)
        ),
        # Not Cookie: clients keep whatever cookies the app sets (CSRF, load-balancer affinity),
        # so the Cookie header changes within a session without the caller changing.
        credential_headers=frozenset(h.encode() for h in credentials - {c.HEADER_COOKIE}),
        max_stream_seconds=options.streaming.max_stream_seconds,
        step_up=_step_up(options),
    )


def _step_up(options: EndpointOptions) -> StepUp:
    """The step-up challenge names the endpoint's RFC 9728 metadata where it serves one: at the
    URL its 401 names (a `JWTBearer`'s `resource_metadata_url`), else at the one its resource
    identifier gives, and only without either at the URL the request came to."""
    resource = options.protected_resource
    if resource is None:
        return StepUp()
    auth = options.auth.dependency if isinstance(options.auth, params.Depends) else options.auth
    named = auth.resource_metadata_url if isinstance(auth, JWTBearer) else None
    return StepUp(WELL_KNOWN_RESOURCE + options.path, named or resource.metadata_url)


def _traced_headers(telemetry: Telemetry) -> frozenset[str]:
    """Headers the route's request inherits to follow the call, never credentials: the
    correlation headers, and the caller's trace context unless telemetry is off (carried on
    as it came where nobody records, replaced by the MCP request's where someone does)."""
    traced = frozenset(telemetry.correlation_headers)
    return traced if telemetry.mode == "off" else traced | frozenset(TRACE_FIELDS)


def _deployment(secret: SecretOption, store: Store | None) -> Deployment:
    sealing = Secret.configure(secret, os.environ)
    if store is None:
        # Processes sharing a secret each number a session's streams, from their own start.
        store = MemoryStore(first_stream=1 + secrets.randbelow(10**8) if sealing.shared else 1)
    return Deployment(sealing, store)


def _pipeline(
    app: FastAPI,
    options: EndpointOptions,
    registry: ToolRegistry,
    urls: UrlPolicy,
    deployment: Deployment,
    task_runs: TaskRuns,
    windows: WindowBounds,
    budget: AnswerBudget,
    threads: ThreadShares,
) -> ToolCallPipeline:
    limits, calls = options.limits, options.tool_calls
    tokens = TokenStore(deployment, capacity=limits.max_tokens, per_caller=limits.max_tokens_per_caller)
    return ToolCallPipeline(
        app=app,
        registry=registry,
        gate=ConfirmationGate(tokens=tokens, ttl_s=calls.confirmation_ttl_s),
        on_tool_call=calls.on_tool_call if calls.on_tool_call is not None else log_tool_call,
        max_response_bytes=limits.max_response_bytes,
        urls=urls,
        max_argument_depth=limits.max_argument_depth,
        tasks=task_runs,
        windows=windows,
        budget=budget,
        threads=threads,
    )


def _watch_writes(app: FastAPI, updates: ResourceUpdates) -> None:
    """Have the app's successful writes announce the resources they change (transport/writes.py)."""
    try:
        app.add_middleware(ResourceWrites, updates=updates)
    except RuntimeError:
        logger.warning(
            "mcp_routes was called after the app started: its REST writes will not notify resource "
            "subscribers (call notify_resource_updated instead)"
        )


def _endpoint_rate_limit(app: FastAPI, rate_limit: str | None, store: Store) -> EndpointRateLimit | None:
    if rate_limit is None:
        return None
    # Imported when asked for: the `limits` library takes tens of milliseconds to import.
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

    # A shared store with a Redis (`RedisStore`) lends its client, so every process counts one budget.
    client = getattr(store, "client", None) if store.shared else None
    return EndpointRateLimit(app, rate_limit, client, getattr(store, "prefix", ""))
