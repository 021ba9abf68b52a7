"""What the call's steps tell the request's observation, when there is one: each is a context
variable read and nothing more where nobody listens, so the call path stays as cheap.

- `carried`: the route's request headers, with the trace context carried on (tools/invoke.py);
- `note_route`: the route a request runs (server/channel.py `start_call`);
- `note_outcome`: the audit's outcome of a tool call (server/pipeline.py);
- `trace_ids`: the trace and span ids for the audit line (server/audit.py);
- `task_run`, `task_ended`: a task's background run, its own span linked to the call;
- `stream_sample`: a streaming route's sample, a span with its frame count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

from fastapi_mcp_routes.telemetry import names as n
from fastapi_mcp_routes.telemetry.api import otel_context, trace
from fastapi_mcp_routes.telemetry.observation import OBSERVED, Headers, Observation

# The audit's outcomes that are confirmations (server/audit.py Outcome), as the counter names them.
_CONFIRMATIONS: Final = {"confirmation_required": "asked", "not_confirmed": "declined"}


def carried(headers: Headers) -> Headers:
    observation = OBSERVED.get()
    return headers if observation is None else observation.carry(headers)


def note_route(method: str, path: str) -> None:
    observation = OBSERVED.get()
    if observation is not None:
        observation.route(method, path)


def note_outcome(outcome: str, status: int | None) -> None:
    observation = OBSERVED.get()
    if observation is None:
        return
    observation.outcome = outcome
    observation.set(n.OUTCOME, outcome)
    if status is not None:
        observation.set(n.HTTP_STATUS, status)
    confirmation = _CONFIRMATIONS.get(outcome)
    if confirmation is not None:
        tool = observation.metric.get(n.GEN_AI_TOOL_NAME)
        observation.count(
            "confirmations", {n.CONFIRMATION: confirmation, **({n.GEN_AI_TOOL_NAME: tool} if tool else {})}
        )


def trace_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids in W3C hex, when a span is being recorded."""
    observation = OBSERVED.get()
    if observation is None or observation.span is None:
        return None
    context = observation.span.get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


@contextmanager
def task_run(tool: str) -> Iterator[Observation | None]:
    """A task's run, in the background: a span of its own, in a trace of its own, linked to
    the call that started it (it outlives that call's span)."""
    observation = OBSERVED.get()
    if observation is None:
        yield None
        return
    span = None
    context = observation.context
    tracer = observation.tracer
    if observation.span is not None and tracer is not None:
        started_by = observation.span.get_span_context()
        span = tracer.start_span(
            f"{n.TASK_RUN_SPAN} {tool}",
            context=otel_context.Context(),
            kind=trace.SpanKind.INTERNAL,
            attributes={n.GEN_AI_TOOL_NAME: tool, n.GEN_AI_OPERATION_NAME: n.EXECUTE_TOOL},
            links=[trace.Link(started_by)],
        )
        context = trace.set_span_in_context(span, otel_context.Context())
    run = Observation(span, context, observation.instruments, {**observation.metric}, tracer)
    token = OBSERVED.set(run)
    attached = otel_context.attach(context) if context is not None else None
    try:
        yield run
    finally:
        if attached is not None:
            otel_context.detach(attached)
        OBSERVED.reset(token)
        if span is not None:
            span.end()


def task_started(task_id: str) -> None:
    observation = OBSERVED.get()
    if observation is not None:
        observation.set(n.TASK_ID, task_id)


def task_ended(status: str) -> None:
    """A task reached its final status (completed, failed, cancelled)."""
    observation = OBSERVED.get()
    if observation is None:
        return
    observation.set(n.TASK_STATUS, status)
    tool = observation.metric.get(n.GEN_AI_TOOL_NAME)
    observation.count("tasks", {n.TASK_STATUS: status, **({n.GEN_AI_TOOL_NAME: tool} if tool else {})})


@contextmanager
def stream_sample() -> Iterator[Any]:
    """A streaming route's sample, as one span the route's request is carried under; the
    caller sets its frame count on what this yields (`None` where nobody records spans)."""
    observation = OBSERVED.get()
    if observation is None or observation.span is None or observation.tracer is None:
        yield None
        return
    span = observation.tracer.start_span(
        n.STREAM_SAMPLE_SPAN, context=observation.context, kind=trace.SpanKind.INTERNAL
    )
    context = trace.set_span_in_context(span, observation.context)
    sample = Observation(span, context, None, observation.metric, observation.tracer)
    token = OBSERVED.set(sample)
    attached = otel_context.attach(context)  # the route's in-process spans start under the sample
    try:
        yield span
    finally:
        otel_context.detach(attached)
        OBSERVED.reset(token)
        span.end()
