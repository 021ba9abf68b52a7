"""OpenTelemetry through a real server: the official MCP client sends `traceparent` in `_meta`,
the endpoint's spans and metric points are recorded by the real SDK, and FastAPI's own
instrumentation shows the route's span under the MCP span, in both eras."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from typing import Any, Final

import anyio
import httpx
import pytest
from mcp import MCPError
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from tests.support.confirmation import sdk_pending_of
from tests.support.jsonrpc import JSON_ONLY, call_tool, open_session
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages
from tests.support.stateless import STATELESS_VERSION, stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S
from tests.telemetry_app import Recorded, traced_app
from tests.test_tasks_sdk import TasksExtension

pytestmark = pytest.mark.anyio

ERAS: Final = ("legacy", STATELESS_VERSION)


class Traced:
    """The caller's span: the trace the server's spans must join."""

    def __init__(self) -> None:
        self.trace_id = secrets.randbits(128) | 1
        self.span_id = secrets.randbits(64) | 1

    @property
    def traceparent(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-01"

    def meta(self) -> dict[str, Any]:
        return {"traceparent": self.traceparent, "baggage": "tenant=blue"}


@pytest.fixture(scope="module")
def recorded() -> Recorded:
    return Recorded()


@pytest.fixture(scope="module")
def base_url(recorded: Recorded) -> Iterator[str]:
    with serve(traced_app(recorded)) as url:
        yield url


@pytest.fixture(autouse=True)
def nothing_recorded_yet(recorded: Recorded) -> None:
    recorded.spans.clear()
    recorded.route_headers.clear()


def only(spans: list[ReadableSpan]) -> ReadableSpan:
    assert len(spans) == 1, [span.name for span in spans]
    return spans[0]


def children_of(recorded: Recorded, parent: ReadableSpan) -> list[ReadableSpan]:
    return [
        span
        for span in recorded.finished()
        if span.parent is not None and span.parent.span_id == parent.context.span_id
    ]


def operation_points(recorded: Recorded, **attributes: Any) -> list[Any]:
    return [
        point
        for point in recorded.points_of("mcp.server.operation.duration")
        if all(point.attributes.get(key) == value for key, value in attributes.items())
    ]


def counted(recorded: Recorded, metric: str, **attributes: Any) -> int:
    return sum(
        point.value
        for point in recorded.points_of(metric)
        if all(point.attributes.get(key) == value for key, value in attributes.items())
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_call_traces_from_the_clients_meta_through_the_mcp_span_to_the_route_and_its_own_span(
    base_url: str, recorded: Recorded, mode: str
) -> None:
    caller = Traced()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            result = await client.call_tool("get_item", {"item_id": 7}, meta=caller.meta())
            version = client.protocol_version
    assert result.structured_content == {"id": 7}

    mcp = only(recorded.named("tools/call get_item"))
    assert mcp.kind is SpanKind.SERVER
    assert mcp.context.trace_id == caller.trace_id
    assert mcp.parent is not None
    assert mcp.parent.span_id == caller.span_id
    attributes = dict(mcp.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "get_item"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == version
    assert attributes["jsonrpc.request.id"]
    assert attributes["client.address"] == "127.0.0.1"
    assert attributes["network.transport"] == "tcp"
    assert attributes["fastapi_mcp_routes.route.method"] == "GET"
    assert attributes["fastapi_mcp_routes.route.path"] == "/items/{item_id}"
    assert attributes["fastapi_mcp_routes.outcome"] == "ok"
    assert attributes["fastapi_mcp_routes.route.status"] == 200
    assert "error.type" not in attributes
    assert ("mcp.session.id" in attributes) is (mode == "legacy")  # only session-era sessions have one
    assert "gen_ai.tool.call.arguments" not in attributes  # content only when the app opts in
    assert mcp.links, "the HTTP request's own span is linked"

    (route,) = [span for span in children_of(recorded, mcp) if span.name == "GET /items/{item_id}"]
    assert route.context.trace_id == caller.trace_id
    (own,) = [span for span in children_of(recorded, route) if span.name == "load item"]
    assert own.context.trace_id == caller.trace_id
    # The caller's baggage reaches the route with the trace.
    assert recorded.route_headers[-1]["baggage"] == "tenant=blue"

    (point,) = operation_points(recorded, **{"gen_ai.tool.name": "get_item", "mcp.protocol.version": version})
    assert point.count >= 1
    assert "error.type" not in point.attributes
    assert list(point.explicit_bounds) == [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_route_refusal_and_a_crash_are_tool_errors_with_their_outcomes(
    base_url: str, recorded: Recorded, mode: str
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            missing = await client.call_tool("get_item", {"item_id": 0}, meta=Traced().meta())
            crashed = await client.call_tool("crash", {}, meta=Traced().meta())
    assert missing.is_error
    assert crashed.is_error
    refused = dict(only(recorded.named("tools/call get_item")).attributes or {})
    assert refused["error.type"] == "tool_error"
    assert refused["fastapi_mcp_routes.outcome"] == "error"
    assert refused["fastapi_mcp_routes.route.status"] == 404
    crash = only(recorded.named("tools/call crash"))
    assert crash.status.status_code is StatusCode.ERROR
    assert dict(crash.attributes or {})["error.type"] == "tool_error"
    assert dict(crash.attributes or {})["fastapi_mcp_routes.outcome"] == "crashed"
    assert operation_points(recorded, **{"gen_ai.tool.name": "crash", "error.type": "tool_error"})


async def test_a_protocol_error_is_its_json_rpc_code_on_span_and_metric(base_url: str, recorded: Recorded) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            with pytest.raises(MCPError):
                await client.call_tool("no_such_tool", {})
    # A name the registry does not know never names the span, nor becomes a metric attribute.
    span = only(
        [span for span in recorded.named("tools/call") if span.attributes.get("gen_ai.tool.name") == "no_such_tool"]
    )
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "-32602"
    assert attributes["rpc.response.status_code"] == "-32602"
    assert span.status.status_code is StatusCode.ERROR
    assert "Unknown tool" in (span.status.description or "")
    points = operation_points(recorded, **{"mcp.method.name": "tools/call", "error.type": "-32602"})
    assert points
    assert all("gen_ai.tool.name" not in point.attributes for point in points)


async def test_a_confirmation_asked_then_declined_is_counted_and_on_the_span(base_url: str, recorded: Recorded) -> None:
    asked_before = counted(recorded, "fastapi_mcp_routes.confirmations", **{"fastapi_mcp_routes.confirmation": "asked"})
    declined_before = counted(
        recorded, "fastapi_mcp_routes.confirmations", **{"fastapi_mcp_routes.confirmation": "declined"}
    )
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            pending = await client.call_tool("create_item", {"name": "a"})
            sdk_pending_of(pending)
            declined = await client.call_tool("create_item", {"name": "a", "confirmationToken": "forged"})
    assert declined.is_error
    outcomes = [
        dict(span.attributes or {})["fastapi_mcp_routes.outcome"] for span in recorded.named("tools/call create_item")
    ]
    assert outcomes == ["confirmation_required", "not_confirmed"]
    assert (
        counted(recorded, "fastapi_mcp_routes.confirmations", **{"fastapi_mcp_routes.confirmation": "asked"})
        == asked_before + 1
    )
    assert (
        counted(recorded, "fastapi_mcp_routes.confirmations", **{"fastapi_mcp_routes.confirmation": "declined"})
        == declined_before + 1
    )


async def test_a_task_runs_in_a_span_of_its_own_linked_to_the_call_and_is_counted_by_status(
    base_url: str, recorded: Recorded
) -> None:
    before = counted(recorded, "fastapi_mcp_routes.tasks", **{"fastapi_mcp_routes.task.status": "completed"})
    caller = Traced()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode="auto", extensions=[TasksExtension()]) as client:
            result = await client.call_tool("export", {}, meta=caller.meta())
    assert result.structured_content == {"exported": True}
    call = only(recorded.named("tools/call export"))
    assert call.context.trace_id == caller.trace_id
    assert dict(call.attributes or {})["fastapi_mcp_routes.outcome"] == "task"
    task_id = dict(call.attributes or {})["fastapi_mcp_routes.task.id"]
    run = only(recorded.named("tasks/run export"))
    assert run.kind is SpanKind.INTERNAL
    assert [link.context.span_id for link in run.links] == [call.context.span_id]
    assert dict(run.attributes or {})["fastapi_mcp_routes.task.status"] == "completed"
    (route,) = [span for span in children_of(recorded, run) if span.name == "GET /export"]
    assert route.context.trace_id == run.context.trace_id
    assert task_id
    assert recorded.named("tasks/get")
    assert (
        counted(recorded, "fastapi_mcp_routes.tasks", **{"fastapi_mcp_routes.task.status": "completed"}) == before + 1
    )


@pytest.mark.parametrize("mode", ERAS)
async def test_a_resource_read_and_a_prompt_are_spans_with_their_targets(
    base_url: str, recorded: Recorded, mode: str
) -> None:
    caller = Traced()
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, mode=mode) as client:
            await client.read_resource("items://3", meta=caller.meta())
            await client.get_prompt("summarize", {"item_id": "3"}, meta=caller.meta())
    read = only(recorded.named("resources/read"))
    assert dict(read.attributes or {})["mcp.resource.uri"] == "items://3"
    assert read.context.trace_id == caller.trace_id
    assert [span.name for span in children_of(recorded, read)] == ["GET /items/{item_id}"]
    prompt = only(recorded.named("prompts/get summarize"))
    assert dict(prompt.attributes or {})["gen_ai.prompt.name"] == "summarize"
    assert "gen_ai.operation.name" not in dict(prompt.attributes or {})
    assert operation_points(recorded, **{"gen_ai.prompt.name": "summarize"})


async def test_a_stream_sample_is_one_span_with_its_frame_count_over_the_routes_span(
    base_url: str, recorded: Recorded
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("ticks", {"count": 3}, meta=Traced().meta())
    assert not result.is_error
    call = only(recorded.named("tools/call ticks"))
    (sample,) = [span for span in children_of(recorded, call) if span.name == "stream sample"]
    assert dict(sample.attributes or {})["fastapi_mcp_routes.stream.frames"] == 3
    assert [span.name for span in children_of(recorded, sample)] == ["GET /ticks"]


@pytest.mark.parametrize(
    "meta",
    [
        {"traceparent": "00-not-a-trace-01"},
        {"traceparent": "00-" + "0" * 32 + "-" + "0" * 16 + "-01"},  # all-zero ids are invalid
        {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" + "-x" * 5000},  # longer than any version
        {"traceparent": 42},
    ],
)
async def test_a_malformed_meta_trace_context_is_ignored_for_a_fresh_trace(
    base_url: str, recorded: Recorded, meta: dict[str, Any]
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("get_item", {"item_id": 1}, meta=meta)
    assert not result.is_error
    span = only(recorded.named("tools/call get_item"))
    assert span.context.trace_id not in (0, int("a" * 32, 16))
    assert "error.type" not in dict(span.attributes or {})


async def test_huge_tracestate_and_baggage_are_cut_by_the_w3c_rules_never_echoed_whole(
    base_url: str, recorded: Recorded
) -> None:
    caller = Traced()
    long_entry = "big=" + "x" * 200
    tracestate = ",".join([long_entry, *(f"v{i}=value{i:04d}" for i in range(31))])  # 32 entries, > 512 chars
    baggage = ",".join(f"k{i}=" + "v" * 200 for i in range(100))  # past 64 members and 8192 bytes
    meta = {"traceparent": caller.traceparent, "tracestate": tracestate, "baggage": baggage}
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            result = await client.call_tool("get_item", {"item_id": 1}, meta=meta)
    assert not result.is_error
    span = only(recorded.named("tools/call get_item"))
    assert span.context.trace_id == caller.trace_id
    assert all(len(str(value)) <= 512 for value in (span.attributes or {}).values())
    carried = recorded.route_headers[-1]
    assert "big=" not in carried.get("tracestate", "")  # entries over 128 characters go first
    assert len(carried.get("tracestate", "")) <= 512
    assert len(carried.get("baggage", "")) <= 8192


def test_the_http_traceparent_is_the_parent_without_meta_and_the_request_id_reaches_the_route(
    base_url: str, recorded: Recorded
) -> None:
    caller = Traced()
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http, accept=JSON_ONLY["accept"], headers={"x-request-id": "req-1"})
        traced = {**headers, "traceparent": caller.traceparent}
        call_tool(http, "get_item", {"item_id": 1}, headers=traced)
        # Not part of who the caller is: the same session goes on under another request id.
        call_tool(http, "get_item", {"item_id": 2}, headers={**traced, "x-request-id": "req-2"}, request_id=2)
    spans = recorded.named("tools/call get_item")
    assert [span.context.trace_id for span in spans] == [caller.trace_id] * 2
    # Under the HTTP request's span, which the app's instrumentation made the caller's child.
    http_spans = {span.context.span_id: span for span in recorded.named("POST /mcp")}
    parents = [http_spans[span.parent.span_id] for span in spans if span.parent is not None]
    assert [span.parent.span_id for span in parents if span.parent is not None] == [caller.span_id] * 2
    assert [seen["x-request-id"] for seen in recorded.route_headers] == ["req-1", "req-2"]
    # The route's request carries the MCP span's context, not the caller's header.
    assert all(seen["traceparent"] != caller.traceparent for seen in recorded.route_headers)


def test_without_the_apps_instrumentation_the_http_traceparent_is_the_parent_itself() -> None:
    recorded = Recorded()
    caller = Traced()
    with serve(traced_app(recorded, instrumented=False)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = open_session(http, accept=JSON_ONLY["accept"], headers={"traceparent": caller.traceparent})
        call_tool(http, "get_item", {"item_id": 1}, headers=headers)
    span = only(recorded.named("tools/call get_item"))
    assert span.context.trace_id == caller.trace_id
    assert span.parent is not None
    assert span.parent.span_id == caller.span_id
    assert not span.links  # no HTTP span of the app's to link
    assert recorded.route_headers[-1]["traceparent"] == f"00-{caller.trace_id:032x}-{span.context.span_id:016x}-01"


def test_subscriptions_listen_is_a_span_of_its_acceptance_under_the_callers_trace(
    base_url: str, recorded: Recorded
) -> None:
    caller = Traced()
    meta = {**stateless_meta(), "traceparent": caller.traceparent}
    listen = stateless_request("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, meta)
    with (
        httpx.Client(base_url=base_url, timeout=WAIT_S) as http,
        http.stream("POST", "/mcp", json=listen, headers=stateless_headers("subscriptions/listen")) as stream,
    ):
        acknowledged = next(iter_sse_messages(stream.iter_lines()))
    assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
    span = only(recorded.named("subscriptions/listen"))
    assert span.context.trace_id == caller.trace_id
    assert dict(span.attributes or {})["mcp.protocol.version"] == STATELESS_VERSION


async def test_the_audit_line_carries_the_trace_and_span_ids(
    base_url: str, recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    caller = Traced()
    with caplog.at_level(logging.INFO, logger="fastapi_mcp_routes"), anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            await client.call_tool("get_item", {"item_id": 1}, meta=caller.meta())
    span = only(recorded.named("tools/call get_item"))
    (line,) = [record.getMessage() for record in caplog.records if record.getMessage().startswith("tool call get_item")]
    assert f"trace_id={caller.trace_id:032x}" in line
    assert f"span_id={span.context.span_id:016x}" in line


async def test_ending_a_session_records_its_duration(base_url: str, recorded: Recorded) -> None:
    before = sum(point.count for point in recorded.points_of("mcp.server.session.duration"))
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            await client.list_tools()
            version = client.protocol_version
    (point,) = recorded.points_of("mcp.server.session.duration")
    assert point.count == before + 1
    assert point.attributes["mcp.protocol.version"] == version


async def test_a_refusal_at_a_bound_is_counted_by_its_option(base_url: str, recorded: Recorded) -> None:
    before = counted(recorded, "fastapi_mcp_routes.refusals", **{"fastapi_mcp_routes.bound": "Limits.max_uri_chars"})
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url) as client:
            with pytest.raises(MCPError):
                await client.read_resource("items://" + "9" * 10_000)
            await client.call_tool("get_item", {"item_id": 1})  # another call is still served
    assert (
        counted(recorded, "fastapi_mcp_routes.refusals", **{"fastapi_mcp_routes.bound": "Limits.max_uri_chars"})
        == before + 1
    )
    read = only(recorded.named("resources/read"))
    assert len(dict(read.attributes or {})["mcp.resource.uri"]) <= 512


@pytest.mark.parametrize("mode", ["off", "propagate"])
async def test_off_records_nothing_and_propagate_only_carries_the_callers_context(mode: str) -> None:
    recorded = Recorded()
    caller = Traced()
    with serve(traced_app(recorded, mode=mode)) as url, anyio.fail_after(WAIT_S):
        async with mcp_client(url) as client:
            await client.call_tool("get_item", {"item_id": 1}, meta=caller.meta())
    names = {span.name for span in recorded.finished()}
    assert not any(name.startswith(("tools/", "initialize")) for name in names)
    assert not recorded.points_of("mcp.server.operation.duration")
    carried = recorded.route_headers[-1].get("traceparent")
    if mode == "propagate":
        assert carried == caller.traceparent
        (route,) = recorded.named("GET /items/{item_id}")
        assert route.parent is not None
        assert route.parent.span_id == caller.span_id
    else:
        assert carried is None


async def test_content_is_recorded_only_when_the_app_opts_in() -> None:
    recorded = Recorded()
    with serve(traced_app(recorded, record_content=True)) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, mcp_client(url) as client:
            await client.call_tool("get_item", {"item_id": 5})
            assert http is not None
    attributes = dict(only(recorded.named("tools/call get_item")).attributes or {})
    assert attributes["gen_ai.tool.call.arguments"] == '{"item_id":5}'
    assert '"structuredContent":{"id":5}' in attributes["gen_ai.tool.call.result"]
