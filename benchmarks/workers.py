"""What serving the endpoint from several processes costs a tool call: one uvicorn worker, two
workers sharing a secret, and two and four workers sharing a secret and a Redis, or a Redis
Cluster, side by side in one run.

    .venv/bin/python benchmarks/workers.py            # about 12 minutes on 2 cores
    .venv/bin/python benchmarks/workers.py --quick    # a smoke run, seconds

The issue's target: Redis adds at most 10% server CPU to a tool call in a live session, which
costs one Redis round trip (the session check, one EVALSHA).

Deliberate choices:
- Six servers of `bench_app` run at once, each a subprocess tree: `uvicorn` (one process, the
  default memory store, a random secret); `uvicorn --workers 2` with FASTAPI_MCP_ROUTES_SECRET;
  `--workers 2` and `--workers 4` with FMR_BENCH_REDIS_URL naming a redis-server this script
  starts and stops, and the same naming a Redis Cluster of three primaries it starts and stops
  (`_redis.py`). The deployments of one store share it.
- Every arm of a table runs once per round, the arms' order flipping every round, so drift on a
  shared machine cancels; the deployments of one request run next to each other. Ratios are
  medians of per-round ratios; server CPU is also pooled over all rounds, as per round it is
  counted in 10 ms ticks per process.
- Server CPU is utime + stime of the uvicorn process and every process under it (supervisor,
  workers, multiprocessing's resource tracker). Redis's own CPU (a Cluster's nodes together),
  and the round trips it served (scripts and publishes, from INFO commandstats), are a column of
  their own. Idle CPU is
  measured once, before the rounds.
- A session is opened once per server, on the first connection. The connections are spread
  evenly over the workers (`spread_connections`), so with several workers the session check of
  most of them crosses processes, as behind a load balancer.
- uvicorn 0.54's `--workers` leaves Nagle's algorithm on (uvicorn issue #3149): each keep-alive
  answer after the first waits about 44 ms for the client's delayed ACK. The two-worker servers
  are run by `uvicorn_tcp.py`, which marks the listening socket as TCP as the pending fix does;
  a last probe measures the release as it is.
- The client runs on the same cores as the servers: on 2 cores, two workers cannot double
  throughput.
- uvicorn runs h11 on asyncio, named explicitly (`_http.uvicorn_process`), even where httptools
  and uvloop are installed (the `bench` extra).
- Every loop is bounded by a count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Final

from _http import (
    DEFAULT_STACK,
    HOST,
    BenchmarkError,
    Connection,
    Process,
    http_request,
    send_batch,
    spread_connections,
    uvicorn_process,
)
from _redis import ClusterNodes, cluster_processes, redis_binary, redis_process, redis_round_trips, redis_versions
from tool_call_vs_rest import (
    APP_FACTORY,
    GET_ARGUMENTS,
    GET_TARGET,
    POST_ARGUMENTS,
    mcp_request,
    open_session,
    percentile,
    stateless_call,
    versions,
)

SECRET_ENV: Final = "FASTAPI_MCP_ROUTES_SECRET"  # the library's own variable
REDIS_URL_ENV: Final = "FMR_BENCH_REDIS_URL"  # read by bench_app.create_app
START_TIMEOUT_S: Final = 60.0
BATCH_TIMEOUT_S: Final = 120.0
HERE: Final = Path(__file__).resolve().parent


# -- the servers ------------------------------------------------------------------------------


NO_STORE: Final = ""
REDIS: Final = "Redis"
CLUSTER: Final = "Cluster"


@dataclass(frozen=True, slots=True)
class Deployment:
    label: str
    workers: int
    shared_secret: bool
    store: str  # NO_STORE, REDIS or CLUSTER

    @property
    def redis(self) -> bool:
        return self.store != NO_STORE


ONE_PROCESS: Final = Deployment("one process", 1, shared_secret=False, store=NO_STORE)
SECRET_ONLY: Final = Deployment("2 workers, secret", 2, shared_secret=True, store=NO_STORE)
WITH_REDIS: Final = Deployment("2 workers, secret + Redis", 2, shared_secret=True, store=REDIS)
WITH_CLUSTER: Final = Deployment("2 workers, secret + Cluster", 2, shared_secret=True, store=CLUSTER)
DEPLOYMENTS: Final = (
    ONE_PROCESS,
    SECRET_ONLY,
    WITH_REDIS,
    WITH_CLUSTER,
    Deployment("4 workers, secret + Redis", 4, shared_secret=True, store=REDIS),
    Deployment("4 workers, secret + Cluster", 4, shared_secret=True, store=CLUSTER),
)
Stores = dict[str, Process | ClusterNodes]  # by kind, REDIS and CLUSTER


def store_url(store: Process | ClusterNodes) -> str:
    return store.url if isinstance(store, ClusterNodes) else f"redis://{HOST}:{store.port}/0"


@contextmanager
def running_servers(stores: Stores, secret: str) -> Iterator[list[tuple[Deployment, Process]]]:
    """Start every deployment's server (in parallel), wait until each listens, stop them all."""
    with ExitStack() as stack:
        started = []
        for deployment in DEPLOYMENTS:
            env = {SECRET_ENV: secret} if deployment.shared_secret else {}
            env |= {REDIS_URL_ENV: store_url(stores[deployment.store])} if deployment.redis else {}
            server = uvicorn_process(sys.executable, APP_FACTORY, HERE, env, deployment.label, deployment.workers)
            started.append((deployment, stack.enter_context(server)))
        deadline = time.monotonic() + START_TIMEOUT_S
        for _, process in started:
            process.wait_listening(deadline)
        yield started


