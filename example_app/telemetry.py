"""Telemetry for the notes app, when `NOTES_TELEMETRY` asks for it: spans of the MCP calls and
of the routes they run (FastAPI's own instrumentation), and metrics served at `/metrics` for
Prometheus to scrape.

`NOTES_TELEMETRY=console` prints each span as it ends; `memory` keeps them for the tests. The
app makes its providers and hands them to both instrumentations; the library never sets one.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.responses import Response

from fastapi_mcp_routes import Telemetry

KINDS = ("console", "memory")


@dataclass(frozen=True)
class NotesTelemetry:
    """The app's providers, and where the tests read what they recorded."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    registry: CollectorRegistry  # what /metrics serves
    spans: InMemorySpanExporter | None = None  # `memory` only
    points: InMemoryMetricReader | None = None  # `memory` only

    def options(self) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)

    def instrument(self, app: FastAPI) -> None:
        """The routes' own spans and HTTP metrics, and `/metrics`."""
        FastAPIInstrumentor.instrument_app(
            app, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, excluded_urls="/metrics"
        )
        registry = self.registry

        @app.get("/metrics", include_in_schema=False)
        def scrape() -> Response:
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def notes_telemetry(kind: str | None) -> NotesTelemetry | None:
    """The telemetry `NOTES_TELEMETRY` names, or `None` when it is unset."""
    if not kind:
        return None
    if kind not in KINDS:
        raise ValueError(f"NOTES_TELEMETRY must be one of {', '.join(KINDS)}, got {kind!r}")
    resource = Resource.create({"service.name": "notes"})
    registry = CollectorRegistry()
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry)]
    tracer_provider = TracerProvider(resource=resource)
    spans = points = None
    if kind == "memory":
        spans = InMemorySpanExporter()
        points = InMemoryMetricReader()
        readers.append(points)
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    else:
        tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    return NotesTelemetry(tracer_provider, meter_provider, registry, spans, points)
