"""What an MCP `tools/call` costs over calling the same FastAPI route as REST, under uvicorn's
two stacks: h11 on asyncio (its default without extras) and httptools on uvloop
(`uvicorn[standard]`, as production runs it, where REST itself is cheaper).

    .venv/bin/python benchmarks/tool_call_vs_rest.py            # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/tool_call_vs_rest.py --quick    # a smoke run, seconds

httptools and uvloop come with the `bench` extra (`pip install -e '.[bench]'`, which `make
bench` runs first); without them the script stops rather than measure one stack only.

Deliberate choices:
- Each server is one uvicorn worker in a subprocess and the client runs here, so they never
  share a GIL. Two small servers (12 tools) run side by side, one per stack, both eras (a
  2025-11-25 session and 2026-07-28 without one) measured on each. A third server, with a large
  route table, runs h11 on asyncio beside them for the size figures.
- On a machine with two CPUs or more, every server is pinned to the last CPU and this client
  to the first (`--no-pin` leaves both to the scheduler), so client and server never queue
  for the same core and neither moves between cores. Only one server works at a time, so the
  servers sharing one CPU costs none of them anything. A pinned process cannot leave a CPU
  another job wants either: on a busy machine p99 then holds that job's time slices (a few ms),
  while server CPU does not.
- The client is raw asyncio over keep-alive HTTP/1.1 connections, writing pre-built request
  bytes and reading Content-Length bodies, so the server is the bottleneck.
- Within each round, the two arms of every comparison run back to back and their order flips
  every round, so drift on a shared machine cancels; every case runs on both stacks in the
  same round, one after the other. Ratios are medians of per-round ratios, except p99 and
  CPU, which are pooled over all rounds (per round they are too coarse).
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
from _stacks import H11, STANDARD, Pinning, Stack, check_standard_stack, choose_pinning, pin_client

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


# -- the servers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    """One uvicorn worker serving the benchmark app with `tools` tools."""

    process: Process
    tools: int
    stack: Stack = H11

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def label(self) -> str:
        return f"{self.tools} tools, {self.stack.label}"


@contextmanager
def running_servers(specs: Sequence[tuple[int, Stack]], pinning: Pinning | None) -> Iterator[list[Server]]:
    """Start one server per (tool count, stack), in parallel; wait until all listen; stop them all."""
    cpu = None if pinning is None else pinning.server_cpu
    with ExitStack() as stack:
        servers = [Server(stack.enter_context(_server_process(t, s, cpu)), t, s) for t, s in specs]
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in servers:
            server.process.wait_listening(deadline)
        yield servers


def _server_process(tools: int, stack: Stack, cpu: int | None) -> AbstractContextManager[Process]:
    env = {EXTRA_ROUTES_ENV: str(tools - MEASURED_TOOLS)}
    label = f"{tools}-tool {stack.label}"
    return uvicorn_process(sys.executable, APP_FACTORY, HERE, env, label, http=stack.http, loop=stack.loop, cpu=cpu)


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
    """The tool call's structuredContent must equal the REST JSON, for GET and for POST, in the
    session and without one (2026-07-28); tools/list must list every tool."""
    (connection,) = await pools.get(server, 1)
    port = server.port
    pairs = [
        ("get_item", http_request(port, "GET", GET_TARGET), GET_ARGUMENTS),
        ("create_item", http_request(port, "POST", "/items", body=POST_ARGUMENTS), POST_ARGUMENTS),
    ]
    for name, rest_request, arguments in pairs:
        rest = await connection.send(rest_request)
        call = {"name": name, "arguments": arguments}
        calls = {
            "session": mcp_request(port, session_id, "tools/call", call),
            STATELESS_VERSION: stateless_call(port, name, arguments),
        }
        for era, request in calls.items():
            result = (await connection.send(request)).json().get("result", {})
            if rest.status not in (200, 201) or result.get("isError") or result.get("structuredContent") != rest.json():
                raise BenchmarkError(
                    f"{name} ({era}) on the server with {server.label}: the tool call's structuredContent "
                    f"{result.get('structuredContent')!r} differs from the REST JSON {rest.body[:200]!r}"
                )
    listed = (await connection.send(mcp_request(port, session_id, "tools/list", {}))).json()
    count = len(listed.get("result", {}).get("tools", ()))
    if count != server.tools:
        raise BenchmarkError(f"tools/list on the server with {server.label} listed {count} tools")


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: tuple[str, str]
    cases: tuple[Case, ...]


@dataclass(frozen=True, slots=True)
class EraCases:
    """One small server's sequential GET and POST cases in one era: a row of the summary."""

    stack: Stack
    era: str
    get: Case
    post: Case


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run measures: its tables, every case in the order a round runs them, and the
    cases the summary reads."""

    tables: tuple[Table, ...]
    order: tuple[Case, ...]
    summary: tuple[EraCases, ...]


Results = Mapping[Case, tuple[Tally, Tally]]


async def measure(smalls: Sequence[Server], large: Server, options: argparse.Namespace) -> tuple[Plan, Results]:
    """Open a session on each server, check correctness, then run every case in the same rounds."""
    pools = Pools()
    try:
        sessions: dict[Server, str] = {}
        for server in (*smalls, large):
            (connection,) = await pools.get(server, 1)
            sessions[server] = await open_session(connection, server.port)
            await verify(pools, server, sessions[server])
        plan = build_plan(smalls, large, sessions, options.requests)
        tallies = await run_rounds(plan.order, options.rounds, options.warmup, pools)
        return plan, dict(zip(plan.order, tallies, strict=True))
    finally:
        pools.close()


def build_plan(smalls: Sequence[Server], large: Server, sessions: Mapping[Server, str], requests: int) -> Plan:
    """Tool call vs REST on each small server, its cases interleaved with the others' so that a
    case runs on every stack back to back; small vs large route table (h11) for the size figures."""
    mains = [tool_call_table(server, sessions[server], requests) for server in smalls]
    size = size_table(smalls[0], large, sessions, requests)
    interleaved = [case for same_case in zip(*(table.cases for table, _ in mains), strict=True) for case in same_case]
    return Plan(
        tables=(*(table for table, _ in mains), size),
        order=(*interleaved, *size.cases),
        summary=tuple(era_cases for _, eras in mains for era_cases in eras),
    )


def tool_call(server: Server, session_id: str | None, name: str, arguments: Mapping[str, Any]) -> Arm:
    """A tools/call in the session, or without a session id in 2026-07-28."""
    if session_id is None:
        request = stateless_call(server.port, name, arguments)
        return Arm(f"{name} tool (2026-07-28, {server.label})", server, request)
    call = {"name": name, "arguments": arguments}
    return Arm(f"{name} tool ({server.label})", server, mcp_request(server.port, session_id, "tools/call", call))


def rest_calls(server: Server) -> tuple[Arm, Arm]:
    """GET and POST of the measured routes over REST."""
    port, label = server.port, server.label
    get = Arm(f"GET REST ({label})", server, http_request(port, "GET", GET_TARGET))
    post = Arm(f"POST REST ({label})", server, http_request(port, "POST", "/items", body=POST_ARGUMENTS), 201)
    return get, post


def tool_call_table(server: Server, session_id: str, requests: int) -> tuple[Table, tuple[EraCases, EraCases]]:
    """Tool call vs REST on one server, in both eras, sequential and with concurrent clients."""
    get_rest, post_rest = rest_calls(server)
    get_tool, post_tool, get_stateless, post_stateless = (
        tool_call(server, session, name, arguments)
        for session in (session_id, None)
        for name, arguments in (("get_item", GET_ARGUMENTS), ("create_item", POST_ARGUMENTS))
    )
    session = EraCases(
        server.stack,
        "session",
        Case("GET /items/{id}?q=, sequential", 1, requests, (get_rest, get_tool)),
        Case("POST /items, sequential", 1, requests, (post_rest, post_tool)),
    )
    stateless = EraCases(
        server.stack,
        STATELESS_VERSION,
        Case("GET, 2026-07-28 (no session), sequential", 1, requests, (get_rest, get_stateless)),
        Case("POST, 2026-07-28 (no session), sequential", 1, requests, (post_rest, post_stateless)),
    )
    concurrent = [
        Case(f"{method}, {clients} clients", clients, requests, arms)
        for clients in CONCURRENCY
        for method, arms in (("GET", (get_rest, get_tool)), ("POST", (post_rest, post_tool)))
    ]
    cases = (session.get, session.post, stateless.get, stateless.post, *concurrent)
    title = f"Tool call vs REST ({server.tools} tools, {server.stack.label})"
    return Table(title, ("REST", "tool call"), cases), (session, stateless)


def size_table(small: Server, large: Server, sessions: Mapping[Server, str], requests: int) -> Table:
    """The same calls on the small and the large server (same stack)."""
    lists = [
        Arm(f"tools/list ({s.label})", s, mcp_request(s.port, sessions[s], "tools/list", {})) for s in (small, large)
    ]
    get_tools = [tool_call(s, sessions[s], "get_item", GET_ARGUMENTS) for s in (small, large)]
    get_rests = [rest_calls(s)[0] for s in (small, large)]
    size = (
        Case("tools/call get_item, sequential", 1, requests, (get_tools[0], get_tools[1])),
        Case("REST GET /items/{id}, sequential", 1, requests, (get_rests[0], get_rests[1])),
        Case("tools/list (warm), sequential", 1, max(3, requests // 10), (lists[0], lists[1]), True),
    )
    title = f"Route table size ({small.stack.label})"
    return Table(title, (f"{small.tools} tools", f"{large.tools} tools"), size)


# -- the report ------------------------------------------------------------------------------


def percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(fraction * len(ordered)) - 1)]


def ratio(a: float, b: float) -> float | None:
    return b / a if a else None  # CPU can read 0 ticks on a short run


def round_ratio(a: Tally, b: Tally) -> float | None:
    ratios = [ratio(va, vb) for va, vb in zip(a.round_values, b.round_values, strict=True)]
    return statistics.median(r for r in ratios if r is not None) if None not in ratios else None


def cpu_us(*tallies: Tally) -> float:
    """Server CPU per request, pooled over the tallies' rounds."""
    return sum(t.cpu_s for t in tallies) / sum(t.requests for t in tallies) * 1e6