@dataclass(frozen=True, slots=True)
class Server:
    """A running deployment, with its session and its connections."""

    deployment: Deployment
    process: Process
    redis: Process | ClusterNodes | None  # the Redis its state lives in
    session_id: str
    connections: tuple[Connection, ...]  # alternating between workers; [0] opened the session
    split: tuple[int, ...]  # connections per worker

    @property
    def port(self) -> int:
        return self.process.port


async def prepare(deployment: Deployment, process: Process, stores: Stores, clients: int) -> Server:
    """Spread the connections, open a session on the first, and check the tool calls' answers."""
    probe = http_request(process.port, "GET", GET_TARGET)
    connections, split = await spread_connections(process, deployment.workers, clients, probe, START_TIMEOUT_S)
    session_id = await open_session(connections[0], process.port)
    store = stores[deployment.store] if deployment.redis else None
    server = Server(deployment, process, store, session_id, tuple(connections), tuple(split))
    await verify(server)
    return server


async def verify(server: Server) -> None:
    """A tool call's structuredContent must equal the REST JSON, for GET and for POST, on the
    session's own connection and (with two workers) on one the other worker holds."""
    for connection in server.connections[: server.deployment.workers]:
        for kind, rest_kind in ((GET_TOOL, GET_REST), (POST_TOOL, POST_REST), (GET_STATELESS, GET_REST)):
            rest = await connection.send(rest_kind.request(server))
            tool = await connection.send(kind.request(server))
            result = tool.json().get("result", {})
            if rest.status != rest_kind.status or result.get("structuredContent") != rest.json():
                raise BenchmarkError(
                    f"{kind.label} on {server.deployment.label}: the tool call answered {tool.body[:200]!r}, "
                    f"REST {rest.body[:200]!r}"
                )


# -- what is measured -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Kind:
    """What an arm sends: a REST request, or a tool call and the REST request it is compared to."""

    label: str
    request: Callable[[Server], bytes]
    status: int = 200
    rest: Kind | None = None


def _get_rest(server: Server) -> bytes:
    return http_request(server.port, "GET", GET_TARGET)


def _post_rest(server: Server) -> bytes:
    return http_request(server.port, "POST", "/items", body=POST_ARGUMENTS)


