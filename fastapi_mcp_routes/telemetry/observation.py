"""One MCP request as telemetry sees it: its span (none when only propagating), the context
the route's request carries on, and what the request learns as it runs (the route, the
outcome), for the span and the metric point. The request's observation is the current one
(`OBSERVED`) while it is served, so the call's steps below reach it without being handed it."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any, Final

from fastapi_mcp_routes.telemetry import names as n
from fastapi_mcp_routes.telemetry.api import propagate
from fastapi_mcp_routes.telemetry.carriers import FIELD_BYTES
from fastapi_mcp_routes.telemetry.instruments import Instruments

Headers = tuple[tuple[bytes, bytes], ...]

# The observation of the request being served; None where nobody listens (the usual case).
OBSERVED: Final[ContextVar[Observation | None]] = ContextVar("fastapi_mcp_routes.observation", default=None)


class Observation:
    """A request being observed; built only when someone listens."""

    __slots__ = ("_carried", "context", "instruments", "metric", "outcome", "span", "started", "target", "tracer")

    def __init__(
        self, span: Any, context: Any, instruments: Instruments | None, metric: dict[str, Any], tracer: Any = None
    ) -> None:
        self.span = span  # None: propagation only
        self.tracer = tracer  # what the request's own spans (a task's run, a sample) are made with
        # The tool or prompt the request names (attribute, value): on the metric point once
        # the registry found a route for it, so a made-up name never becomes a time series.
        self.target: tuple[str, str] | None = None
        self.context = context  # the OpenTelemetry context the route's request carries on
        self.instruments = instruments
        self.metric = metric  # the metric point's attributes, low-cardinality only
        self.outcome: str | None = None
        self.started = time.perf_counter()
        self._carried: Headers | None = None

    def carry(self, headers: Headers) -> Headers:
        """The route's request headers: the caller's, with the trace context this request
        carries on in place of any the caller sent."""
        carried = self._carried
        if carried is None:
            carrier: dict[str, str] = {}
            propagate.inject(carrier, context=self.context)
            carried = self._carried = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in carrier.items())
        return (*(header for header in headers if header[0] not in FIELD_BYTES), *carried)

    def set(self, key: str, value: Any) -> None:
        if self.span is not None:
            self.span.set_attribute(key, value)

    def route(self, method: str, path: str) -> None:
        """The route a request runs: the name it was found by may name the metric point."""
        target, span = self.target, self.span
        if target is not None:
            self.metric[target[0]] = target[1]
        if span is not None:
            span.set_attributes({n.ROUTE_METHOD: method, n.ROUTE_PATH: path})
            if target is not None:
                span.update_name(f"{self.metric[n.MCP_METHOD_NAME]} {target[1]}")

    def agreed(self, version: object) -> None:
        """The version `initialize` settled on, not the one the session-less request assumed."""
        if isinstance(version, str):
            self.metric[n.MCP_PROTOCOL_VERSION] = version
            self.set(n.MCP_PROTOCOL_VERSION, version)

    def count(self, instrument: str, attributes: dict[str, Any]) -> None:
        instruments = self.instruments
        if instruments is not None:
            getattr(instruments, instrument).add(1, attributes)
