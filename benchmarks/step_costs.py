"""What each step of a tool call costs alone, beside what the whole call costs in process.

    .venv/bin/python benchmarks/step_costs.py              # the session era's GET tool call
    .venv/bin/python benchmarks/step_costs.py --arm tool-post

The app of `make bench` is driven in process as `profile_tool_call.py` drives it. One call of
the arm runs with each step's function wrapped to keep the arguments it was called with; then
every step is timed alone on those arguments, again and again (the best of several repeats, so
each step runs hot: its code and data in the caches, the most favourable case). The steps are
the work a tool call cannot skip without giving up something it promises (each row says what);
their sum is what a tool call would cost beyond the floor if nothing joined them: no objects,
calls or awaits between them. The whole call is measured in the same run, with REST and the
floor (the `/mcp` request's trip through the app to a fixed answer), rounds interleaved.

Steps are looked up where the library calls them (the module or class that uses each), so a
renamed step stops this script with the name it could not find, rather than timing nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import profile_tool_call as arms
from bench_app import build_app

import fastapi_mcp_routes.server.channel as channel_module
import fastapi_mcp_routes.server.envelope as envelope
import fastapi_mcp_routes.server.pipeline as pipeline_module
import fastapi_mcp_routes.server.sessions.manager as sessions_module
import fastapi_mcp_routes.server.urls.policy as url_policy_module
import fastapi_mcp_routes.tools.invoke as invoke_module
import fastapi_mcp_routes.transport.answer as answer_module
import fastapi_mcp_routes.transport.endpoint as endpoint_module
import fastapi_mcp_routes.transport.http as http
import fastapi_mcp_routes.wire.jsonrpc as jsonrpc
from fastapi_mcp_routes.options import DEFAULT_MAX_RESPONSE_BYTES
from fastapi_mcp_routes.server.call import CALL_SCOPE_KEY, ToolCall
from fastapi_mcp_routes.store.policy import holder_of
from fastapi_mcp_routes.transport.response_stream import KeepAlive, ResponseStream
from fastapi_mcp_routes.wire.fields import field_table

REPEATS: Final = 7


@dataclass(frozen=True)
class Step:
    """A function of the library that a tool call runs, and the guarantee it serves."""

    label: str
    owner: Any  # the module or class the call site looks the function up in
    name: str
    serves: str
    is_async: bool = False


STEPS: Final = (
    Step("read the headers", endpoint_module, "field_table", "every check below reads them"),
    Step("Origin and Host", endpoint_module.StreamableHTTPEndpoint, "_check_origin", "DNS rebinding (spec)"),
    Step("media types", http, "check_media_types", "415/406 as the spec names them"),
    Step("the body within its cap", http, "read_body", "Limits.max_body_bytes", is_async=True),
    Step("decode and classify", http, "parse", "JSON-RPC errors, finite numbers only"),
    Step("which revision", http, "is_modern", "both eras on one path"),
    Step("the caller's identity", http, "caller_identity", "sessions bound to credentials"),
    Step("whom it counts against", endpoint_module, "holder_of", "per-caller bounds"),
    Step("the session", sessions_module.SessionManager, "find", "sealed id, expiry, caller binding", True),
    Step("protocol version", endpoint_module, "_protocol_version", "400 for an unsupported version"),
    Step("what the route inherits", http, "caller_from_scope", "the caller's credentials reach it"),
    Step("the request's channel", channel_module.Channels, "session", "progress, logs, questions per era"),
    Step("tool and arguments", pipeline_module, "parse_call", "-32602 for an unknown tool or bad params"),
    Step("earlier rounds' answers", channel_module.SessionChannel, "call_input", "multi-round calls"),
    Step("argument nesting", pipeline_module, "check_argument_depth", "Limits.max_argument_depth"),
    Step("URL arguments", url_policy_module.UrlPolicy, "check", "SSRF: URLs only where allowed"),
    Step("the route's request", invoke_module, "build_request", "the route sees a REST request"),
    Step("the route's JSON as a result", pipeline_module, "tool_result", "text plus structuredContent"),
    Step("the result for its era", channel_module.SessionChannel, "shape", "the era's result shape"),
    Step("the JSON-RPC answer", answer_module, "encode_result", "finite numbers only"),
)


@dataclass
class Captured:
    """The function a step ran and the arguments of its first call."""

    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def wrap(step: Step, captured: dict[str, Captured]) -> Callable[[], None]:
    """Wrap the step where the library looks it up; returns what puts it back."""
    function = getattr(step.owner, step.name, None)
    if function is None:
        raise SystemExit(f"step {step.label!r}: {step.owner.__name__}.{step.name} is gone; update STEPS")
    own = step.name in vars(step.owner)  # else inherited: put back by taking the wrapper away

    if step.is_async:

        async def kept_async(*args: Any, **kwargs: Any) -> Any:
            captured.setdefault(step.label, Captured(function, args, kwargs))
            return await function(*args, **kwargs)

        setattr(step.owner, step.name, kept_async)
    else:

        def kept(*args: Any, **kwargs: Any) -> Any:
            captured.setdefault(step.label, Captured(function, args, kwargs))
            return function(*args, **kwargs)

        setattr(step.owner, step.name, kept)
    if own:
        return lambda: setattr(step.owner, step.name, function)
    return lambda: delattr(step.owner, step.name)


async def best_of(run: Callable[[], Awaitable[None]], number: int) -> float:
    """The best of `REPEATS` timings of `number` runs, in µs per run (process CPU time)."""
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        for _ in range(number):
            await run()
        best = min(best, (time.process_time() - started) / number * 1e6)
    return best


def timed_call(captured: Captured, is_async: bool) -> Callable[[], Awaitable[None]]:
    function, args, kwargs = captured.function, captured.args, captured.kwargs
    if is_async:

        async def run_async() -> None:
            await function(*args, **kwargs)

        return run_async

    async def run() -> None:
        function(*args, **kwargs)

    return run


async def nothing() -> None:
    """What an awaited no-op costs the timing loop itself, subtracted from every row."""


def read_body_again(captured: Captured, body: bytes) -> Captured:
    """`read_body` reads messages once: each timed run gets a request with its body again."""
    request, headers, limit = captured.args
    message = {"type": "http.request", "body": body, "more_body": False}

    async def receive() -> dict[str, Any]:
        return message

    def fresh() -> Any:
        return type(request)(request.scope, receive)

    async def run(_: Any, headers: Any, limit: int) -> bytes:
        return await captured.function(fresh(), headers, limit)

    return Captured(run, (None, headers, limit))


async def more_steps(calls: int, captured: dict[str, Captured]) -> list[tuple[str, float, str]]:
    """The steps that are objects rather than functions: the running call with its cancel
    scope, and the answer written as JSON."""
    kept = captured["the request's channel"]
    rows: list[tuple[str, float, str]] = []
    channel = kept.function(*kept.args, **kept.kwargs)
    parsed = captured["tool and arguments"]
    tool_call = pipeline_module.parse_call(*parsed.args, **parsed.kwargs)

    async def running_call() -> None:
        call = ToolCall(
            request_id=1,
            progress_token=None,
            channel=channel,
            tool=tool_call.tool.name,
            arguments=tool_call.arguments,
            answers={},
        )
        with call.cancel_scope:
            pass

    rows.append(("the running call and its cancel scope", await best_of(running_call, calls), "cancellation"))
    answer = b'{"jsonrpc":"2.0","id":1,"result":{}}'

    async def drop(message: Any) -> None:
        pass

    async def json_answer() -> None:
        async with ResponseStream(drop, True, True, KeepAlive()) as stream:
            await stream.finish(answer, answered_request=True)

    rows.append(("the answer, JSON or SSE", await best_of(json_answer, calls), "SSE once a message goes first"))
    return rows


class Flat:
    """The steps of a session-era tool call answered as JSON, joined in one function: no
    dispatcher, pipeline, answer object or audit between them, only what the steps need. Not a
    server (no errors, no other method, no SSE): what the joins of the real endpoint cost is
    the difference between the two."""

    def __init__(self, app: Any, captured: dict[str, Captured]) -> None:
        def owner(label: str) -> Any:
            return captured[label].args[0]

        self.app = app
        self.endpoint = owner("Origin and Host")
        self.sessions = owner("the session")
        self.channels = owner("the request's channel")
        self.urls = owner("URL arguments")
        self.registry = captured["tool and arguments"].args[1]
        self.max_depth = captured["argument nesting"].args[1]
        self.max_body = captured["the body within its cap"].args[2]
        self.max_batch = captured["decode and classify"].args[1]
        self.credentials = captured["the caller's identity"].args[1]
        self.forwarded = captured["what the route inherits"].args[1]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = http.FreshRequest(scope, receive, send)
        headers = field_table(request.scope["headers"])
        self.endpoint._check_origin(request, headers)
        accepts = http.check_media_types(headers)
        parsed = http.parse(await http.read_body(request, headers, self.max_body), self.max_batch)
        envelope.is_modern(headers.get("mcp-protocol-version"), parsed.first)
        identity = http.caller_identity(request, self.credentials)
        address = http.client_address(request)
        session = await self.sessions.find(headers["mcp-session-id"], identity, holder_of(identity, address, None))
        version = endpoint_module._protocol_version(headers, session.protocol_version, False)
        caller = invoke_module.caller_from_scope(scope, self.forwarded)
        channel = self.channels.session(
            caller=caller, principal=None, identity=identity, address=address, protocol_version=version, session=session
        )
        message = parsed.messages[0]
        call = pipeline_module.parse_call(message.params, self.registry)
        given = channel.call_input(message.params, call.tool, call.arguments)
        running = ToolCall.of(message.id, message.params, channel, call.tool.name, call.arguments, given.answers)
        channel.running()[message.id] = running.cancel_scope
        try:
            pipeline_module.check_argument_depth(call.arguments, self.max_depth)
            self.urls.check(call.tool, call.arguments)
            with running.cancel_scope:
                route_scope, body = invoke_module.build_request(call.tool, call.arguments, caller)
                route_scope[CALL_SCOPE_KEY] = running
                response = await invoke_module.call_app(
                    self.app, route_scope, body, DEFAULT_MAX_RESPONSE_BYTES, running.answered, running.halt
                )
        finally:
            channel.call_ended(message.id)
        result = channel.shape("tools/call", pipeline_module.tool_result(call.tool, response, call.arguments), False)
        answer = jsonrpc.encode_result(message.id, result)
        async with ResponseStream(send, accepts.sse, accepts.json, self.endpoint.keep_alive) as stream:
            await stream.finish(answer, answered_request=True)


async def whole_calls(
    app: Any, chosen: list[arms.Arm], rounds: int, calls: int, flat: tuple[Any, Flat, arms.Arm] | None = None
) -> dict[str, float]:
    """CPU µs per call, medians over rounds; with `flat` (the endpoint's route, the flat join
    and the arm), that arm runs once more per round with the flat join serving it."""
    per_call: dict[str, list[float]] = {arm.name: [] for arm in chosen}
    if flat is not None:
        per_call["flat"] = []
    for _ in range(rounds):
        for arm in chosen:
            per_call[arm.name].append(await per_call_cpu(app, arm, calls))
        if flat is not None:
            route, join, arm = flat
            served, route.app = route.app, join
            try:
                per_call["flat"].append(await per_call_cpu(app, arm, calls))
            finally:
                route.app = served
    return {name: statistics.median(values) for name, values in per_call.items()}


async def per_call_cpu(app: Any, arm: arms.Arm, calls: int) -> float:
    started = time.process_time()
    for _ in range(calls):
        await arms.call(app, arm)
    return (time.process_time() - started) / calls * 1e6


async def run(options: argparse.Namespace) -> None:
    app: Any = build_app(10)
    arms.add_pass_route(app)
    captured: dict[str, Captured] = {}
    async with app.router.lifespan_context(app):
        session_id = await arms.open_session(app)
        by_name = {arm.name: arm for arm in arms.arms(session_id)}
        arm = by_name[options.arm]
        rest = by_name["rest-get" if "get" in arm.name else "rest-post"]
        for _ in range(options.warmup):
            await arms.call(app, arm)
        undo = [wrap(step, captured) for step in STEPS]
        try:
            await arms.call(app, arm)
        finally:
            for restore in undo:
                restore()
        missing = [step.label for step in STEPS if step.label not in captured]
        if missing:
            raise SystemExit(f"steps the call did not run: {', '.join(missing)}")
        captured["the body within its cap"] = read_body_again(captured["the body within its cap"], arm.body)
        overhead = await best_of(nothing, options.steps)
        rows = [
            (step.label, await best_of(timed_call(captured[step.label], step.is_async), options.steps) - overhead)
            for step in STEPS
        ]
        extra = [(label, cost - overhead, serves) for label, cost, serves in await more_steps(options.steps, captured)]
        endpoint_route = next(route for route in app.routes if getattr(route, "name", None) == "mcp")
        flat = (endpoint_route, Flat(app, captured), arm)
        whole = await whole_calls(app, [rest, by_name["pass"], arm], options.rounds, options.calls, flat)
    serves = {step.label: step.serves for step in STEPS}
    table = [(label, cost, serves[label]) for label, cost in rows] + extra
    print(f"## {arm.name}: each step alone, hot (best of {REPEATS} x {options.steps} runs, CPU µs)")
    print("| step | µs | what it keeps |")
    print("|---|--:|---|")
    for label, cost, kept in table:
        print(f"| {label} | {cost:.2f} | {kept} |")
    total = sum(cost for _, cost, _ in table)
    print(f"| **all steps, nothing between them** | **{total:.1f}** | |")
    floor = whole[rest.name] + whole["pass"]
    own = whole[arm.name] - floor
    print(f"\n## the whole call in process ({options.rounds} rounds x {options.calls} calls, CPU µs, medians)")
    print("| | µs | of REST |")
    print("|---|--:|--:|")
    print(f"| REST ({rest.name}) | {whole[rest.name]:.1f} | 1.00x |")
    print(f"| the `/mcp` request's trip through the app (`pass`) | {whole['pass']:.1f} | |")
    print(f"| floor: REST + pass | {floor:.1f} | {floor / whole[rest.name]:.2f}x |")
    print(f"| {arm.name} | {whole[arm.name]:.1f} | {whole[arm.name] / whole[rest.name]:.2f}x |")
    print(f"| the library's own (the call less the floor) | {own:.1f} | |")
    print(f"| the steps alone, hot | {total:.1f} | |")
    print(f"| {arm.name}, its steps joined flat | {whole['flat']:.1f} | {whole['flat'] / whole[rest.name]:.2f}x |")
    print(f"| the library's own, joined flat | {whole['flat'] - floor:.1f} | |")
    at_best = (floor + total) / whole[rest.name]
    print(f"| a call that paid only its steps, hot | {floor + total:.1f} | {at_best:.2f}x |")


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--arm", default="tool-get", choices=["tool-get", "tool-post"], help="the call (session era)")
    parser.add_argument("--steps", type=int, default=5000, help="runs of each step per repeat (default 5000)")
    parser.add_argument("--calls", type=int, default=2000, help="whole calls per arm and round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of whole calls (default 5)")
    parser.add_argument("--warmup", type=int, default=200, help="calls before anything is measured (default 200)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    anyio.run(run, parse_options())