def _get_tool(server: Server) -> bytes:
    call = {"name": "get_item", "arguments": GET_ARGUMENTS}
    return mcp_request(server.port, server.session_id, "tools/call", call)


def _post_tool(server: Server) -> bytes:
    call = {"name": "create_item", "arguments": POST_ARGUMENTS}
    return mcp_request(server.port, server.session_id, "tools/call", call)


def _get_stateless(server: Server) -> bytes:
    return stateless_call(server.port, "get_item", GET_ARGUMENTS)


GET_REST: Final = Kind("GET REST", _get_rest)
POST_REST: Final = Kind("POST REST", _post_rest, 201)
GET_TOOL: Final = Kind("get_item tool (session)", _get_tool, rest=GET_REST)
POST_TOOL: Final = Kind("create_item tool (session)", _post_tool, rest=POST_REST)
GET_STATELESS: Final = Kind("get_item tool (2026-07-28, no session)", _get_stateless, rest=GET_REST)


@dataclass(frozen=True, slots=True)
class Round:
    """What one arm took in one round."""

    p50_us: float
    per_second: float
    cpu_s: float  # the server's, every process
    redis_cpu_s: float
    redis_round_trips: int


@dataclass(slots=True)
class Tally:
    rounds: list[Round] = field(default_factory=list)
    latencies_ns: list[int] = field(default_factory=list)
    requests: int = 0

    def cpu_us(self, with_redis: bool = False) -> float:
        """Server CPU per request, pooled over all rounds (and Redis's, if asked)."""
        cpu = sum(r.cpu_s + (r.redis_cpu_s if with_redis else 0.0) for r in self.rounds)
        return cpu / self.requests * 1e6

    def redis_us(self) -> float:
        return sum(r.redis_cpu_s for r in self.rounds) / self.requests * 1e6

    def redis_per_request(self) -> float:
        return sum(r.redis_round_trips for r in self.rounds) / self.requests


@dataclass(frozen=True, slots=True)
class Table:
    """Every kind on every server, `clients` connections sharing `count` requests per round."""

    title: str
    clients: int
    count: int
    kinds: tuple[Kind, ...]


Key = tuple[str, Kind, Deployment]  # a table's title, what is sent, where


async def run_batch(kind: Kind, server: Server, table: Table, count: int, tally: Tally | None) -> None:
    connections = server.connections[: table.clients]
    requests = [kind.request(server)] * len(connections)
    redis = server.redis
    redis_before = (redis.cpu_seconds(), redis_round_trips(redis)) if redis else (0.0, 0)
    label = f"{kind.label} on {server.deployment.label}"
    batch = await send_batch(server.process, connections, requests, count, kind.status, label, BATCH_TIMEOUT_S)
    redis_after = (redis.cpu_seconds(), redis_round_trips(redis)) if redis else (0.0, 0)
    if tally is None:
        return
    p50 = statistics.median(batch.latencies_ns) / 1000
    redis_cpu, trips = (after - before for after, before in zip(redis_after, redis_before, strict=True))
    tally.rounds.append(Round(p50, count / batch.elapsed_s, batch.cpu_s, redis_cpu, int(trips)))
    tally.latencies_ns += batch.latencies_ns
    tally.requests += count


async def run_rounds(tables: Sequence[Table], servers: Sequence[Server], rounds: int, warmup: int) -> dict[Key, Tally]:
    """Warm every arm up, then run every table's arms once per round, in flipping order."""
    tallies: dict[Key, Tally] = {}
    for table in tables:
        for kind in table.kinds:
            for server in servers:
                await run_batch(kind, server, table, max(warmup, table.clients), None)
    for index in range(rounds):
        for table in tables:
            arms = [(kind, server) for kind in table.kinds for server in servers]
            for kind, server in arms if index % 2 == 0 else reversed(arms):
                tally = tallies.setdefault((table.title, kind, server.deployment), Tally())
                await run_batch(kind, server, table, table.count, tally)
    return tallies


