"""What the library costs REST requests while nobody is subscribed: the same app served without
and with `mcp_routes`, side by side in one run, and what a `resources/read` costs over REST.

    .venv/bin/python benchmarks/rest_writes.py            # about two minutes on 2 cores
    .venv/bin/python benchmarks/rest_writes.py --quick    # a smoke run, seconds

The issue's target: REST p50 with and without the library within 2%, for a GET of a resource's
path and a PUT to it, with nobody subscribed. With the router, every request passes through the
`ResourceWrites` middleware (transport/writes.py), which lets a GET by and, while no stream
listens, a write too after one check.

Deliberate choices:
- Three uvicorn workers of `writes_app` (one process each, 127.0.0.1) run at once, the same
  code in three variants: without the library, with it, and with it but without its
  `ResourceWrites` middleware, which tells the middleware's share from the router's (the
  endpoint's routes ahead of the app's, which a REST request is matched against first). The
  client runs here, in another process. uvicorn runs h11 on asyncio, named explicitly
  (`_http.uvicorn_process`), even where httptools and uvloop are installed (the `bench` extra).
- As in `tool_call_vs_rest.py`: the two arms of a comparison run back to back and their order
  flips every round, so drift on a shared machine cancels; p50 ratios are medians of per-round
  ratios; p99 and server CPU per request are pooled over all rounds.
- A last table compares `resources/read` of `items://42` (in a session, and in 2026-07-28)
  with `GET /items/42` on the server with the library, as `tool_call_vs_rest.py` compares
  `tools/call`.
- Before the rounds, every arm's answer is checked (the read's text is the REST body; the server
  without the library has no `/mcp`). After them, a session subscribes to `items://42` on the
  server with the library and a PUT must reach its GET stream: the middleware measured was
  there. That runs last, because a listening stream is what turns the middleware's work on.
- Last, where the time goes, counted rather than timed: the Python calls one request makes in
  process (cProfile counts them exactly, whatever else the machine runs), in each variant and
  with the router included after the app's routes.
- Every loop is bounded by a request count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from _http import DEFAULT_STACK, BenchmarkError, Connection, Pools, Process, http_request, uvicorn_process
from starlette.types import Message
from tool_call_vs_rest import (
    PROTOCOL_VERSION,
    STATELESS_VERSION,
    Arm,
    Case,
    Server,
    Table,
    Tally,
    mcp_request,
    open_session,
    render,
    run_rounds,
    versions,
)
from writes_app import VARIANTS as APP_VARIANTS
from writes_app import build_app

APP_FACTORY: Final = "writes_app:create_app"
MCP_ENV: Final = "FMR_BENCH_MCP"  # read by writes_app.create_app: which variant it builds
VARIANTS: Final = {
    "none": "without the library",
    "router": "with the library",
    "router-without-writes": "with the library, without ResourceWrites",
}
URI: Final = "items://42"
TARGET: Final = "/items/42"
PUT_BODY: Final = {"name": "widget", "price": 9.5, "tags": ["bench", "put"]}
UPDATED: Final = b"notifications/resources/updated"
START_TIMEOUT_S: Final = 60.0
HEARD_TIMEOUT_S: Final = 10.0
HEARD_RETRY_S: Final = 0.2  # a PUT again, if the stream was still opening when the last one landed
HERE: Final = Path(__file__).resolve().parent
PROFILED_REQUESTS: Final = 1000


@dataclass(frozen=True, slots=True)
class Servers:
    without: Server
    with_mcp: Server
    without_writes: Server  # the library without its ResourceWrites middleware


@contextmanager
def running_servers() -> Iterator[Servers]:
    """The app in every variant, started in parallel; all stopped after."""
    with ExitStack() as stack:
        servers = Servers(*(Server(stack.enter_context(_server_process(variant)), 0) for variant in VARIANTS))
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in (servers.without, servers.with_mcp, servers.without_writes):
            server.process.wait_listening(deadline)
        yield servers


def _server_process(variant: str) -> AbstractContextManager[Process]:
    return uvicorn_process(sys.executable, APP_FACTORY, HERE, {MCP_ENV: variant}, VARIANTS[variant])


def stateless_read(port: int, uri: str) -> bytes:
    """A 2026-07-28 `resources/read`: no session, its version and routing in headers and `_meta`."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": STATELESS_VERSION,
        "mcp-method": "resources/read",
        "mcp-name": uri,
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}}
    return http_request(port, "POST", "/mcp", headers, message)


