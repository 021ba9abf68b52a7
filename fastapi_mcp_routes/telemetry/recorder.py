"""Whether anyone listens, and a span and a metric point per MCP request when someone does.

`Recorder.listener()` is asked once per request: `None` with telemetry off, without the `otel`
extra, or while the app has set neither a tracer nor a meter provider, and then the request
is served as if telemetry did not exist. Once a provider is set the answer is kept: the API's
tracer and meter follow a provider set later on their own.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

from fastapi_mcp_routes.options import Telemetry
from fastapi_mcp_routes.telemetry import names as n
from fastapi_mcp_routes.telemetry.api import (
    INSTALLED,
    load_from_environment,
    metrics,
    nothing_set,
    otel_context,
    propagate,
    trace,
)
from fastapi_mcp_routes.telemetry.carriers import from_headers, from_meta
from fastapi_mcp_routes.telemetry.content import recorded
from fastapi_mcp_routes.telemetry.instruments import Instruments
from fastapi_mcp_routes.telemetry.observation import OBSERVED, Observation
from fastapi_mcp_routes.telemetry.outcomes import bound, failure, tool_error
from fastapi_mcp_routes.wire.errors import McpError, StoreUnavailable
from fastapi_mcp_routes.wire.jsonrpc import Request

T = TypeVar("T")
C = TypeVar("C", bound="Observed")

_DISTRIBUTION: Final = "fastapi-mcp-routes"
# What a request's target is read from, per method, and the attribute it is recorded as.
_TARGETS: Final = {"tools/call": ("name", n.GEN_AI_TOOL_NAME), "prompts/get": ("name", n.GEN_AI_PROMPT_NAME)}
_URI_METHODS: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})


class _Caller(Protocol):
    @property
    def headers(self) -> tuple[tuple[bytes, bytes], ...]: ...
    @property
    def client(self) -> tuple[str, int] | None: ...
    @property
    def http_version(self) -> str: ...


class Observed(Protocol):
    """What telemetry reads of a request's client (server/channel.py `ClientChannel`)."""

    @property
    def protocol_version(self) -> str: ...
    @property
    def caller(self) -> _Caller: ...
    @property
    def principal(self) -> Any: ...
    @property
    def session_id(self) -> str | None: ...


class Recorder:
    """The endpoint's telemetry, as `Telemetry(...)` set it."""

    def __init__(self, options: Telemetry | None = None) -> None:
        options = options if options is not None else Telemetry()
        self.options = options
        self._off = options.mode == "off" or not INSTALLED
        # Whether spans and metrics wait for an SDK the app sets globally: asked per request.
        self._awaits_sdk = (
            options.mode != "propagate" and options.tracer_provider is None and options.meter_provider is None
        )
        self._listener: Listener | None = None
        if not self._off:
            load_from_environment()

    def listener(self) -> Listener | None:
        """Who observes requests now; `None`: nobody, serve the request untouched."""
        listener = self._listener
        if listener is not None or self._off or (self._awaits_sdk and nothing_set()):
            return listener  # `None` until an SDK is set: nothing is made
        options = self.options
        if options.mode == "propagate":
            listener = Listener(None, None, record_content=False)
        else:
            version = _version()
            tracer = trace.get_tracer(n.INSTRUMENTATION_NAME, version, tracer_provider=options.tracer_provider)
            meter = metrics.get_meter(n.INSTRUMENTATION_NAME, version, meter_provider=options.meter_provider)
            listener = Listener(tracer, Instruments(meter), record_content=options.record_content)
        self._listener = listener
        return listener

    def session_ended(self, seconds: float, protocol_version: str) -> None:
        """A session ended after `seconds` (mcp.server.session.duration)."""
        listener = self.listener()
        if listener is not None and listener.instruments is not None:
            attributes = {
                n.MCP_PROTOCOL_VERSION: protocol_version,
                n.NETWORK_TRANSPORT: "tcp",
                n.NETWORK_PROTOCOL_NAME: "http",
            }
            listener.instruments.session_duration.record(seconds, attributes)

    def refused(self, error: McpError) -> None:
        """The endpoint refused an HTTP request with `error`: counted when it names a bound,
        or when the shared store was out of reach."""
        listener = self.listener()
        if listener is None or listener.instruments is None:
            return
        if isinstance(error, StoreUnavailable):
            listener.instruments.store_errors.add(1, {})
            return
        refused = bound(error.message)
        if refused is not None:
            listener.instruments.refusals.add(1, {n.BOUND: refused})