def build_tables(options: argparse.Namespace) -> tuple[Table, Table]:
    sequential = (GET_REST, GET_TOOL, GET_STATELESS, POST_REST, POST_TOOL)
    concurrent = (GET_REST, GET_TOOL, POST_REST, POST_TOOL)
    return (
        Table("Sequential, 1 connection", 1, options.requests, sequential),
        Table(f"{options.clients} connections", options.clients, options.requests, concurrent),
    )


@dataclass(frozen=True, slots=True)
class Results:
    servers: list[Server]
    idle: dict[str, float]  # % of one core, by deployment (and "Redis")
    tallies: dict[Key, Tally]


async def measure(
    started: Sequence[tuple[Deployment, Process]], stores: Stores, tables: Sequence[Table], options: argparse.Namespace
) -> Results:
    servers = [await prepare(deployment, process, stores, options.clients) for deployment, process in started]
    try:
        idle = await idle_cpu(servers, stores, options.idle_seconds)
        return Results(servers, idle, await run_rounds(tables, servers, options.rounds, options.warmup))
    finally:
        for server in servers:
            for connection in server.connections:
                connection.close()


async def idle_cpu(servers: Sequence[Server], stores: Stores, seconds: float) -> dict[str, float]:
    """Each server's CPU (and each Redis's) while nothing is sent, its session and connections open."""
    meters: dict[str, Process | ClusterNodes] = {s.deployment.label: s.process for s in servers}
    meters |= stores
    before = {label: process.cpu_seconds() for label, process in meters.items()}
    await asyncio.sleep(seconds)
    return {label: 100 * (process.cpu_seconds() - before[label]) / seconds for label, process in meters.items()}


async def as_released_p50(process: Process, requests: int) -> float:
    """The p50 of sequential REST GETs over one keep-alive connection, in µs."""
    connection = await Connection.open(process.port)
    try:
        probe = http_request(process.port, "GET", GET_TARGET)
        batch = await send_batch(process, [connection], [probe], requests, 200, process.label, BATCH_TIMEOUT_S)
    finally:
        connection.close()
    return statistics.median(batch.latencies_ns) / 1000


def measure_as_released(secret: str, requests: int) -> float:
    """Two workers run by uvicorn as released (no TCP_NODELAY on their connections)."""
    label = "2 workers, uvicorn as released"
    env = {SECRET_ENV: secret}
    with uvicorn_process(sys.executable, APP_FACTORY, HERE, env, label, workers=2, tcp_nodelay=False) as process:
        process.wait_listening(time.monotonic() + START_TIMEOUT_S)
        return asyncio.run(as_released_p50(process, requests))


# -- the report ------------------------------------------------------------------------------


def median_ratio(a: Tally, b: Tally, value: Callable[[Round], float]) -> float | None:
    """The median over rounds of b's value over a's: arms of one round ran back to back."""
    ratios = [value(rb) / value(ra) for ra, rb in zip(a.rounds, b.rounds, strict=True) if value(ra) > 0]
    return statistics.median(ratios) if ratios else None


def times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


_cpu, _p50, _rate = attrgetter("cpu_s"), attrgetter("p50_us"), attrgetter("per_second")


def _cpu_with_redis(r: Round) -> float:
    return r.cpu_s + r.redis_cpu_s


STORED: Final = (WITH_REDIS, WITH_CLUSTER)  # whose store's own CPU and round trips are shown


