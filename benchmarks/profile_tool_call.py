"""Where a tool call's server CPU goes, in process: no server, no sockets, no other process.

    .venv/bin/python benchmarks/profile_tool_call.py               # CPU per call, REST vs tool
    .venv/bin/python benchmarks/profile_tool_call.py --profile     # plus cProfile's top functions
    valgrind --tool=callgrind .venv/bin/python benchmarks/profile_tool_call.py --calls 200 --only tool-get

The app of `make bench` (`bench_app.py`) is driven as ASGI directly: each request is one call
of the app with a pre-built scope, a `receive` giving the body and a `send` dropping the answer.
What this measures is what the app and the library do per request, without uvicorn's parsing;
comparing REST with the tool call of the same route in one run shows the library's share.
Arms are interleaved round by round; the figure is the median over rounds of CPU time
(`time.process_time`) per call. For stable before/after comparisons on a busy machine, count
instructions instead: callgrind with `--only ARM` and a fixed `--calls` (its total divided by
the calls, minus a run with `--calls 0` for start-up and warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_app import build_app

from fastapi_mcp_routes.transport.plain_routes import PlainRoute

PROTOCOL_VERSION: Final = "2025-11-25"
STATELESS_VERSION: Final = "2026-07-28"
GET_ARGUMENTS: Final = {"item_id": 42, "q": "hello"}
POST_ARGUMENTS: Final = {"name": "widget", "price": 9.5, "tags": ["bench", "post"]}

Message = dict[str, Any]
Send = Callable[[Message], Coroutine[Any, Any, None]]
App = Callable[
    [Message, Callable[[], Coroutine[Any, Any, Message]], Callable[[Message], Coroutine[Any, Any, None]]], Any
]


@dataclass(frozen=True, slots=True)
class Arm:
    """One request, sent again and again: its scope, its body, and the status it must get."""

    name: str
    method: str
    path: str
    query: bytes = b""
    body: bytes = b""
    headers: tuple[tuple[bytes, bytes], ...] = ()
    status: int = 200


class Answer:
    """A `send` that keeps only the status and the body's size."""

    __slots__ = ("size", "status")

    def __init__(self) -> None:
        self.status = 0
        self.size = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.size += len(message.get("body", b""))


async def call(app: App, arm: Arm, answer: Answer | None = None) -> Answer:
    headers = [(b"host", b"127.0.0.1:8000"), *arm.headers]
    if arm.body:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(arm.body)).encode())]
    scope: Message = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": arm.method,
        "scheme": "http",
        "path": arm.path,
        "raw_path": arm.path.encode(),
        "root_path": "",
        "query_string": arm.query,
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)  # what a server does while the client keeps the connection
        sent = True
        return {"type": "http.request", "body": arm.body, "more_body": False}

    answer = answer or Answer()
    await app(scope, receive, answer)
    # A server's loop turns between requests: what an answer scheduled (and cancelled) runs or
    # is dropped there, rather than piling up in the loop's queue over thousands of calls.
    await asyncio.sleep(0)
    if answer.status != arm.status:
        raise SystemExit(f"{arm.name}: HTTP {answer.status}, expected {arm.status}")
    return answer


def mcp_arm(
    name: str,
    session_id: str | None,
    version: str,
    message: Mapping[str, Any],
    extra: Sequence[tuple[bytes, bytes]] = (),
) -> Arm:
    headers = [(b"accept", b"application/json, text/event-stream"), (b"mcp-protocol-version", version.encode())]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode()))
    return Arm(name, "POST", "/mcp", body=json.dumps(message).encode(), headers=(*headers, *extra))


def tool_call(name: str, session_id: str | None, tool: str, arguments: Mapping[str, Any]) -> Arm:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if session_id is None:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        extra = [(b"mcp-method", b"tools/call"), (b"mcp-name", tool.encode())]
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        return mcp_arm(name, None, STATELESS_VERSION, message, extra)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return mcp_arm(name, session_id, PROTOCOL_VERSION, message)


