"""This library against fastapi-mcp and FastMCP, on the same FastAPI app, in one run.

    .venv/bin/python benchmarks/peers.py           # a few minutes on 2 cores
    .venv/bin/python benchmarks/peers.py --quick   # a smoke run

Each peer gets its own virtualenv under `.tools/bench/` on first use (fastapi-mcp needs
`mcp<2`, which this project's SDK test dependency cannot share), with FastAPI, Starlette,
pydantic and uvicorn pinned to the versions this project's virtualenv runs, so that only the
MCP layer differs. Every implementation serves `peer_app.py` on one uvicorn worker on
127.0.0.1, REST beside its MCP endpoint, and every figure is a ratio to REST on the same server.
uvicorn runs h11 on asyncio, named explicitly (`_http.uvicorn_process`), even where httptools and
uvloop are installed (the `bench` extra): `tool_call_vs_rest.py` measures that stack too.

Deliberate choices:
- Implementations and the two arms of each comparison are interleaved: every round visits
  every implementation, in an order that rotates, and flips REST and tool call, so machine
  drift cancels. p50 and throughput ratios are medians of per-round ratios; p99 and CPU are
  pooled over rounds (per round they are too coarse).
- Server CPU per call (utime + stime of the server process) is the least noisy figure.
- Every client speaks protocol 2025-06-18, which all three serve, over one session each.
- Startup is timed from spawning the process to the first answered MCP request (initialize and
  a full tools/list) or, for the bare app, the first answered REST request; median of three.
- Every loop is bounded by a request count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from _http import (
    DEFAULT_STACK,
    BenchmarkError,
    Connection,
    Pools,
    Process,
    http_request,
    send_batch,
    uvicorn_process,
)
from chart import write_ratio_chart
from peer_app import API_KEY, CREDENTIAL_HEADER, ENDPOINTS, EXTRA_ROUTES_ENV, IMPL_ENV

HERE: Final = Path(__file__).resolve().parent
CHART: Final = HERE.parent / "docs" / "images" / "peers.png"  # shown in docs/performance.md
VENVS: Final = HERE.parent / ".tools" / "bench"
FACTORY: Final = "peer_app:create_app"
OURS: Final = "fastapi-mcp-routes"
IMPLS: Final = (OURS, "fastapi-mcp", "fastmcp")
# What each peer's virtualenv installs besides the versions shared with this project.
PEER_PACKAGES: Final = {"fastapi-mcp": ("fastapi-mcp==0.4.0", "mcp<2"), "fastmcp": ("fastmcp==4.2.3",)}
SHARED_PACKAGES: Final = ("fastapi", "starlette", "pydantic", "uvicorn", "httpx")
VERSION: Final = "2025-06-18"
TOOL_COUNTS: Final = (10, 100, 1000)
MEASURED_ROUTES: Final = 3  # get_item, create_item, get_secret; the rest are generated
CONCURRENCY: Final = (8, 16)
START_TIMEOUT_S: Final = 120.0
BATCH_TIMEOUT_S: Final = 300.0
SESSIONS: Final = 1000  # opened for the RSS-per-session figure
GET_ARGUMENTS: Final = {"item_id": 42, "q": "hello"}
POST_ARGUMENTS: Final = {"name": "widget", "price": 9.5, "tags": ["bench", "post"]}
TARGETS: Final = {
    "cpu": "<= 1.5x",
    "p50": "<= 1.3x",
    "throughput": ">= 0.65x",
    "list": "<= 3 ms",
    "rss": "<= 4 KB",
    "startup": "<= 0.1 s",
    "flat": "within 10%",
}


# -- the implementations' virtualenvs ----------------------------------------------------------


def interpreter(impl: str) -> Path:
    """The Python that serves `impl`: this one for the library and REST, else the peer's own."""
    if impl == OURS or impl == "rest":
        return Path(sys.executable)
    return VENVS / impl / "bin" / "python"