def microseconds(value: float) -> str:
    return f"{value:,.0f} µs"


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


Row = tuple[str, str, str, str]


def rows(case: Case, a: Tally, b: Tally) -> Iterator[Row]:
    """The table rows for one case: its figures for both arms and their ratio."""

    def row(what: str, va: float, vb: float, rate: float | None, fmt: Callable[[float], str]) -> Row:
        return f"{case.title}: {what}", fmt(va), fmt(vb), times(rate)

    median_a, median_b = statistics.median(a.round_values), statistics.median(b.round_values)
    if case.is_latency:
        yield row("p50 latency", median_a, median_b, round_ratio(a, b), microseconds)
        p99_a, p99_b = (percentile(t.latencies_ns, 0.99) / 1000 for t in (a, b))
        yield row("p99 latency", p99_a, p99_b, ratio(p99_a, p99_b), microseconds)
    else:
        yield row("throughput", median_a, median_b, round_ratio(a, b), lambda v: f"{v:,.0f} req/s")
    cpu_a, cpu_b = cpu_us(a), cpu_us(b)
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


def render_summary(summary: Sequence[EraCases], results: Results) -> str:
    """Per stack and era, the tool call's server CPU and p50 as ratios to REST on the same server;
    under it, the GET figures in µs (REST pooled over both eras' cases)."""
    lines = [
        "| server | era | GET CPU / REST | GET p50 / REST | POST CPU / REST | POST p50 / REST |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for row in summary:
        cells = []
        for case in (row.get, row.post):
            rest, tool = results[case]
            cells += [times(ratio(cpu_us(rest), cpu_us(tool))), times(round_ratio(rest, tool))]
        lines.append(f"| {row.stack.label} | {row.era} | " + " | ".join(cells) + " |")
    stacks = {row.stack: [r for r in summary if r.stack == row.stack] for row in summary}
    absolute = []
    for stack, eras in stacks.items():
        rest_us = cpu_us(*(results[row.get][0] for row in eras))
        tools = ", ".join(f"{microseconds(cpu_us(results[row.get][1]))} ({row.era})" for row in eras)
        absolute.append(f"{stack.label}: REST {microseconds(rest_us)}, tool call {tools}")
    lines += ["", "GET server CPU per call, pooled over rounds: " + "; ".join(absolute) + "."]
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
    parser.add_argument("--no-pin", action="store_true", help="pin neither the servers nor this client to a CPU")
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
    pinning, pinned = choose_pinning(not options.no_pin)
    small = options.extra_routes + MEASURED_TOOLS
    try:
        check_standard_stack()
        with running_servers([(small, H11), (small, STANDARD), (options.large_tools, H11)], pinning) as servers:
            pin_client(pinning)
            plan, results = asyncio.run(measure(servers[:2], servers[2], options))
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(f"`{command}`: {options.rounds} rounds x {options.requests} requests per arm and round.")
    print(f"Servers: one uvicorn worker each, {H11.label} and {STANDARD.label}. CPU pinning: {pinned}.")
    print(
        "p50 and throughput: median over rounds, ratio = median of the per-round ratios (second column / first).\n"
        "p99 and server CPU (utime+stime per request): pooled over all rounds.\n"
    )
    for table in plan.tables:
        print(render(table, [results[case] for case in table.cases]), end="\n\n")
    print("### Summary: the tool call against REST on the same server\n")
    print(render_summary(plan.summary, results), end="\n\n")
    print(measured)
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