def build_tables(servers: Servers, session_id: str, requests: int) -> list[Table]:
    with_mcp = servers.with_mcp

    def rest(server: Server, method: str) -> Arm:
        body = PUT_BODY if method == "PUT" else None
        label = f"{method} REST, {server.process.label}"
        return Arm(label, server, http_request(server.port, method, TARGET, body=body))

    def cases(baseline: Server) -> tuple[Case, ...]:
        return (
            Case("GET /items/{id}, the resource's path", 1, requests, (rest(baseline, "GET"), rest(with_mcp, "GET"))),
            Case("PUT /items/{id}, nobody subscribed", 1, requests, (rest(baseline, "PUT"), rest(with_mcp, "PUT"))),
        )

    read = Arm("resources/read", with_mcp, mcp_request(with_mcp.port, session_id, "resources/read", {"uri": URI}))
    read_stateless = Arm("resources/read (2026-07-28)", with_mcp, stateless_read(with_mcp.port, URI))
    reads = (
        Case(f"{URI}, sequential", 1, requests, (rest(with_mcp, "GET"), read)),
        Case(f"{URI}, 2026-07-28 (no session), sequential", 1, requests, (rest(with_mcp, "GET"), read_stateless)),
    )
    return [
        Table("REST without and with the library (sequential)", ("without", "with"), cases(servers.without)),
        Table(
            "REST with the library, without and with ResourceWrites (sequential)",
            ("without ResourceWrites", "with"),
            cases(servers.without_writes),
        ),
        Table("resources/read vs REST GET of the same route", ("REST", "resources/read"), reads),
    ]


async def verify(pools: Pools, servers: Servers, session_id: str) -> None:
    """Every arm answers what it should, and the server without the library has no `/mcp`."""
    without, with_mcp = servers.without, servers.with_mcp
    (plain,) = await pools.get(without, 1)
    (served,) = await pools.get(with_mcp, 1)
    expected = await plain.send(http_request(without.port, "GET", TARGET))
    for server in (without, with_mcp, servers.without_writes):
        (connection,) = await pools.get(server, 1)
        got = await connection.send(http_request(server.port, "GET", TARGET))
        put = await connection.send(http_request(server.port, "PUT", TARGET, body=PUT_BODY))
        if got.body != expected.body or put.status != 200:
            raise BenchmarkError(
                f"{server.process.label}: GET {TARGET} answered {got.body[:200]!r}, PUT HTTP {put.status}"
            )
    reads = [
        mcp_request(with_mcp.port, session_id, "resources/read", {"uri": URI}),
        stateless_read(with_mcp.port, URI),
    ]
    for request in reads:
        contents = (await served.send(request)).json().get("result", {}).get("contents", [{}])
        if contents[0].get("text") != expected.body.decode():
            raise BenchmarkError(f"resources/read {URI} answered {contents!r}, not the REST body {expected.body!r}")
    missing = await plain.send(mcp_request(without.port, None, "initialize", {}))
    if missing.status != 404:
        raise BenchmarkError(f"the server without the library answered /mcp with HTTP {missing.status}, not 404")


async def a_put_is_heard(with_mcp: Server) -> None:
    """A session subscribed to `URI` hears a PUT to its path on its GET stream."""
    port = with_mcp.port
    control, stream, writer = [await Connection.open(port) for _ in range(3)]
    try:
        session_id = await open_session(control, port)
        listen = {"accept": "text/event-stream", "mcp-protocol-version": PROTOCOL_VERSION, "mcp-session-id": session_id}
        stream.write(http_request(port, "GET", "/mcp", listen))
        status, _ = await asyncio.wait_for(stream.receive_head(), HEARD_TIMEOUT_S)
        subscribed = await control.send(mcp_request(port, session_id, "resources/subscribe", {"uri": URI}))
        if status != 200 or "error" in subscribed.json():
            raise BenchmarkError(f"GET stream HTTP {status}; resources/subscribe answered {subscribed.body[:200]!r}")
        deadline = time.monotonic() + HEARD_TIMEOUT_S
        while time.monotonic() < deadline:
            await writer.send(http_request(port, "PUT", TARGET, body=PUT_BODY))
            try:
                await asyncio.wait_for(stream.read_until(UPDATED), HEARD_RETRY_S)
                return
            except TimeoutError:
                continue
        raise BenchmarkError(f"a PUT to {TARGET} never reached the GET stream of a session subscribed to {URI}")
    finally:
        for connection in (control, stream, writer):
            connection.close()