def ensure_peer_venvs() -> None:
    """Create each peer's virtualenv, or reuse it when it was made for the same requirements."""
    shared = [f"{name}=={importlib.metadata.version(name)}" for name in SHARED_PACKAGES]
    for impl, packages in PEER_PACKAGES.items():
        venv = VENVS / impl
        wanted = "\n".join([*packages, *shared])
        stamp = venv / ".requirements"
        if stamp.exists() and stamp.read_text() == wanted:
            continue
        print(f"installing {impl} into {venv.relative_to(HERE.parent)} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, *packages, *shared], check=True, timeout=900)
        stamp.write_text(wanted)


def installed_version(impl: str, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([str(interpreter(impl)), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() or "absent"


# -- servers and sessions --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    impl: str
    tools: int  # routes, all of them tools
    process: Process

    @property
    def port(self) -> int:
        return self.process.port


def spawn(stack: ExitStack, impl: str, tools: int) -> Server:
    env = {IMPL_ENV: impl, EXTRA_ROUTES_ENV: str(tools - MEASURED_ROUTES)}
    process = stack.enter_context(uvicorn_process(interpreter(impl), FACTORY, HERE, env, f"{impl} ({tools} routes)"))
    return Server(impl, tools, process)


def mcp_request(
    server: Server, session_id: str | None, method: str, params: Mapping[str, Any] | None, key: bool = True
) -> bytes:
    """A JSON-RPC request (a notification without params) to the server's MCP endpoint."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": VERSION}
    if key:
        headers[CREDENTIAL_HEADER] = API_KEY
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message |= {"id": 1, "params": params}
    return http_request(server.port, "POST", ENDPOINTS[server.impl], headers, message)


async def open_session(connection: Connection, server: Server, key: bool = True) -> str:
    hello = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    reply = await connection.send(mcp_request(server, None, "initialize", hello, key))
    session_id = reply.headers.get("mcp-session-id")
    if reply.status != 200 or not session_id:
        raise BenchmarkError(f"{server.impl}: initialize answered HTTP {reply.status}: {reply.body[:200]!r}")
    reply = await connection.send(mcp_request(server, session_id, "notifications/initialized", None, key))
    if reply.status != 202:
        raise BenchmarkError(f"{server.impl}: notifications/initialized answered HTTP {reply.status}")
    return session_id


async def list_all(connection: Connection, server: Server, session_id: str) -> tuple[list[Any], int]:
    """Every tool, following cursors; and the bytes of all the list responses."""
    tools: list[Any] = []
    size = 0
    params: dict[str, Any] = {}
    for _ in range(100):  # a bound on pages
        reply = await connection.send(mcp_request(server, session_id, "tools/list", params))
        result = reply.json()["result"]
        size += len(reply.body)
        tools += result["tools"]
        if not result.get("nextCursor"):
            return tools, size
        params = {"cursor": result["nextCursor"]}
    raise BenchmarkError(f"{server.impl}: tools/list did not end within 100 pages")


def tool_json(result: Mapping[str, Any]) -> Any:
    """What a tool result says: its structuredContent, else the JSON in its first text block."""
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    return json.loads(result["content"][0]["text"])


async def verify(connection: Connection, server: Server, session_id: str) -> bool:
    """The tool results must equal REST; returns whether the caller's credential reached the guard."""
    pairs = [
        ("get_item", http_request(server.port, "GET", "/items/42?q=hello"), GET_ARGUMENTS),
        ("create_item", http_request(server.port, "POST", "/items", body=POST_ARGUMENTS), POST_ARGUMENTS),
    ]
    for name, rest_request, arguments in pairs:
        rest = (await connection.send(rest_request)).json()
        reply = await connection.send(
            mcp_request(server, session_id, "tools/call", {"name": name, "arguments": arguments})
        )
        result = reply.json().get("result", {})
        if result.get("isError") or tool_json(result) != rest:
            raise BenchmarkError(f"{server.impl}: {name} answered {reply.body[:300]!r}, REST {rest!r}")
    tools, _ = await list_all(connection, server, session_id)
    if len(tools) != server.tools:
        raise BenchmarkError(f"{server.impl}: tools/list listed {len(tools)} tools, expected {server.tools}")
    guarded = {"name": "get_secret", "arguments": {}}
    allowed = (await connection.send(mcp_request(server, session_id, "tools/call", guarded))).json()["result"]
    # Without the key, in a session of its own: this library binds a session to its credentials.
    keyless = await open_session(connection, server, key=False)
    refused = (await connection.send(mcp_request(server, keyless, "tools/call", guarded, key=False))).json()
    return not allowed.get("isError") and bool(refused.get("result", {}).get("isError"))


# -- timing ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arm:
    """Requests to one server: the i-th connection sends the i-th (tool calls name its session)."""

    label: str
    server: Server
    requests: tuple[bytes, ...]
    status: int = 200


@dataclass(slots=True)
class Tally:
    round_values: list[float] = field(default_factory=list)  # p50 µs or requests/s, one per round
    latencies_ns: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    requests: int = 0

    @property
    def cpu_us(self) -> float:
        return self.cpu_s / self.requests * 1e6 if self.requests else math.nan

    @property
    def p99_us(self) -> float:
        ordered = sorted(self.latencies_ns)
        return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)] / 1000


async def run_batch(arm: Arm, connections: Sequence[Connection], count: int, tally: Tally | None) -> None:
    """Send `count` requests over the connections and add what they took to the tally."""
    batch = await send_batch(
        arm.server.process, connections, arm.requests, count, arm.status, arm.label, BATCH_TIMEOUT_S
    )
    if tally is not None:
        sequential = len(connections) == 1
        tally.round_values.append(
            statistics.median(batch.latencies_ns) / 1000 if sequential else count / batch.elapsed_s
        )
        tally.latencies_ns += batch.latencies_ns
        tally.cpu_s += batch.cpu_s
        tally.requests += count


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two arms on one server, run back to back every round."""

    figure: str  # "GET, sequential", "POST, 8 clients", ...
    impl: str
    clients: int
    base: Arm
    measured: Arm
    tallies: tuple[Tally, Tally] = field(default_factory=lambda: (Tally(), Tally()))


async def run_rounds(comparisons: Sequence[Comparison], rounds: int, count: int, warmup: int, pools: Pools) -> None:
    """Warm every arm up, then run every comparison once per round; the implementations' order
    rotates and each comparison's two arms swap order every round."""
    for comparison in comparisons:
        for arm in (comparison.base, comparison.measured):
            await run_batch(arm, await pools.get(arm.server, comparison.clients), warmup, None)
    impls = sorted({c.impl for c in comparisons})
    for index in range(rounds):
        rotation = impls[index % len(impls) :] + impls[: index % len(impls)]
        for impl in rotation:
            for comparison in (c for c in comparisons if c.impl == impl):
                sides = (0, 1) if index % 2 == 0 else (1, 0)
                arms = (comparison.base, comparison.measured)
                for side in sides:
                    connections = await pools.get(arms[side].server, comparison.clients)
                    await run_batch(arms[side], connections, count, comparison.tallies[side])


def ratio_of_rounds(comparison: Comparison) -> float:
    base, measured = comparison.tallies
    return statistics.median(m / b for b, m in zip(base.round_values, measured.round_values, strict=True))


# -- the phases --------------------------------------------------------------------------------


@dataclass(slots=True)
class Results:
    impls: tuple[str, ...] = IMPLS
    versions: dict[str, str] = field(default_factory=dict)
    credential_forwarded: dict[str, bool] = field(default_factory=dict)
    calls: list[Comparison] = field(default_factory=list)
    flat: list[Comparison] = field(default_factory=list)
    lists: dict[tuple[str, int], tuple[float, int, float]] = field(default_factory=dict)  # open+list ms, B, warm ms
    rss_per_session: dict[str, float] = field(default_factory=dict)
    startup: dict[str, float] = field(default_factory=dict)


def rest_arm(label: str, server: Server, request: bytes, status: int = 200) -> Arm:
    return Arm(label, server, (request,) * max(CONCURRENCY), status)


def tool_arm(label: str, server: Server, sessions: Sequence[str], name: str, arguments: Mapping[str, Any]) -> Arm:
    call = {"name": name, "arguments": arguments}
    return Arm(label, server, tuple(mcp_request(server, session, "tools/call", call) for session in sessions))


def call_comparisons(
    servers: Mapping[tuple[str, int], Server], sessions: Mapping[Server, list[str]], impls: Sequence[str]
) -> list[Comparison]:
    comparisons = []
    for impl in impls:
        server = servers[(impl, TOOL_COUNTS[0])]
        get_rest = rest_arm(f"{impl} GET REST", server, http_request(server.port, "GET", "/items/42?q=hello"))
        post = http_request(server.port, "POST", "/items", body=POST_ARGUMENTS)
        post_rest = rest_arm(f"{impl} POST REST", server, post, 201)
        get_tool = tool_arm(f"{impl} GET tool", server, sessions[server], "get_item", GET_ARGUMENTS)
        post_tool = tool_arm(f"{impl} POST tool", server, sessions[server], "create_item", POST_ARGUMENTS)
        for clients in (1, *CONCURRENCY):
            label = "sequential" if clients == 1 else f"{clients} clients"
            comparisons.append(Comparison(f"GET, {label}", impl, clients, get_rest, get_tool))
            comparisons.append(Comparison(f"POST, {label}", impl, clients, post_rest, post_tool))
    return comparisons


def flat_comparisons(
    servers: Mapping[tuple[str, int], Server], sessions: Mapping[Server, list[str]], impls: Sequence[str]
) -> list[Comparison]:
    comparisons = []
    for impl in impls:
        small, large = (servers[(impl, tools)] for tools in (TOOL_COUNTS[0], TOOL_COUNTS[-1]))
        arms = [
            tool_arm(f"{impl} get_item ({s.tools})", s, sessions[s], "get_item", GET_ARGUMENTS) for s in (small, large)
        ]
        comparisons.append(Comparison("tools/call at 1000 routes vs 10", impl, 1, arms[0], arms[1]))
    return comparisons


async def measure_lists(server: Server, pools: Pools, repeats: int) -> tuple[float, int, float]:
    """A new session's initialize + full tools/list (ms, median), the list's bytes, and the
    server CPU of one warm full tools/list (ms, mean)."""
    (connection,) = await pools.get(server, 1)
    opened = []
    size = 0
    for _ in range(repeats):
        started = time.perf_counter()
        session = await open_session(connection, server)
        _, size = await list_all(connection, server, session)
        opened.append((time.perf_counter() - started) * 1000)
    cpu_before = server.process.cpu_seconds()
    warm = repeats * 3
    for _ in range(warm):
        await list_all(connection, server, session)
    cpu_ms = (server.process.cpu_seconds() - cpu_before) / warm * 1000
    return statistics.median(opened), size, cpu_ms


async def rss_per_session(server: Server, pools: Pools, count: int) -> float:
    """Bytes of resident memory each further open session costs."""
    (connection,) = await pools.get(server, 1)
    for _ in range(20):  # warm the allocator and any lazy state first
        await open_session(connection, server)
    before = server.process.rss_bytes()
    for _ in range(count):
        await open_session(connection, server)
    return (server.process.rss_bytes() - before) / count


def time_startup(impl: str, tools: int, repeats: int) -> float:
    """Seconds from spawning the server to its first answer (median of `repeats`)."""
    times = []
    for _ in range(repeats):
        with ExitStack() as stack:
            started = time.monotonic()
            server = spawn(stack, impl, tools)
            server.process.wait_listening(started + START_TIMEOUT_S)
            asyncio.run(_first_answer(server))
            times.append(time.monotonic() - started)
    return statistics.median(times)


async def _first_answer(server: Server) -> None:
    connection = await Connection.open(server.port)
    try:
        if server.impl == "rest":
            reply = await connection.send(http_request(server.port, "GET", "/items/1"))
            if reply.status != 200:
                raise BenchmarkError(f"the bare app answered HTTP {reply.status}")
        else:
            await list_all(connection, server, await open_session(connection, server))
    finally:
        connection.close()


async def measure(servers: Mapping[tuple[str, int], Server], options: argparse.Namespace, results: Results) -> None:
    pools = Pools()
    try:
        # A session per connection, as concurrent agents would have (fastapi-mcp stalls when
        # one session carries several requests at once).
        sessions: dict[Server, list[str]] = {}
        for server in servers.values():
            connections = await pools.get(server, max(CONCURRENCY))
            sessions[server] = [await open_session(connection, server) for connection in connections]
            if server.tools == TOOL_COUNTS[0]:
                results.credential_forwarded[server.impl] = await verify(connections[0], server, sessions[server][0])
        print("timing tool calls ...", file=sys.stderr)
        results.calls = call_comparisons(servers, sessions, results.impls)
        await run_rounds(results.calls, options.rounds, options.requests, options.warmup, pools)
        results.flat = flat_comparisons(servers, sessions, results.impls)
        await run_rounds(results.flat, options.rounds, options.requests, options.warmup, pools)
        print("timing tools/list ...", file=sys.stderr)
        for (impl, tools), server in servers.items():
            results.lists[(impl, tools)] = await measure_lists(server, pools, options.list_repeats)
        print("opening sessions ...", file=sys.stderr)
        for impl in results.impls:
            results.rss_per_session[impl] = await rss_per_session(
                servers[(impl, TOOL_COUNTS[0])], pools, options.sessions
            )
    finally:
        pools.close()


# -- the report --------------------------------------------------------------------------------


NAMES: Final = {OURS: "fastapi-mcp-routes", "fastapi-mcp": "fastapi-mcp", "fastmcp": "FastMCP"}


def chart_ratios(results: Results) -> dict[str, dict[str, float]]:
    """The per-call figures the chart draws: sequential p50 and server CPU, against REST."""
    by = {(c.figure, c.impl): c for c in results.calls}
    ratios: dict[str, dict[str, float]] = {}
    for method in ("GET", "POST"):
        sequential = {impl: by[(f"{method}, sequential", impl)] for impl in results.impls}
        ratios[f"{method} p50 latency"] = {NAMES[i]: ratio_of_rounds(c) for i, c in sequential.items()}
        ratios[f"{method} server CPU"] = {
            NAMES[i]: c.tallies[1].cpu_us / c.tallies[0].cpu_us for i, c in sequential.items()
        }
    return ratios


def render(results: Results, options: argparse.Namespace) -> Iterator[str]:
    names = NAMES
    yield "| figure | " + " | ".join(names[i] for i in results.impls) + " | target |"
    yield "|---|" + "--:|" * len(results.impls) + "---|"

    def row(figure: str, values: Sequence[str], target: str = "") -> str:
        return f"| {figure} | " + " | ".join(values) + f" | {target} |"

    by = {(c.figure, c.impl): c for c in results.calls}
    for method in ("GET", "POST"):
        seq = [by[(f"{method}, sequential", impl)] for impl in results.impls]
        yield row(f"{method} tools/call p50 vs REST", [f"{ratio_of_rounds(c):.2f}x" for c in seq], TARGETS["p50"])
        yield row(
            f"{method} tools/call p99 vs REST",
            [f"{c.tallies[1].p99_us / c.tallies[0].p99_us:.2f}x" for c in seq],
        )
        yield row(
            f"{method} server CPU per call vs REST",
            [f"{c.tallies[1].cpu_us / c.tallies[0].cpu_us:.2f}x" for c in seq],
            TARGETS["cpu"],
        )
        for clients in CONCURRENCY:
            cases = [by[(f"{method}, {clients} clients", impl)] for impl in results.impls]
            yield row(
                f"{method} throughput, {clients} clients, vs REST",
                [f"{ratio_of_rounds(c):.2f}x" for c in cases],
                TARGETS["throughput"],
            )
    flat = {c.impl: c for c in results.flat}
    yield row(
        "tools/call p50 at 1000 routes vs 10",
        [f"{ratio_of_rounds(flat[i]):.2f}x" for i in results.impls],
        TARGETS["flat"],
    )
    for tools in TOOL_COUNTS:
        yield row(
            f"initialize + tools/list, {tools} tools",
            [
                f"{results.lists[(i, tools)][0]:.1f} ms, {results.lists[(i, tools)][1] / 1024:,.0f} KB"
                for i in results.impls
            ],
        )
    yield row(
        f"warm tools/list server CPU, {TOOL_COUNTS[-1]} tools",
        [f"{results.lists[(i, TOOL_COUNTS[-1])][2]:.1f} ms" for i in results.impls],
        TARGETS["list"],
    )
    yield row(
        f"RSS per open session (after {options.sessions})",
        [f"{results.rss_per_session[i] / 1024:.1f} KB" for i in results.impls],
        TARGETS["rss"],
    )
    bare = results.startup["rest"]
    yield row(
        f"startup over the bare app, {TOOL_COUNTS[-1]} routes",
        [f"{results.startup[i] - bare:+.2f} s" for i in results.impls],
        TARGETS["startup"],
    )
    yield row(
        "the caller's credential reaches the route's guard",
        ["yes" if results.credential_forwarded[i] else "no" for i in results.impls],
    )
    yield ""
    yield "Absolute figures (REST on the same server / tool call):"
    yield ""
    for c in results.calls:
        base, measured = c.tallies
        if c.clients == 1:
            values = (
                f"p50 {statistics.median(base.round_values):.0f} / {statistics.median(measured.round_values):.0f} µs"
            )
        else:
            values = (
                f"{statistics.median(base.round_values):,.0f} / {statistics.median(measured.round_values):,.0f} req/s"
            )
        yield f"- {names[c.impl]}, {c.figure}: {values}; CPU {base.cpu_us:.0f} / {measured.cpu_us:.0f} µs per request"
    yield f"- bare app startup at {TOOL_COUNTS[-1]} routes: {bare:.2f} s"


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, help="measured rounds (default 5; 2 with --quick)")
    parser.add_argument("--requests", type=int, help="requests per arm per round (default 600; 40 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per arm (default 100; 20 with --quick)")
    parser.add_argument("--sessions", type=int, help=f"sessions opened for RSS (default {SESSIONS}; 100 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--only", action="append", choices=IMPLS, help="measure only this implementation (repeatable)")
    parser.add_argument("--chart", type=Path, default=CHART, help=f"where the chart goes (default {CHART.name} here)")
    parser.add_argument("--no-chart", action="store_true", help="print the tables only")
    options = parser.parse_args(argv)
    quick = options.quick
    options.rounds = options.rounds if options.rounds is not None else (2 if quick else 5)
    options.requests = options.requests if options.requests is not None else (40 if quick else 600)
    options.warmup = options.warmup if options.warmup is not None else (20 if quick else 100)
    options.sessions = options.sessions if options.sessions is not None else (100 if quick else SESSIONS)
    options.list_repeats = 3 if quick else 10
    options.startup_repeats = 1 if quick else 3
    if options.rounds < 1 or options.warmup < max(CONCURRENCY) or options.requests < max(CONCURRENCY):
        parser.error(f"--rounds must be at least 1; --warmup and --requests at least {max(CONCURRENCY)}")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    started = time.monotonic()
    try:
        ensure_peer_venvs()
        results = Results()
        for impl in PEER_PACKAGES:
            results.versions[impl] = installed_version(impl, impl)
        print("timing startup ...", file=sys.stderr)
        results.impls = tuple(options.only or IMPLS)
        for impl in ("rest", *results.impls):
            results.startup[impl] = time_startup(impl, TOOL_COUNTS[-1], options.startup_repeats)
        with ExitStack() as stack:
            servers = {(impl, tools): spawn(stack, impl, tools) for impl in results.impls for tools in TOOL_COUNTS}
            deadline = time.monotonic() + START_TIMEOUT_S
            for server in servers.values():
                server.process.wait_listening(deadline)
            asyncio.run(measure(servers, options, results))
    except (BenchmarkError, OSError, EOFError, TimeoutError, subprocess.SubprocessError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(
        f"`{command}`: {options.rounds} rounds x {options.requests} requests per arm and round; "
        f"uvicorn {DEFAULT_STACK}.\n"
    )
    for line in render(results, options):
        print(line)
    shared = ", ".join(f"{name} {importlib.metadata.version(name)}" for name in SHARED_PACKAGES)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10, check=False
    ).stdout.strip()
    print(
        f"\nfastapi-mcp-routes {commit}, fastapi-mcp {results.versions['fastapi-mcp']} "
        f"(mcp {installed_version('fastapi-mcp', 'mcp')}), FastMCP {results.versions['fastmcp']} "
        f"(mcp {installed_version('fastmcp', 'mcp')}); shared: {shared}; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs. Total run time {time.monotonic() - started:.0f} s."
    )
    if not options.no_chart:
        caption = (
            f"`{command}` at {commit}: {options.rounds} rounds x {options.requests} requests; "
            f"fastapi-mcp {results.versions['fastapi-mcp']}, FastMCP {results.versions['fastmcp']}; "
            f"one uvicorn worker ({DEFAULT_STACK}), {os.cpu_count()} CPUs"
        )
        title = "One tool call against the same route over REST"
        write_ratio_chart(options.chart, title, [NAMES[i] for i in results.impls], chart_ratios(results), caption)
        print(f"Chart written to {os.path.relpath(options.chart)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