async def open_session(app: App) -> str:
    """Start the app's lifespan-free state and open a session, as a client would."""
    hello = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "profile", "version": "1"}}
    session_ids: list[str] = []

    class Keep(Answer):
        async def __call__(self, message: Message) -> None:
            await super().__call__(message)
            if message["type"] == "http.response.start":
                session_ids.extend(v.decode() for k, v in message["headers"] if k == b"mcp-session-id")

    arm = mcp_arm(
        "initialize", None, PROTOCOL_VERSION, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
    )
    await call(app, arm, Keep())
    (session_id,) = session_ids
    done = mcp_arm(
        "initialized", session_id, PROTOCOL_VERSION, {"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    await call(app, Arm(done.name, done.method, done.path, body=done.body, headers=done.headers, status=202))
    return session_id


def arms(session_id: str) -> list[Arm]:
    return [
        Arm("rest-get", "GET", "/items/42", query=b"q=hello"),
        tool_call("tool-get", session_id, "get_item", GET_ARGUMENTS),
        tool_call("stateless-get", None, "get_item", GET_ARGUMENTS),
        Arm("rest-post", "POST", "/items", body=json.dumps(POST_ARGUMENTS).encode(), status=201),
        tool_call("tool-post", session_id, "create_item", POST_ARGUMENTS),
        tool_call("stateless-post", None, "create_item", POST_ARGUMENTS),
        # The least the `/mcp` request's trip through the app costs: its middleware and its
        # routing to a route served as the endpoint is, answering a fixed body. REST plus this
        # is the floor of a tool call that runs the route as its own request behind the `/mcp`
        # request.
        Arm("pass", "POST", "/pass", body=b"{}"),
    ]


class FixedAnswer:
    """The least an endpoint can do: answer a fixed JSON body, as a raw ASGI app."""

    async def __call__(self, scope: Message, receive: Any, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})


def add_pass_route(app: Any) -> None:
    """The `pass` arm's route, served as the endpoint is (a plain route, raw ASGI) and where it
    is: the endpoint moves to the front at startup, and this stays right behind it. (At the end
    of the route table, behind a function endpoint, as before, it cost 25-30 µs, not 12: the
    floor was overstated and the library's own share understated by that much.)"""
    app.router.routes.insert(0, PlainRoute("/pass", FixedAnswer(), methods=["POST"]))


async def run(options: argparse.Namespace) -> None:
    app: Any = build_app(10)
    add_pass_route(app)
    library = logging.getLogger("fastapi_mcp_routes")
    if options.no_audit_log:
        library.setLevel(logging.WARNING)
    elif options.audit_log:  # what an app that shows the audit lines pays: one line a call
        library.setLevel(logging.INFO)
        library.addHandler(logging.StreamHandler(open(os.devnull, "w")))  # noqa: SIM115 (the run's length)
    async with app.router.lifespan_context(app):
        session_id = await open_session(app)
        chosen = [arm for arm in arms(session_id) if not options.only or arm.name in options.only]
        for arm in chosen:  # warm up, and check each answers as it should
            for _ in range(options.warmup):
                await call(app, arm)
        if options.profile:
            for arm in chosen:
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(options.calls):
                    await call(app, arm)
                profile.disable()
                print(f"\n## {arm.name}: {options.calls} calls")
                pstats.Stats(profile).sort_stats(options.sort).print_stats(options.top)
            return
        per_call: dict[str, list[float]] = {arm.name: [] for arm in chosen}
        for _ in range(options.rounds):
            for arm in chosen:
                started = time.process_time()
                for _ in range(options.calls):
                    await call(app, arm)
                per_call[arm.name].append((time.process_time() - started) / max(options.calls, 1) * 1e6)
        if options.calls == 0:
            return
        medians = {name: statistics.median(values) for name, values in per_call.items()}
        print(f"{options.rounds} rounds x {options.calls} calls per arm, in process (CPU µs per call, median):")
        for name, value in medians.items():
            base = "rest-get" if "get" in name else "rest-post"
            share = f"  {value / medians[base]:.2f}x {base}" if base in medians and name not in (base, "pass") else ""
            print(f"  {name:16} {value:7.1f} µs{share}")
        if "pass" in medians:
            # What no tool call can go below: the route's own request (REST) plus the `/mcp`
            # request's pass through the app. The rest of a tool call is the library's.
            for name, value in medians.items():
                base = "rest-get" if "get" in name else "rest-post"
                if name.startswith(("tool", "stateless")) and base in medians:
                    floor = medians[base] + medians["pass"]
                    print(
                        f"  {name}: floor {floor:.1f} µs ({floor / medians[base]:.2f}x {base}), "
                        f"the library's own {value - floor:.1f} µs"
                    )


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=2000, help="calls per arm and round (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=200, help="calls per arm before measuring (default 200)")
    parser.add_argument("--only", action="append", help="only this arm (repeatable): rest-get, tool-get, ...")
    parser.add_argument("--no-audit-log", action="store_true", help="the library's INFO lines off (the audit's share)")
    parser.add_argument("--audit-log", action="store_true", help="the library's INFO lines on, written to /dev/null")
    parser.add_argument("--profile", action="store_true", help="cProfile each arm instead of timing it")
    parser.add_argument("--sort", default="tottime", help="cProfile sort key (default tottime)")
    parser.add_argument("--top", type=int, default=30, help="cProfile rows shown (default 30)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(run(parse_options()))
