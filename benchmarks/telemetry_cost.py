"""What telemetry costs a tool call, against REST, on uvicorn's two stacks, in one run:

- `absent`: the OpenTelemetry API hidden, as without the `otel` extra;
- `no_sdk`: the API installed, no SDK set (the default deployment);
- `sdk`: the SDK recording every MCP span and metric point into memory;
- `http_span`: only `opentelemetry-instrumentation-fastapi`'s HTTP span, with the same SDK,
  on REST: the yardstick the `sdk` cost is held against.

    .venv/bin/python benchmarks/telemetry_cost.py            # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/telemetry_cost.py --quick    # a smoke run

Each setup is one uvicorn worker in a subprocess per stack (telemetry_app.py), pinned to the
last CPU and this client to the first where it can. Every round sends each arm's batch in an
order that rotates each round, so drift on a shared machine spreads over all arms; the figures
are medians over rounds of server CPU per request (utime + stime, the least noisy figure) and
of p50 latency. A tool call is a 2025-11-25 session's `tools/call` of `get_item`, REST the
same route's GET.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from _http import BenchmarkError, Connection, Pools, Process, http_request, send_batch, uvicorn_process
from _stacks import H11, STANDARD, Stack, check_standard_stack, choose_pinning, pin_client
from telemetry_app import SETUPS, TELEMETRY_ENV
from tool_call_vs_rest import GET_TARGET, mcp_request, open_session

HERE: Final = Path(__file__).resolve().parent
CONCURRENCY: Final = 8
TIMEOUT_S: Final = 120.0


@dataclass(frozen=True, slots=True)
class Arm:
    label: str
    setup: str
    stack: Stack
    kind: str  # "rest" or "mcp"
    request: bytes
    process: Process


@dataclass
class Figures:
    cpu_us: list[float] = field(default_factory=list)
    p50_us: list[float] = field(default_factory=list)


async def measure(arms: Sequence[Arm], rounds: int, requests: int) -> dict[Arm, Figures]:
    pools = Pools()
    figures = {arm: Figures() for arm in arms}
    try:
        for round_index in range(rounds):
            turn = round_index % len(arms)
            for arm in (*arms[turn:], *arms[:turn]):
                connections = await pools.get(arm.process, CONCURRENCY)
                batch = await send_batch(
                    arm.process, connections, [arm.request] * CONCURRENCY, requests, 200, arm.label, TIMEOUT_S
                )
                figures[arm].cpu_us.append(batch.cpu_s / requests * 1e6)
                figures[arm].p50_us.append(statistics.median(batch.latencies_ns) / 1000)
    finally:
        pools.close()
    return figures


async def session_of(process: Process) -> str:
    connection = await Connection.open(process.port)
    try:
        return await open_session(connection, process.port)
    finally:
        connection.close()


async def arms_of(servers: dict[tuple[str, Stack], Process]) -> list[Arm]:
    arms: list[Arm] = []
    for (setup, stack), process in servers.items():
        port = process.port
        arms.append(Arm(f"REST {setup}", setup, stack, "rest", http_request(port, "GET", GET_TARGET), process))
        if setup == "http_span":
            continue  # its yardstick is REST's
        session_id = await session_of(process)
        call = {"name": "get_item", "arguments": {"item_id": 1, "q": "x"}}
        request = mcp_request(port, session_id, "tools/call", call)
        arms.append(Arm(f"tools/call {setup}", setup, stack, "mcp", request, process))
    return arms


def report(arms: Sequence[Arm], figures: dict[Arm, Figures], stacks: Sequence[Stack]) -> None:
    def cpu(setup: str, stack: Stack, kind: str) -> float:
        (arm,) = [a for a in arms if a.setup == setup and a.stack == stack and a.kind == kind]
        return statistics.median(figures[arm].cpu_us)

    for stack in stacks:
        print(f"\n{stack.label}: server CPU per request (µs), p50 latency (µs), medians of rounds")
        print(f"  {'arm':<24} {'CPU µs':>8} {'p50 µs':>8}")
        for arm in (a for a in arms if a.stack == stack):
            print(
                f"  {arm.label:<24} {statistics.median(figures[arm].cpu_us):8.1f} "
                f"{statistics.median(figures[arm].p50_us):8.1f}"
            )
        today = cpu("no_sdk", stack, "mcp")
        absent = cpu("absent", stack, "mcp")
        sdk = cpu("sdk", stack, "mcp")
        rest = cpu("no_sdk", stack, "rest")
        span = cpu("http_span", stack, "rest") - rest
        print(f"  tool call / REST, no SDK: {today / rest:.3f}; absent: {absent / cpu('absent', stack, 'rest'):.3f}")
        print(f"  absent vs no SDK: {(absent / today - 1) * 100:+.1f}% of a tool call's CPU")
        print(
            f"  SDK recording: {sdk - today:+.1f} µs per tool call; the FastAPI instrumentation's HTTP span: "
            f"{span:+.1f} µs per REST request"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=1000, help="per arm and round")
    parser.add_argument("--quick", action="store_true", help="2 rounds of 200 requests")
    parser.add_argument("--no-pin", action="store_true")
    options = parser.parse_args()
    rounds, requests = (2, 200) if options.quick else (options.rounds, options.requests)
    check_standard_stack()
    pinning, pinned = choose_pinning(not options.no_pin)
    pin_client(pinning)
    stacks = (H11, STANDARD)
    print(
        f"telemetry cost: {rounds} rounds of {requests} requests per arm, {CONCURRENCY} connections; pinning: {pinned}"
    )
    with ExitStack() as stack:
        servers = {}
        for setup in SETUPS:
            for each in stacks:
                servers[(setup, each)] = stack.enter_context(
                    uvicorn_process(
                        sys.executable,
                        "telemetry_app:create_app",
                        HERE,
                        {TELEMETRY_ENV: setup},
                        f"{setup} {each.label}",
                        http=each.http,
                        loop=each.loop,
                        cpu=pinning.server_cpu if pinning is not None else None,
                    )
                )
        for process in servers.values():
            process.wait_listening(time.monotonic() + 30)
        arms = asyncio.run(arms_of(servers))
        figures = asyncio.run(measure(arms, rounds, requests))
    report(arms, figures, stacks)


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as error:
        sys.exit(f"telemetry_cost: {error}")
