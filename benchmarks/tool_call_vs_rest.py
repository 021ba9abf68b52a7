"""What an MCP `tools/call` costs over calling the same FastAPI route as REST.

    .venv/bin/python benchmarks/tool_call_vs_rest.py            # under a minute on 2 cores
    .venv/bin/python benchmarks/tool_call_vs_rest.py --quick    # a smoke run, seconds

Deliberate choices:
- The server is one uvicorn worker in a subprocess and the client runs here, so they never
  share a GIL. A second server with a large route table runs beside it for the size figures.
- The client is raw asyncio over keep-alive HTTP/1.1 connections, writing pre-built request
  bytes and reading Content-Length bodies, so the server is the bottleneck.
- Within each round, the two arms of every comparison run back to back and their order flips
  every round, so drift on a shared machine cancels. Ratios are medians of per-round ratios,
  except p99 and CPU, which are pooled over all rounds (per round they are too coarse).
- Server CPU per request (utime + stime from /proc/<pid>/stat, all threads) is the least noisy
  figure: it does not count the time the server waited for the CPU. It is counted in clock
  ticks (10 ms), hence the default of 1000 requests per arm and round.
- Every loop is bounded by a request count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from _http import BenchmarkError, Connection, Pools, Process, http_request, send_batch, uvicorn_process

PROTOCOL_VERSION: Final = "2025-11-25"
STATELESS_VERSION: Final = "2026-07-28"
APP_FACTORY: Final = "bench_app:create_app"
EXTRA_ROUTES_ENV: Final = "FMR_BENCH_EXTRA_ROUTES"  # read by bench_app.create_app
MEASURED_TOOLS: Final = 2  # get_item and create_item; the rest are generated
CONCURRENCY: Final = (8, 16)
START_TIMEOUT_S: Final = 60.0
BATCH_TIMEOUT_S: Final = 120.0
HERE: Final = Path(__file__).resolve().parent

GET_ARGUMENTS: Final = {"item_id": 42, "q": "hello"}
GET_TARGET: Final = "/items/42?q=hello"
POST_ARGUMENTS: Final = {"name": "widget", "price": 9.5, "tags": ["bench", "post"]}


# -- the server ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    """One uvicorn worker serving the benchmark app with `tools` tools."""

    process: Process
    tools: int

    @property
    def port(self) -> int:
        return self.process.port


@contextmanager
def running_servers(tool_counts: Sequence[int]) -> Iterator[list[Server]]:
    """Start one server per tool count (in parallel), wait until all listen, stop them all."""
    with ExitStack() as stack:
        servers = [Server(stack.enter_context(_server_process(tools)), tools) for tools in tool_counts]
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in servers:
            server.process.wait_listening(deadline)
        yield servers


def _server_process(tools: int) -> AbstractContextManager[Process]:
    env = {EXTRA_ROUTES_ENV: str(tools - MEASURED_TOOLS)}
    return uvicorn_process(sys.executable, APP_FACTORY, HERE, env, f"{tools}-tool")


# -- the client ------------------------------------------------------------------------------


def mcp_request(port: int, session_id: str | None, method: str, params: Mapping[str, Any] | None) -> bytes:
    """A JSON-RPC request (or, without params, a notification) POSTed to `/mcp`."""
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": PROTOCOL_VERSION}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message |= {"id": 1, "params": params}
    return http_request(port, "POST", "/mcp", headers, message)


def stateless_call(port: int, name: str, arguments: Mapping[str, Any]) -> bytes:
    """A 2026-07-28 tools/call: no session, its version and routing in headers and `_meta`."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": STATELESS_VERSION,
        "mcp-method": "tools/call",
        "mcp-name": name,
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta},
    }
    return http_request(port, "POST", "/mcp", headers, message)