def render_table(table: Table, tallies: dict[Key, Tally]) -> list[str]:
    """Each kind's figures on every deployment; the stores' own CPU and round trips (two
    workers' worth) in the last column."""
    lines = [
        f"| {table.title} | {' | '.join(d.label for d in DEPLOYMENTS)} | store, 2 workers: CPU, round trips / req |",
        "|---|" + "--:|" * (len(DEPLOYMENTS) + 1),
    ]
    first = DEPLOYMENTS[0]
    for kind in table.kinds:
        tally = {d: tallies[(table.title, kind, d)] for d in DEPLOYMENTS}
        if table.clients == 1:
            cells = [f"{statistics.median(map(_p50, tally[d].rounds)):,.0f} µs" for d in DEPLOYMENTS]
            lines.append(f"| {kind.label}: p50 latency | {' | '.join(cells)} |  |")
        else:
            cells = [f"{statistics.median(map(_rate, tally[d].rounds)):,.0f} req/s" for d in DEPLOYMENTS]
            cells[1:] = [
                f"{cell} ({times(median_ratio(tally[first], tally[d], _rate))})"
                for cell, d in zip(cells[1:], DEPLOYMENTS[1:], strict=True)
            ]
            lines.append(f"| {kind.label}: throughput | {' | '.join(cells)} |  |")
        cells = [f"{tally[d].cpu_us():,.0f} µs" for d in DEPLOYMENTS]
        redis_cell = "; ".join(
            f"{d.store} {tally[d].redis_us():,.1f} µs, {tally[d].redis_per_request():.2f}" for d in STORED
        )
        lines.append(f"| {kind.label}: server CPU / request | {' | '.join(cells)} | {redis_cell} |")
        if kind.rest is not None:
            rest = {d: tallies[(table.title, kind.rest, d)] for d in DEPLOYMENTS}
            cells = [times(median_ratio(rest[d], tally[d], _cpu)) for d in DEPLOYMENTS]
            lines.append(f"| {kind.label}: server CPU vs {kind.rest.label} | {' | '.join(cells)} |  |")
            if table.clients == 1:
                cells = [times(median_ratio(rest[d], tally[d], _p50)) for d in DEPLOYMENTS]
                lines.append(f"| {kind.label}: p50 vs {kind.rest.label} | {' | '.join(cells)} |  |")
    return lines


