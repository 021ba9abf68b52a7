"""The app the telemetry tests serve: FastAPI's own OpenTelemetry instrumentation on it, and a
route of each kind a trace must show (a tool that makes a span of its own, refuses or crashes,
a mutation to confirm, a task, a stream, a resource, a prompt), recorded by the real SDK into
memory. The providers are the test's own, handed to both instrumentations, never set globally."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import sse_starlette
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fastapi_mcp_routes import Tasks, Telemetry, ToolContext, mcp_prompt, mcp_resource, mcp_routes, mcp_tool

Context = Annotated[ToolContext, Depends()]


@dataclass
class Recorded:
    """A tracer and a meter provider recording into memory, and what the routes saw."""

    spans: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    points: InMemoryMetricReader = field(default_factory=InMemoryMetricReader)
    tracer_provider: TracerProvider = field(default_factory=TracerProvider)
    meter_provider: MeterProvider = field(init=False)
    route_headers: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.points])

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.spans.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name == name]

    def points_of(self, metric: str) -> list[Any]:
        data = self.points.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for each in scope.metrics:
                    if each.name == metric:
                        found.extend(each.data.data_points)
        return found


def traced_app(recorded: Recorded, *, instrumented: bool = True, **telemetry: Any) -> FastAPI:
    """A fresh app of every kind of route, instrumented unless told; `telemetry` goes to
    `Telemetry`."""
    app = FastAPI(title="Traced")
    app.include_router(mcp_routes(app, tasks=Tasks(poll_interval_s=0.05), telemetry=recorded.telemetry(**telemetry)))
    tracer = recorded.tracer_provider.get_tracer("items")

    def note_headers(request: Request) -> None:
        recorded.route_headers.append(dict(request.headers))

    @mcp_tool()
    @mcp_resource("items://{item_id}", description="One item.")
    @app.get("/items/{item_id}", dependencies=[Depends(note_headers)])
    def get_item(item_id: int) -> dict[str, int]:
        """One item; item 0 does not exist."""
        with tracer.start_as_current_span("load item"):
            if item_id == 0:
                raise HTTPException(404, "No item 0.")
            return {"id": item_id}

    @mcp_tool()
    @app.get("/crash")
    def crash() -> dict[str, int]:
        """Always fails."""
        raise RuntimeError("the route failed on purpose")

    @mcp_tool()
    @app.post("/items")
    def create_item(name: str) -> dict[str, str]:
        """Make an item: a mutation, confirmed first."""
        return {"name": name}

    @mcp_tool(task="optional")
    @app.get("/export")
    async def export(ctx: Context) -> dict[str, bool]:
        """A task as soon as it starts."""
        await ctx.start_task()
        return {"exported": True}

    @mcp_tool()
    @app.get("/ticks", response_class=sse_starlette.EventSourceResponse)
    async def ticks(count: int = 3) -> sse_starlette.EventSourceResponse:
        """`count` events, then the end."""

        async def generate() -> AsyncIterator[dict[str, Any]]:
            for n in range(1, count + 1):
                yield {"data": json.dumps({"n": n})}

        return sse_starlette.EventSourceResponse(generate(), ping=0)

    @mcp_prompt(name="summarize", description="Summarize an item.")
    @app.get("/prompts/summarize", response_class=PlainTextResponse)
    def summarize(item_id: int) -> str:
        return f"Summarize item {item_id}."

    if instrumented:
        FastAPIInstrumentor.instrument_app(
            app, tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider
        )
    return app
