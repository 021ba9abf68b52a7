"""The benchmark app (bench_app.py) as `FMR_BENCH_TELEMETRY` sets up its telemetry.

- `absent`: the OpenTelemetry API hidden before the library is imported, as without the `otel`
  extra (FastAPI, which imports the API for its own telemetry, is imported first);
- `no_sdk`: the API installed and no SDK set, as most deployments run;
- `sdk`: the SDK recording the endpoint's spans and metrics into memory (providers handed to
  `Telemetry`, never set globally, so FastAPI's own telemetry stays off);
- `http_span`: the library's telemetry off and `opentelemetry-instrumentation-fastapi` on the
  app with the same SDK: the cost of its own HTTP span, what the `sdk` cost is held against.
"""

from __future__ import annotations

import os
import sys
from typing import Final

import fastapi
import fastapi.telemetry._runtime  # noqa: F401
from fastapi import FastAPI

TELEMETRY_ENV: Final = "FMR_BENCH_TELEMETRY"
SETUPS: Final = ("absent", "no_sdk", "sdk", "http_span")
# The in-memory exporter keeps every span: emptied this often so memory stays flat.
_KEPT_SPANS: Final = 10_000


def create_app() -> FastAPI:
    setup = os.environ.get(TELEMETRY_ENV, "no_sdk")
    if setup not in SETUPS:
        raise ValueError(f"{TELEMETRY_ENV} must be one of {', '.join(SETUPS)}, got {setup!r}")
    if setup == "absent":
        for name in [name for name in sys.modules if name == "opentelemetry" or name.startswith("opentelemetry.")]:
            sys.modules[name] = None  # type: ignore[assignment]
    from bench_app import build_app

    from fastapi_mcp_routes import Telemetry

    if setup in ("absent", "no_sdk"):
        return build_app(0)
    tracer_provider, meter_provider = _providers()
    if setup == "sdk":
        return build_app(0, telemetry=Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider))
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    app = build_app(0, telemetry=Telemetry(mode="off"))
    FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider, meter_provider=meter_provider)
    return app


def _providers() -> tuple[object, object]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    class Kept(InMemorySpanExporter):
        def export(self, spans: object) -> object:
            if len(self.get_finished_spans()) > _KEPT_SPANS:
                self.clear()
            return super().export(spans)  # type: ignore[arg-type]

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(Kept()))
    return tracer_provider, MeterProvider(metric_readers=[InMemoryMetricReader()])