async def open_session(connection: Connection, port: int) -> str:
    """Initialize an MCP session and return its id."""
    hello = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    reply = await connection.send(mcp_request(port, None, "initialize", hello))
    session_id = reply.headers.get("mcp-session-id")
    if reply.status != 200 or not session_id:
        raise BenchmarkError(f"initialize answered HTTP {reply.status} without a session: {reply.body[:200]!r}")
    reply = await connection.send(mcp_request(port, session_id, "notifications/initialized", None))
    if reply.status != 202:
        raise BenchmarkError(f"notifications/initialized answered HTTP {reply.status}, expected 202")
    return session_id


# -- what is measured ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arm:
    """One side of a comparison: a request sent to one server, and the status it must get."""

    label: str
    server: Server
    request: bytes
    status: int = 200


@dataclass(frozen=True, slots=True)
class Case:
    """Two arms run back to back in every round; `clients` connections share `count` requests."""

    title: str
    clients: int
    count: int
    arms: tuple[Arm, Arm]
    show_size: bool = False

    @property
    def is_latency(self) -> bool:
        return self.clients == 1


@dataclass(slots=True)
class Tally:
    """What one arm of one case gathered over all rounds."""

    round_values: list[float] = field(default_factory=list)  # p50 µs or requests/s, one per round
    latencies_ns: list[int] = field(default_factory=list)
    cpu_s: float = 0.0
    requests: int = 0
    body_bytes: int = 0


async def run_batch(arm: Arm, connections: Sequence[Connection], count: int, tally: Tally | None) -> None:
    """Send `count` requests over the connections and add what they took to the tally."""
    requests = [arm.request] * len(connections)
    batch = await send_batch(arm.server.process, connections, requests, count, arm.status, arm.label, BATCH_TIMEOUT_S)
    if tally is None:
        return
    sequential = len(connections) == 1
    tally.round_values.append(statistics.median(batch.latencies_ns) / 1000 if sequential else count / batch.elapsed_s)
    tally.latencies_ns += batch.latencies_ns
    tally.cpu_s += batch.cpu_s
    tally.requests += count
    tally.body_bytes = batch.body_bytes


async def run_rounds(cases: Sequence[Case], rounds: int, warmup: int, pools: Pools) -> list[tuple[Tally, Tally]]:
    """Warm every arm up, then run every case once per round, flipping the arms' order.

    Returns one pair of tallies per case, in the order of `case.arms`.
    """
    tallies = [(Tally(), Tally()) for _ in cases]
    for case in cases:
        for arm in case.arms:
            await run_batch(arm, await pools.get(arm.server, case.clients), max(warmup, case.clients), None)
    for index in range(rounds):
        for case, pair in zip(cases, tallies, strict=True):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            for side in order:
                arm = case.arms[side]
                await run_batch(arm, await pools.get(arm.server, case.clients), case.count, pair[side])
    return tallies


# -- correctness, checked once before timing ---------------------------------------------------


async def verify(pools: Pools, server: Server, session_id: str) -> None:
    """The tool call's structuredContent must equal the REST JSON, for GET and for POST."""
    (connection,) = await pools.get(server, 1)
    port = server.port
    pairs = [
        ("get_item", http_request(port, "GET", GET_TARGET), GET_ARGUMENTS),
        ("create_item", http_request(port, "POST", "/items", body=POST_ARGUMENTS), POST_ARGUMENTS),
    ]
    for name, rest_request, arguments in pairs:
        rest = await connection.send(rest_request)
        call = {"name": name, "arguments": arguments}
        tool = await connection.send(mcp_request(port, session_id, "tools/call", call))
        result = tool.json().get("result", {})
        if rest.status not in (200, 201) or result.get("isError") or result.get("structuredContent") != rest.json():
            raise BenchmarkError(
                f"{name} on the server with {server.tools} tools: the tool call's structuredContent "
                f"{result.get('structuredContent')!r} differs from the REST JSON {rest.body[:200]!r}"
            )
    listed = (await connection.send(mcp_request(port, session_id, "tools/list", {}))).json()
    count = len(listed.get("result", {}).get("tools", ()))
    if count != server.tools:
        raise BenchmarkError(f"tools/list listed {count} tools, expected {server.tools}")


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: tuple[str, str]
    cases: tuple[Case, ...]