def render_headline(tables: Sequence[Table], tallies: dict[Key, Tally]) -> list[str]:
    """What a store adds: two workers with Redis, and with a Redis Cluster, over two workers with
    the secret only (and over one process), for each tool call and, as a reference, REST."""
    lines = [
        "| request | server CPU, + Redis / secret only | server CPU, + Cluster / secret only "
        "| the same, counting the store's own CPU (Redis; Cluster) | server CPU, + Redis / one process "
        "| p50, + Redis; + Cluster / secret only |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for table in tables:
        for kind in (k for k in table.kinds if k.rest is not None or k is GET_REST):
            a, c = (tallies[(table.title, kind, d)] for d in (SECRET_ONLY, ONE_PROCESS))
            stored = [tallies[(table.title, kind, d)] for d in STORED]
            cells = [f"{times(median_ratio(a, b, _cpu))} (pooled {times(b.cpu_us() / a.cpu_us())})" for b in stored]
            cells.append("; ".join(times(median_ratio(a, b, _cpu_with_redis)) for b in stored))
            cells.append(f"{times(median_ratio(c, stored[0], _cpu))} (pooled {times(stored[0].cpu_us() / c.cpu_us())})")
            cells.append("; ".join(times(median_ratio(a, b, _p50)) for b in stored) if table.clients == 1 else "")
            lines.append(f"| {kind.label}, {table.title.lower()} | {' | '.join(cells)} |")
    return lines


def verdict(table: Table, tallies: dict[Key, Tally]) -> str:
    """The issue's target, read from the sequential session-era tool calls, on either store."""
    added = [
        median_ratio(tallies[(table.title, kind, SECRET_ONLY)], tallies[(table.title, kind, stored)], _cpu)
        for kind in (GET_TOOL, POST_TOOL)
        for stored in STORED
    ]
    worst = max((value for value in added if value is not None), default=None)
    target = "Target (Redis or a Redis Cluster adds at most 10% server CPU to a tool call in a live session)"
    if worst is None:
        return f"{target}: not measured."
    met = "met" if worst <= 1.10 else "not met"
    return f"{target}: {met}, +{worst - 1:.0%} at worst."


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, help="measured rounds (default 9; 2 with --quick)")
    parser.add_argument("--requests", type=int, help="requests per arm per round (default 2000; 64 with --quick)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per arm (default 300; 20 with --quick)")
    parser.add_argument("--clients", type=int, default=16, help="connections of the throughput table (default 16)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    quick = options.quick
    options.rounds = options.rounds if options.rounds is not None else (2 if quick else 9)
    options.requests = options.requests if options.requests is not None else (64 if quick else 2000)
    options.warmup = options.warmup if options.warmup is not None else (20 if quick else 300)
    options.idle_seconds = 1.0 if quick else 5.0
    options.as_released_requests = 5 if quick else 25  # each about 44 ms
    if options.rounds < 1 or options.warmup < 0 or options.clients < 2:
        parser.error("--rounds must be at least 1, --warmup at least 0, --clients at least 2")
    if options.requests < options.clients:
        parser.error(f"--requests must be at least --clients ({options.clients})")
    return options


def render(
    results: Results, tables: Sequence[Table], options: argparse.Namespace, as_released_us: float
) -> Iterator[str]:
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(options.argv)])
    splits = "; ".join(f"{s.deployment.label} {'/'.join(map(str, s.split))}" for s in results.servers)
    yield (
        f"`{command}`: {options.rounds} rounds x {options.requests} requests per arm and round; "
        f"uvicorn {DEFAULT_STACK}."
    )
    yield (
        f"The {options.clients} connections per server, by worker: {splits}. The client shares the machine's "
        f"{os.cpu_count()} cores with the servers and Redis, so two workers cannot double throughput."
    )
    yield (
        "p50 and throughput: median over rounds; ratios: median of the per-round ratios. Server CPU: utime+stime "
        "of uvicorn and every process under it, pooled over rounds. Redis: its own CPU, and the round trips it "
        "served (scripts, publishes), per request.\n"
    )
    sequential = tables[0]
    yield verdict(sequential, results.tallies) + "\n"
    yield "### What a store adds\n"
    yield from render_headline(tables, results.tallies)
    for table in tables:
        yield f"\n### {table.title}\n"
        yield from render_table(table, results.tallies)
    idle = ", ".join(f"{label} {value:.1f}%" for label, value in results.idle.items())
    yield f"\nIdle CPU ({options.idle_seconds:g} s, sessions and connections open), % of one core: {idle}."
    tallies = {d: results.tallies[(sequential.title, GET_TOOL, d)] for d in DEPLOYMENTS}
    p99 = ", ".join(f"{d.label} {percentile(t.latencies_ns, 0.99) / 1000:,.0f} µs" for d, t in tallies.items())
    yield f"get_item tool (session), sequential, p99: {p99}."
    one = statistics.median(map(_p50, results.tallies[(sequential.title, GET_REST, DEPLOYMENTS[0])].rounds))
    yield (
        f"uvicorn as released, 2 workers (no TCP_NODELAY, uvicorn#3149): GET REST p50 {as_released_us:,.0f} µs "
        f"over {options.as_released_requests} sequential requests, against {one:,.0f} µs for one process above."
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    options.argv = list(argv if argv is not None else sys.argv[1:])
    started = time.monotonic()
    measured = versions()  # before the servers import the library, which may change under a long run
    # The one-process server gets a random secret and a memory store, whatever our environment says.
    for variable in (SECRET_ENV, REDIS_URL_ENV):
        os.environ.pop(variable, None)
    tables = build_tables(options)
    secret = secrets.token_urlsafe(32)
    try:
        binary = redis_binary()
        measured += f"; {redis_versions(binary)}"
        with redis_process(binary) as redis, cluster_processes(binary) as cluster:
            stores: Stores = {REDIS: redis, CLUSTER: cluster}
            with running_servers(stores, secret) as running:
                results = asyncio.run(measure(running, stores, tables, options))
        as_released_us = measure_as_released(secret, options.as_released_requests)
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("\n".join(render(results, tables, options, as_released_us)))
    print(measured)
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