class Listener:
    """Observes each request it serves: a span (kind SERVER, named `{method} {target}`) with
    the conventions' attributes, and a point of `mcp.server.operation.duration`."""

    def __init__(self, tracer: Any, instruments: Instruments | None, *, record_content: bool) -> None:
        self.tracer = tracer  # None: propagation only
        self.instruments = instruments
        self._record_content = record_content

    async def serve(self, answer: Callable[[Request, C], Awaitable[T]], request: Request, channel: C) -> T:
        """Answer `request` under its own span, the current one while the answer runs."""
        parent, links = _parent(request.params, channel)
        metric = _metric_attributes(request.method, channel)
        target = _target(request)
        span = None
        context = parent
        if self.tracer is not None:
            name, attributes = _span_attributes(request, channel, metric, target)
            span = self.tracer.start_span(
                name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes, links=links
            )
            context = trace.set_span_in_context(span, parent)
            if self._record_content and request.method == "tools/call":
                span.set_attribute(n.GEN_AI_TOOL_CALL_ARGUMENTS, recorded(request.params.get("arguments")))
        observation = Observation(span, context, self.instruments, metric, self.tracer)
        observation.target = target
        token = OBSERVED.set(observation)
        attached = otel_context.attach(context) if context is not None else None
        error: tuple[str, str | None] | None = None
        try:
            result = await answer(request, channel)
            if isinstance(result, Mapping) and result.get("isError") is True:
                error = tool_error()
            elif request.method == "initialize" and isinstance(result, Mapping):
                observation.agreed(result.get("protocolVersion"))
            elif self._record_content and span is not None and request.method == "tools/call":
                span.set_attribute(n.GEN_AI_TOOL_CALL_RESULT, recorded(result))
            return result
        except BaseException as exc:
            error = failure(exc, observation)
            raise
        finally:
            if attached is not None:
                otel_context.detach(attached)
            OBSERVED.reset(token)
            self._end(observation, error)

    def _end(self, observation: Observation, error: tuple[str, str | None] | None) -> None:
        metric = observation.metric
        if error is not None:
            metric[n.ERROR_TYPE] = error[0]
            if error[0].lstrip("-").isdigit():
                metric[n.RPC_RESPONSE_STATUS_CODE] = error[0]
        span = observation.span
        if span is not None:
            if error is not None:
                span.set_attributes({k: metric[k] for k in (n.ERROR_TYPE, n.RPC_RESPONSE_STATUS_CODE) if k in metric})
                span.set_status(trace.Status(trace.StatusCode.ERROR, error[1]))
            span.end()
        if self.instruments is not None:
            self.instruments.operation_duration.record(time.perf_counter() - observation.started, metric)


def _version() -> str | None:
    """The instrumentation scope's version: the installed package's, where it is installed."""
    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def _parent(params: Mapping[str, Any], channel: Observed) -> tuple[Any, list[Any] | None]:
    """The span's parent: the trace context in `params._meta` (the MCP conventions: the
    request's own context, the HTTP request's linked), else the HTTP request's, as the app's
    instrumentation made it current or as its headers carry it; `None`: a new trace."""
    carrier = from_meta(params.get("_meta"))
    if carrier is not None:
        extracted = propagate.extract(carrier, context=otel_context.Context())
        if trace.get_current_span(extracted).get_span_context().is_valid:
            ambient = trace.get_current_span().get_span_context()
            return extracted, [trace.Link(ambient)] if ambient.is_valid else None
        # A malformed context is ignored, as if none had been sent.
    if trace.get_current_span().get_span_context().is_valid:
        return None, None
    headers = from_headers(channel.caller.headers)
    if headers is not None:
        return propagate.extract(headers, context=otel_context.Context()), None
    return None, None


def _metric_attributes(method: str, channel: Observed) -> dict[str, Any]:
    """The attributes both the span and the metric point carry: none from the wire but the
    method, which the dispatcher has already found among those it serves."""
    return {
        n.MCP_METHOD_NAME: method,
        n.MCP_PROTOCOL_VERSION: channel.protocol_version,
        n.NETWORK_TRANSPORT: "tcp",
        n.NETWORK_PROTOCOL_NAME: "http",
        n.NETWORK_PROTOCOL_VERSION: channel.caller.http_version,
        **({n.GEN_AI_OPERATION_NAME: n.EXECUTE_TOOL} if method == "tools/call" else {}),
    }


def _target(request: Request) -> tuple[str, str] | None:
    """The tool or prompt a request names, as the attribute it is recorded under, cut to the
    longest name MCP allows."""
    target = _TARGETS.get(request.method)
    if target is None:
        return None
    value = request.params.get(target[0])
    return (target[1], value[: n.NAME_CHARS]) if isinstance(value, str) else None


def _span_attributes(
    request: Request, channel: Observed, metric: dict[str, Any], target: tuple[str, str] | None
) -> tuple[str, dict[str, Any]]:
    """The span's name and attributes: the metric's, and the request's own (its id, its
    session, its caller, its target, cut to their bounds)."""
    method = request.method
    params = request.params
    attributes = dict(metric)
    # Named `{method} {target}` only once the registry found the target (`Observation.route`):
    # a made-up name would make a span name of its own per request downstream.
    name = method
    if target is not None:
        attributes[target[0]] = target[1]
    elif method in _URI_METHODS:
        uri = params.get("uri")
        if isinstance(uri, str):
            attributes[n.MCP_RESOURCE_URI] = uri[: n.URI_CHARS]
    if request.id is not None:
        attributes[n.JSONRPC_REQUEST_ID] = str(request.id)[: n.NAME_CHARS]
    session_id = channel.session_id
    if session_id is not None:
        attributes[n.MCP_SESSION_ID] = session_id
    client = channel.caller.client
    if client is not None:
        attributes[n.CLIENT_ADDRESS] = client[0]
        attributes[n.CLIENT_PORT] = client[1]
    subject = getattr(channel.principal, "subject", None) if channel.principal is not None else None
    if isinstance(subject, str):
        attributes[n.ENDUSER_ID] = subject[: n.NAME_CHARS]
    return name, attributes