async def measure(servers: Servers, options: argparse.Namespace) -> list[tuple[Table, list[tuple[Tally, Tally]]]]:
    """Check every arm, run every table's rounds, then check that a PUT was announced."""
    pools = Pools()
    try:
        (connection,) = await pools.get(servers.with_mcp, 1)
        session_id = await open_session(connection, servers.with_mcp.port)
        await verify(pools, servers, session_id)
        tables = build_tables(servers, session_id, options.requests)
        results = [(table, await run_rounds(table.cases, options.rounds, options.warmup, pools)) for table in tables]
    finally:
        pools.close()
    await a_put_is_heard(servers.with_mcp)
    return results


async def python_calls(variant: str, method: str, requests: int) -> float:
    """The Python calls one request makes through the app in `variant`, in process, after its
    startup (which moves the endpoint's plain route) and a warm-up."""
    app = build_app(variant)
    payload = json.dumps(PUT_BODY).encode() if method == "PUT" else b""
    headers = [(b"host", b"127.0.0.1")]
    if payload:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": TARGET,
        "raw_path": TARGET.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    statuses: list[int] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": payload, "more_body": False}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async with app.router.lifespan_context(app):
        for _ in range(requests // 10):
            await app(dict(scope), receive, send)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(requests):
            await app(dict(scope), receive, send)
        profile.disable()
    if set(statuses) != {200}:
        raise BenchmarkError(f"{method} {TARGET} in process ({variant}) answered {sorted(set(statuses))}")
    return pstats.Stats(profile).total_calls / requests


async def count_calls() -> str:
    """A table of the Python calls per request, by variant."""
    labels = {**VARIANTS, "router-last": "with the library, included after the app's routes"}
    lines = ["### Python calls per request, in process (cProfile)", "", "| variant | GET | PUT |", "|---|--:|--:|"]
    for variant in APP_VARIANTS:
        get, put = [await python_calls(variant, method, PROFILED_REQUESTS) for method in ("GET", "PUT")]
        lines.append(f"| {labels[variant]} | {get:,.0f} | {put:,.0f} |")
    return "\n".join(lines)


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, help="measured rounds (default 15; 2 with --quick)")
    parser.add_argument("--requests", type=int, help="requests per arm per round (default 1000; 40 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per arm (default 200; 20 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    quick = options.quick
    options.rounds = options.rounds if options.rounds is not None else (2 if quick else 15)
    options.requests = options.requests if options.requests is not None else (40 if quick else 1000)
    options.warmup = options.warmup if options.warmup is not None else (20 if quick else 200)
    if options.rounds < 1 or options.requests < 1 or options.warmup < 0:
        parser.error("--rounds and --requests must be at least 1, --warmup at least 0")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    started = time.monotonic()
    measured = versions()
    try:
        with running_servers() as servers:
            results = asyncio.run(measure(servers, options))
        calls = asyncio.run(count_calls())
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(
        f"`{command}`: {options.rounds} rounds x {options.requests} requests per arm and round; "
        f"uvicorn {DEFAULT_STACK}."
    )
    print(
        "p50: median over rounds, ratio = median of the per-round ratios (second column / first).\n"
        "p99 and server CPU (utime+stime per request): pooled over all rounds.\n"
    )
    for table, tallies in results:
        print(render(table, tallies), end="\n\n")
    print(f"After the rounds, a PUT to {TARGET} reached a session subscribed to {URI}: the middleware was in place.\n")
    print(calls, end="\n\n")
    print(measured)
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