async def measure(
    small: Server, large: Server, options: argparse.Namespace
) -> list[tuple[Table, list[tuple[Tally, Tally]]]]:
    """Open a session on each server, check correctness, then run every table's rounds."""
    pools = Pools()
    try:
        sessions: dict[Server, str] = {}
        for server in (small, large):
            (connection,) = await pools.get(server, 1)
            sessions[server] = await open_session(connection, server.port)
            await verify(pools, server, sessions[server])
        tables = build_tables(small, large, sessions, options.requests)
        return [(table, await run_rounds(table.cases, options.rounds, options.warmup, pools)) for table in tables]
    finally:
        pools.close()


def build_tables(small: Server, large: Server, sessions: Mapping[Server, str], requests: int) -> list[Table]:
    """Tool call vs REST on the small server; small vs large route table for the size figures."""

    def tool_call(server: Server, name: str, arguments: Mapping[str, Any]) -> Arm:
        call = {"name": name, "arguments": arguments}
        return Arm(f"{name} tool", server, mcp_request(server.port, sessions[server], "tools/call", call))

    get_rest = Arm("GET REST", small, http_request(small.port, "GET", GET_TARGET))
    get_tool = tool_call(small, "get_item", GET_ARGUMENTS)
    post_rest = Arm("POST REST", small, http_request(small.port, "POST", "/items", body=POST_ARGUMENTS), 201)
    post_tool = tool_call(small, "create_item", POST_ARGUMENTS)
    get_stateless = Arm("get_item tool (2026-07-28)", small, stateless_call(small.port, "get_item", GET_ARGUMENTS))
    post_stateless = Arm(
        "create_item tool (2026-07-28)", small, stateless_call(small.port, "create_item", POST_ARGUMENTS)
    )
    main = [
        Case("GET /items/{id}?q=, sequential", 1, requests, (get_rest, get_tool)),
        Case("POST /items, sequential", 1, requests, (post_rest, post_tool)),
        Case("GET, 2026-07-28 (no session), sequential", 1, requests, (get_rest, get_stateless)),
        Case("POST, 2026-07-28 (no session), sequential", 1, requests, (post_rest, post_stateless)),
    ]
    main += [
        Case(f"{label}, {clients} clients", clients, requests, arms)
        for clients in CONCURRENCY
        for label, arms in (("GET", (get_rest, get_tool)), ("POST", (post_rest, post_tool)))
    ]
    large_get_rest = Arm("GET REST (large)", large, http_request(large.port, "GET", GET_TARGET))
    lists = [
        Arm(f"tools/list ({s.tools})", s, mcp_request(s.port, sessions[s], "tools/list", {})) for s in (small, large)
    ]
    size = [
        Case("tools/call get_item, sequential", 1, requests, (get_tool, tool_call(large, "get_item", GET_ARGUMENTS))),
        Case("REST GET /items/{id}, sequential", 1, requests, (get_rest, large_get_rest)),
        Case("tools/list (warm), sequential", 1, max(3, requests // 10), (lists[0], lists[1]), True),
    ]
    return [
        Table(f"Tool call vs REST ({small.tools} tools)", ("REST", "tool call"), tuple(main)),
        Table("Route table size", (f"{small.tools} tools", f"{large.tools} tools"), tuple(size)),
    ]


# -- the report ------------------------------------------------------------------------------


def percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def ratio(a: float, b: float) -> float | None:
    return b / a if a else None  # CPU can read 0 ticks on a short run


def round_ratio(a: Tally, b: Tally) -> float | None:
    ratios = [ratio(va, vb) for va, vb in zip(a.round_values, b.round_values, strict=True)]
    return statistics.median(r for r in ratios if r is not None) if None not in ratios else None


def microseconds(value: float) -> str:
    return f"{value:,.0f} µs"


Row = tuple[str, str, str, str]


def rows(case: Case, a: Tally, b: Tally) -> Iterator[Row]:
    """The table rows for one case: its figures for both arms and their ratio."""

    def row(what: str, va: float, vb: float, rate: float | None, fmt: Callable[[float], str]) -> Row:
        return f"{case.title}: {what}", fmt(va), fmt(vb), "n/a" if rate is None else f"{rate:.2f}x"

    median_a, median_b = statistics.median(a.round_values), statistics.median(b.round_values)
    if case.is_latency:
        yield row("p50 latency", median_a, median_b, round_ratio(a, b), microseconds)
        p99_a, p99_b = (percentile(t.latencies_ns, 0.99) / 1000 for t in (a, b))
        yield row("p99 latency", p99_a, p99_b, ratio(p99_a, p99_b), microseconds)
    else:
        yield row("throughput", median_a, median_b, round_ratio(a, b), lambda v: f"{v:,.0f} req/s")
    cpu_a, cpu_b = (t.cpu_s / t.requests * 1e6 for t in (a, b))
    yield row("server CPU / request", cpu_a, cpu_b, ratio(cpu_a, cpu_b), microseconds)
    if case.show_size:
        yield row("response size", a.body_bytes, b.body_bytes, ratio(a.body_bytes, b.body_bytes), "{:,.0f} B".format)


def render(table: Table, tallies: Sequence[tuple[Tally, Tally]]) -> str:
    lines = [
        f"### {table.title}",
        "",
        f"| Measure | {table.columns[0]} | {table.columns[1]} | ratio |",
        "|---|--:|--:|--:|",
    ]
    for case, (a, b) in zip(table.cases, tallies, strict=True):
        lines += ["| " + " | ".join(r) + " |" for r in rows(case, a, b)]
    return "\n".join(lines)


def versions() -> str:
    def version(package: str) -> str:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return "absent"

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, timeout=10, check=False)

    commit = git("rev-parse", "--short", "HEAD").stdout.strip() or "unknown"
    if git("diff", "--quiet", "HEAD", "--", "fastapi_mcp_routes").returncode != 0:
        commit += " (library has uncommitted changes)"
    return (
        f"python {platform.python_version()}, fastapi {version('fastapi')}, starlette {version('starlette')}, "
        f"pydantic {version('pydantic')}, uvicorn {version('uvicorn')} (httptools {version('httptools')}, "
        f"uvloop {version('uvloop')}), fastapi-mcp-routes {commit}; {os.cpu_count()} CPUs"
    )


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, help="measured rounds (default 7; 2 with --quick)")
    parser.add_argument("--requests", type=int, help="requests per arm per round (default 1000; 40 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per arm (default 200; 20 with --quick)")
    parser.add_argument("--extra-routes", type=int, default=10, help="generated tool routes besides the two measured")
    parser.add_argument("--large-tools", type=int, default=1000, help="tools on the second, large server")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    quick = options.quick
    options.rounds = options.rounds if options.rounds is not None else (2 if quick else 7)
    options.requests = options.requests if options.requests is not None else (40 if quick else 1000)
    options.warmup = options.warmup if options.warmup is not None else (20 if quick else 200)
    if options.rounds < 1 or options.warmup < 0 or options.extra_routes < 0:
        parser.error("--rounds must be at least 1, --warmup and --extra-routes at least 0")
    if options.requests < max(CONCURRENCY):
        parser.error(f"--requests must be at least {max(CONCURRENCY)} (the most concurrent clients)")
    if options.large_tools <= options.extra_routes + MEASURED_TOOLS:
        parser.error(f"--large-tools must exceed the small server's {options.extra_routes + MEASURED_TOOLS} tools")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    started = time.monotonic()
    measured = versions()  # before the servers import the library, which may change under a long run
    try:
        with running_servers((options.extra_routes + MEASURED_TOOLS, options.large_tools)) as (small, large):
            results = asyncio.run(measure(small, large, options))
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(f"`{command}`: {options.rounds} rounds x {options.requests} requests per arm and round.")
    print(
        "p50 and throughput: median over rounds, ratio = median of the per-round ratios (second column / first).\n"
        "p99 and server CPU (utime+stime per request): pooled over all rounds.\n"
    )
    for table, tallies in results:
        print(render(table, tallies), end="\n\n")
    print(measured)
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
