"""Review of the telemetry: what a caller controls must not name a span.

The conventions: a span is named `{mcp.method.name} {target}` only with a low-cardinality target,
else `{mcp.method.name}`. A tool or prompt name the registry does not know is the caller's to
choose (one per request), so it must not become part of the span name, as it does not become a
metric series (backends group by span name; the collector's spanmetrics connector makes a
series per span name)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests.support.jsonrpc import JSON_ONLY, open_session, rpc
from tests.support.servers import serve
from tests.telemetry_app import Recorded, traced_app


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture(scope="module")
def base_url(recorded: Recorded) -> Iterator[str]:
    with serve(traced_app(recorded)) as url:
        yield url


@pytest.mark.parametrize(
    ("method", "attribute"), [("tools/call", "gen_ai.tool.name"), ("prompts/get", "gen_ai.prompt.name")]
)
def test_a_made_up_tool_or_prompt_name_never_names_the_span(
    base_url: str, recorded: Recorded, method: str, attribute: str
) -> None:
    made_up = "nosuch-" + secrets.token_hex(8)
    with httpx.Client(base_url=base_url, timeout=10) as http:
        session = open_session(http, accept=JSON_ONLY["accept"])
        recorded.spans.clear()
        answer = http.post("/mcp", json=rpc(method, {"name": made_up, "arguments": {}}, 7), headers=session)
    assert answer.status_code == 200
    assert "error" in answer.json()
    (span,) = [span for span in recorded.finished() if (span.attributes or {}).get("mcp.method.name") == method]
    assert made_up not in span.name
    assert span.name == method


def test_a_trace_context_value_that_is_not_printable_ascii_is_dropped_before_any_propagator_logs_it() -> None:
    from fastapi_mcp_routes.telemetry.carriers import bounded

    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    carried = bounded(
        [("traceparent", parent), ("tracestate", "a=b\r\nx-api-key: stolen"), ("baggage", "user=ünïcode")]
    )
    assert carried == {"traceparent": parent}
    assert bounded([("traceparent", parent + "\n")]) is None
