"""When nobody listens: without the `otel` extra, and with the extra but no SDK set, the
endpoint serves as before and makes nothing per call (each in a fresh interpreter, whose
OpenTelemetry globals no other test has touched); and the example app's opt-in telemetry,
scraped by Prometheus."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import anyio
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.waits import WAIT_S

ROOT: Final = Path(__file__).resolve().parent.parent

# A tool whose route reports the headers it got, called in process through the app.
_APP: Final = """
import sys
import anyio, httpx
from fastapi import FastAPI, Request
from fastapi_mcp_routes import mcp_routes, mcp_tool
from fastapi_mcp_routes.telemetry import observation
from tests.support.jsonrpc import JSON_ONLY, open_session, tool_call
from tests.support.servers import connected

made = []
original = observation.Observation.__init__
def counted(self, *args, **kwargs):
    made.append(1)
    original(self, *args, **kwargs)
observation.Observation.__init__ = counted

app = FastAPI()
app.include_router(mcp_routes(app))
seen = []

@mcp_tool()
@app.get("/echo")
def echo(request: Request) -> dict:
    seen.append(dict(request.headers))
    return {"ok": True}

async def call() -> dict:
    async with connected(app) as http:
        first = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            headers=JSON_ONLY)
        headers = {**JSON_ONLY, "mcp-session-id": first.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-11-25", "x-request-id": "req-9",
                   "traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
        answer = await http.post("/mcp", json=tool_call("echo", {}), headers=headers)
        return answer.json()["result"]
"""


# FastAPI itself imports the OpenTelemetry API (its own telemetry, fastapi>=0.165): imported
# first, then the API is hidden from everything imported after it, as if it were absent.
_BLOCKED: Final = """
import sys
import fastapi, fastapi.telemetry._runtime
for name in [name for name in sys.modules if name == "opentelemetry" or name.startswith("opentelemetry.")]:
    sys.modules[name] = None
"""


def run_python(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.processes
def test_without_the_otel_extra_the_endpoint_serves_and_carries_the_request_id() -> None:
    out = run_python(
        _BLOCKED
        + _APP
        + """
from fastapi_mcp_routes.telemetry.api import INSTALLED
result = anyio.run(call)
assert not INSTALLED
assert result["structuredContent"] == {"ok": True}, result
assert seen[-1]["x-request-id"] == "req-9"
assert not made
print("served")
"""
    )
    assert out.strip() == "served"


@pytest.mark.processes
def test_with_no_sdk_set_nothing_is_made_per_call_until_the_app_sets_one() -> None:
    out = run_python(
        _APP
        + """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

result = anyio.run(call)
assert result["structuredContent"] == {"ok": True}, result
assert not made, "an observation was made with no SDK set"
# The caller's context goes on as it came: nothing of ours was added.
assert seen[-1]["traceparent"] == "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
assert seen[-1]["x-request-id"] == "req-9"

spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)  # set late, as an app's startup may
anyio.run(call)
names = [span.name for span in spans.get_finished_spans()]
assert "tools/call echo" in names, names
print("listening")
"""
    )
    assert out.strip() == "listening"


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A fresh copy of the example app with `NOTES_TELEMETRY=memory`."""
    monkeypatch.setenv("NOTES_TELEMETRY", "memory")
    name = "notes_with_telemetry"
    spec = importlib.util.spec_from_file_location(name, ROOT / "example_app" / "main.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # pydantic resolves the models' annotations through it
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


@pytest.mark.anyio
async def test_the_example_app_traces_a_tool_call_into_its_route_and_serves_the_metrics(notes: ModuleType) -> None:
    telemetry: Any = notes.telemetry
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    with serve(notes.app) as url:
        with anyio.fail_after(WAIT_S):
            async with mcp_client(url) as client:
                note = await client.call_tool(
                    "get_note", {"note_id": 1}, meta={"traceparent": f"00-{trace_id}-{span_id}-01"}
                )
        scrape = httpx.get(f"{url}/metrics", timeout=WAIT_S)
    assert not note.is_error
    spans = {span.name: span for span in telemetry.spans.get_finished_spans()}
    call, route = spans["tools/call get_note"], spans["GET /notes/{note_id}"]
    assert format(call.context.trace_id, "032x") == trace_id
    assert format(call.parent.span_id, "016x") == span_id
    assert route.parent.span_id == call.context.span_id

    assert scrape.status_code == 200
    families = {family.name: family for family in text_string_to_metric_families(scrape.text)}
    operation = families["mcp_server_operation_duration_seconds"]
    assert operation.type == "histogram"
    counts = [
        sample
        for sample in operation.samples
        if sample.name.endswith("_count") and sample.labels.get("gen_ai_tool_name") == "get_note"
    ]
    assert [sample.labels["mcp_method_name"] for sample in counts] == ["tools/call"]
    assert counts[0].value == 1
    buckets = {sample.labels["le"] for sample in operation.samples if sample.name.endswith("_bucket")}
    assert {"0.01", "300.0", "+Inf"} <= buckets
    assert "mcp_server_session_duration_seconds" in families  # the session the client ended
