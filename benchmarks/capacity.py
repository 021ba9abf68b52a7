"""What the state of the endpoint costs one Redis: memory per record, commands per request, and
what one primary serves at those rates.

    .venv/bin/python benchmarks/capacity.py            # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/capacity.py --quick    # a smoke run, seconds

One uvicorn worker serves `capacity_app` with its state in a redis-server of the script's own
(`_redis.py`), and the script drives it over HTTP as clients would, one flow after the other:

- memory: `INFO memory` used_memory before and after opening `--sessions` sessions, issuing
  confirmation tokens, streaming calls whose events are kept for resumption, and running
  `--tasks` tasks to their kept result; each delta over what was added;
- commands: `INFO commandstats` before and after each flow, per request: what clients sent
  (scripts by their digest, a publish among them: each a round trip) and the commands the scripts ran
  inside, with the server time Redis spent on them (`usec`, the scripts' time including their
  commands); and Redis's own CPU (utime + stime from /proc, which counts reading and writing the
  sockets too);
- capacity: what one primary serves at those rates, assuming one core for Redis's command
  thread, and memory at used_memory (before fragmentation and copy-on-write headroom).

Deliberate choices:
- A busy session is one whose record the worker checked within the last second
  (server/sessions/manager.py `RECHECK_S`): its calls skip the session check. A quiet session
  is one called once, over a second after it opened: its call pays the check (`find_session`).
- The flows run sequentially or a few at once, so the figures are the work of each request,
  not of contention; the background work of the idle server (leases, sweeps) is measured
  first and shown apart.
- Each flow's answers are checked (a result, the token, the task's result), so a refusal is a
  failure, not a cheap request.
- Every loop is bounded by a count, and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import secrets
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import redis
from _http import DEFAULT_STACK, HOST, BenchmarkError, Process, uvicorn_process
from _redis import redis_binary, redis_process, redis_versions
from capacity_app import REDIS_URL_ENV, STEP_EVENTS

HERE: Final = Path(__file__).resolve().parent
APP_FACTORY: Final = "capacity_app:create_app"
SECRET_ENV: Final = "FASTAPI_MCP_ROUTES_SECRET"
START_TIMEOUT_S: Final = 60.0
REQUEST_TIMEOUT_S: Final = 30.0
IDLE_S: Final = 3.0  # how long the idle server's background work is counted
SETTLE_S: Final = 1.0  # after the tasks are started, for their routes to end before the count
RECHECK_S: Final = 1.0  # a session checked this long ago is checked again (sessions/manager.py)
CONCURRENCY: Final = 8  # requests at once while records are made
SESSION_VERSION: Final = "2025-11-25"
STATELESS_VERSION: Final = "2026-07-28"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
PENDING_META: Final = "fastapi-mcp-routes/pending"
ORDER: Final = {"item": "book", "quantity": 2}  # place_order's arguments
COLOUR: Final = {"colour": "teal"}  # the user's answer to `ask`
HEADERS: Final = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
# Commands a client sends (each a round trip); every other command counted ran inside a script.
SCRIPT_COMMANDS: Final = ("evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro", "script|load")
# A publish is a script (it keeps the message in its topic's log first): PUBLISH and SPUBLISH
# run inside it, and count there.
PUBSUB_COMMANDS: Final = ("subscribe", "ssubscribe", "unsubscribe", "sunsubscribe")
CONNECTION_COMMANDS: Final = ("ping", "hello", "client|setinfo", "client|setname", "select", "auth")
SENT_COMMANDS: Final = frozenset((*SCRIPT_COMMANDS, *PUBSUB_COMMANDS, *CONNECTION_COMMANDS))
# What this script itself asks Redis, left out of every count.
PROBE_COMMANDS: Final = frozenset({"info", "dbsize", "scan", "pttl"})
PRIMARY_CORE_SHARE: Final = 1.0  # Redis runs commands on one thread: one core at most


# -- Redis, as the script sees it -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Redis at one moment: memory, commands so far (calls, usec) by name, its CPU, its keys."""

    used_memory: int
    commands: Mapping[str, tuple[int, int]]
    cpu_s: float
    keys: int


class Probe:
    """Reads a Redis's INFO (a client of its own, left out of the counts)."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._client = redis.Redis(host=HOST, port=process.port, socket_timeout=REQUEST_TIMEOUT_S)

    def snapshot(self) -> Snapshot:
        memory = self._client.info("memory")
        stats = self._client.info("commandstats")
        commands = {
            name.removeprefix("cmdstat_"): (int(value["calls"]), int(value["usec"])) for name, value in stats.items()
        }
        return Snapshot(int(memory["used_memory"]), commands, self._process.cpu_seconds(), int(self._client.dbsize()))

    def keys_without_ttl(self) -> tuple[int, list[str]]:
        """How many keys Redis holds, and those with no time to live (PTTL -1)."""
        keys, without = 0, []
        for key in self._client.scan_iter(count=1000):
            keys += 1
            if self._client.pttl(key) == -1:
                without.append(key.decode(errors="replace"))
        return keys, without

    def fragmentation(self) -> float:
        return float(self._client.info("memory")["mem_fragmentation_ratio"])

    def close(self) -> None:
        self._client.close()


@dataclass(frozen=True, slots=True)
class Work:
    """What Redis did between two snapshots, for `count` requests (or records)."""

    label: str
    count: int
    memory: int  # used_memory delta, bytes
    calls: Mapping[str, int]  # by command
    usec: Mapping[str, int]
    cpu_s: float
    keys: int
    elapsed_s: float

    @classmethod
    def between(cls, label: str, count: int, before: Snapshot, after: Snapshot, elapsed_s: float) -> Work:
        calls: dict[str, int] = {}
        usec: dict[str, int] = {}
        for name, (n, us) in after.commands.items():
            if name in PROBE_COMMANDS:
                continue
            was_n, was_us = before.commands.get(name, (0, 0))
            if n > was_n:
                calls[name], usec[name] = n - was_n, us - was_us
        return cls(
            label,
            count,
            after.used_memory - before.used_memory,
            calls,
            usec,
            after.cpu_s - before.cpu_s,
            after.keys - before.keys,
            elapsed_s,
        )

    def sent(self) -> dict[str, float]:
        """Commands clients sent, per request."""
        return {name: n / self.count for name, n in self.calls.items() if name in SENT_COMMANDS}

    def inside(self) -> float:
        """Commands scripts ran, per request."""
        return sum(n for name, n in self.calls.items() if name not in SENT_COMMANDS) / self.count

    def round_trips(self) -> float:
        return sum(self.sent().values())

    def server_us(self) -> float:
        """Redis's command time per request (commandstats): scripts with what they run, publishes."""
        return sum(us for name, us in self.usec.items() if name in SENT_COMMANDS) / self.count

    def cpu_us(self) -> float:
        """Redis's whole CPU per request (/proc), sockets included."""
        return self.cpu_s / self.count * 1e6


@contextmanager
def measured(probe: Probe, label: str, count: int, into: list[Work]) -> Iterator[None]:
    """Count what Redis does while the block runs, as the work of `count` requests."""
    before, started = probe.snapshot(), time.monotonic()
    yield
    into.append(Work.between(label, count, before, probe.snapshot(), time.monotonic() - started))


# -- the clients ------------------------------------------------------------------------------


def rpc(method: str, params: Mapping[str, Any], request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": dict(params)}
    if request_id is not None:
        message["id"] = request_id
    return message


def answer_of(response: httpx.Response, what: str) -> dict[str, Any]:
    """The JSON-RPC answer of a response (JSON, or the last SSE message); `BenchmarkError` for a
    refusal or an error."""
    if response.status_code != 200:
        raise BenchmarkError(f"{what}: {response.status_code} {response.text[:300]}")
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: {")]
        if not datas:
            raise BenchmarkError(f"{what}: an SSE answer with no message")
        message: dict[str, Any] = json.loads(datas[-1])
    else:
        message = response.json()
    if "error" in message:
        raise BenchmarkError(f"{what}: {message['error']}")
    return message


async def open_session(http: httpx.AsyncClient, capabilities: Mapping[str, Any] | None = None) -> dict[str, str]:
    """A 2025-11-25 session; the headers its requests carry."""
    params = {
        "protocolVersion": SESSION_VERSION,
        "capabilities": dict(capabilities or {}),
        "clientInfo": {"name": "capacity", "version": "1"},
    }
    headers = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
    response = await http.post("/mcp", json=rpc("initialize", params, 0), headers=headers)
    answer_of(response, "initialize")
    return {**headers, "mcp-session-id": response.headers["mcp-session-id"]}


async def read_note(http: httpx.AsyncClient, headers: Mapping[str, str], note_id: int) -> None:
    response = await http.post(
        "/mcp", json=rpc("tools/call", {"name": "read_note", "arguments": {"note_id": note_id}}), headers=dict(headers)
    )
    result = answer_of(response, "read_note")["result"]
    if result.get("structuredContent", {}).get("id") != note_id:
        raise BenchmarkError(f"read_note answered {result}")


async def order_token(http: httpx.AsyncClient, headers: Mapping[str, str]) -> str:
    """A mutation's first call, from a client that cannot ask its user: the token it is given."""
    response = await http.post(
        "/mcp", json=rpc("tools/call", {"name": "place_order", "arguments": ORDER}), headers=dict(headers)
    )
    result = answer_of(response, "place_order")["result"]
    token = result.get("_meta", {}).get(PENDING_META, {}).get("token")
    if not isinstance(token, str):
        raise BenchmarkError(f"place_order gave no confirmation token: {result}")
    return token


async def confirm_order(http: httpx.AsyncClient, headers: Mapping[str, str], token: str) -> None:
    arguments = {**ORDER, "confirmationToken": token}
    response = await http.post(
        "/mcp", json=rpc("tools/call", {"name": "place_order", "arguments": arguments}), headers=dict(headers)
    )
    result = answer_of(response, "place_order, confirmed")["result"]
    if result.get("isError") or result.get("structuredContent") != ORDER:
        raise BenchmarkError(f"the confirmed place_order answered {result}")


async def streamed_steps(http: httpx.AsyncClient, headers: Mapping[str, str], token: int) -> tuple[int, int]:
    """A call that streams `STEP_EVENTS` progress events; how many events with an id it carried
    (each kept for resumption), and their bytes as sent."""
    params = {"name": "steps", "arguments": {}, "_meta": {"progressToken": token}}
    response = await http.post("/mcp", json=rpc("tools/call", params), headers=dict(headers))
    answer = answer_of(response, "steps")
    if answer["result"].get("structuredContent") != {"steps": STEP_EVENTS}:
        raise BenchmarkError(f"steps answered {answer}")
    kept = [event for event in response.text.split("\n\n") if event.startswith("id: ") or "\nid: " in event]
    return len(kept), sum(len(event.encode()) + 2 for event in kept)


async def answered_question(http: httpx.AsyncClient, headers: Mapping[str, str], request_id: int) -> None:
    """A call that asks the user one question (elicitation), answered by the client's next POST."""
    call = rpc("tools/call", {"name": "ask", "arguments": {}}, request_id)
    async with http.stream("POST", "/mcp", json=call, headers=dict(headers)) as stream:
        if stream.status_code != 200:
            raise BenchmarkError(f"ask: {stream.status_code}")
        messages: list[dict[str, Any]] = []
        async for line in stream.aiter_lines():
            if not line.startswith("data: {"):
                continue
            message = json.loads(line[len("data: ") :])
            messages.append(message)
            if message.get("method") == "elicitation/create":
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept", "content": COLOUR}}
                answered = await http.post("/mcp", json=reply, headers=dict(headers))
                if answered.status_code != 202:
                    raise BenchmarkError(f"the answer to the question: {answered.status_code} {answered.text[:300]}")
    final = messages[-1] if messages else {}
    if final.get("result", {}).get("structuredContent", {}).get("content") != COLOUR:
        raise BenchmarkError(f"ask ended with {messages}")


TASK_META: Final = {
    "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "capacity", "version": "1"},
}


async def stateless(http: httpx.AsyncClient, method: str, params: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A 2026-07-28 request with its routing headers; its result."""
    headers = {**HEADERS, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method, "mcp-name": name}
    response = await http.post("/mcp", json=rpc(method, {**params, "_meta": TASK_META}), headers=headers)
    result: dict[str, Any] = answer_of(response, method)["result"]
    return result


async def start_task(http: httpx.AsyncClient, n: int) -> str:
    created = await stateless(http, "tools/call", {"name": "compute", "arguments": {"n": n}}, "compute")
    if created.get("resultType") != "task":
        raise BenchmarkError(f"compute did not become a task: {created}")
    task_id: str = created["taskId"]
    return task_id


async def poll_task(http: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    return await stateless(http, "tasks/get", {"taskId": task_id}, task_id)


async def at_most(concurrency: int, jobs: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run the jobs, `concurrency` at a time; their results in order."""
    results: list[Any] = [None] * len(jobs)
    cursor = iter(range(len(jobs)))

    async def worker() -> None:
        for index in cursor:
            results[index] = await jobs[index]()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


# -- the flows --------------------------------------------------------------------------------


@dataclass(slots=True)
class Measured:
    """Every flow's work, and what the capacity figures need."""

    idle: Work | None = None
    memory: list[Work] = field(default_factory=list)  # records kept
    requests: list[Work] = field(default_factory=list)  # commands per request
    fragmentation: float = 0.0
    keys: int = 0  # held at the end, each checked for a time to live
    event_bytes: float = 0.0  # a kept stream event's, as sent


async def measure(redis_process_: Process, server: Process, options: argparse.Namespace) -> Measured:
    probe = Probe(redis_process_)
    found = Measured()
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    base = f"http://{HOST}:{server.port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=REQUEST_TIMEOUT_S, limits=limits) as http:
            await warm_up(http)
            before = probe.snapshot()
            await asyncio.sleep(IDLE_S)  # not synchronisation: the span the idle work is counted over
            found.idle = Work.between("idle server, per second", round(IDLE_S), before, probe.snapshot(), IDLE_S)
            await measure_sessions(http, probe, options, found)
            await measure_tasks(http, probe, options, found)
        found.fragmentation = probe.fragmentation()
        found.keys, without = probe.keys_without_ttl()
        if without:
            raise BenchmarkError(f"{len(without)} of {found.keys} keys have no time to live: {without[:10]}")
    finally:
        probe.close()
    return found


async def warm_up(http: httpx.AsyncClient) -> None:
    """Every flow once, so each script is loaded and every connection made before counting."""
    headers = await open_session(http)
    await read_note(http, headers, 1)
    await confirm_order(http, headers, await order_token(http, headers))
    await streamed_steps(http, headers, 1)
    asking = await open_session(http, {"elicitation": {}})
    await answered_question(http, asking, 2)
    task_id = await start_task(http, 1)
    await poll_task(http, task_id)


async def measure_sessions(http: httpx.AsyncClient, probe: Probe, options: argparse.Namespace, found: Measured) -> None:
    count = options.sessions
    with measured(probe, "session (initialize)", count, found.memory):
        opened: list[dict[str, str]] = await at_most(
            CONCURRENCY, [functools.partial(open_session, http) for _ in range(count)]
        )
    found.requests.append(found.memory[-1])
    busy = opened[0]
    calls = options.calls
    await read_note(http, busy, 0)  # checked now: its calls below skip the check
    with measured(probe, "tool call, busy session", calls, found.requests):
        for index in range(calls):
            await read_note(http, busy, index)
    # The sessions opened first, each called once: none was checked in the last second.
    oldest = opened[1 : 1 + calls]
    await asyncio.sleep(RECHECK_S)  # not synchronisation: the quiet sessions' checks lapse
    with measured(probe, "tool call, quiet session", len(oldest), found.requests):
        for index, headers in enumerate(oldest):
            await read_note(http, headers, index)

    tokens = options.tokens
    await read_note(http, busy, 0)
    with measured(probe, "confirmation token (issued)", tokens, found.memory):
        issued = [await order_token(http, busy) for _ in range(tokens)]
    found.requests.append(found.memory[-1])
    redeemed = issued[: options.calls // 4]
    with measured(probe, "mutation confirmed with its token", len(redeemed), found.requests):
        for token in redeemed:
            await confirm_order(http, busy, token)

    # Streams in sessions of their own, a few calls each (fewer than Limits.max_kept_streams).
    streaming = opened[1 + calls : 1 + calls + options.streams // STREAMS_PER_SESSION]
    events = event_bytes = 0
    with measured(probe, "kept stream event", 1, found.memory):
        for index, headers in enumerate(streaming):
            for call in range(STREAMS_PER_SESSION):
                carried, size = await streamed_steps(http, headers, index * STREAMS_PER_SESSION + call)
                events, event_bytes = events + carried, event_bytes + size
    found.event_bytes = event_bytes / max(1, events)
    kept = found.memory.pop()
    found.memory.append(_per(kept, events, "kept stream event"))
    found.requests.append(_per(kept, len(streaming) * STREAMS_PER_SESSION, f"streamed call ({STEP_EVENTS} events)"))

    asking = await open_session(http, {"elicitation": {}})
    await answered_question(http, asking, 1)
    with measured(probe, "question asked and answered (a call)", options.questions, found.requests):
        for index in range(options.questions):
            await answered_question(http, asking, 10 + index)


STREAMS_PER_SESSION: Final = 5


def _per(work: Work, count: int, label: str) -> Work:
    """The same work, counted per `count` of something else."""
    return Work(label, count, work.memory, work.calls, work.usec, work.cpu_s, work.keys, work.elapsed_s)


async def measure_tasks(http: httpx.AsyncClient, probe: Probe, options: argparse.Namespace, found: Measured) -> None:
    count = options.tasks
    before = probe.snapshot()
    started = time.monotonic()
    ids: list[str] = await at_most(CONCURRENCY, [functools.partial(start_task, http, n) for n in range(count)])
    await asyncio.sleep(SETTLE_S)  # not synchronisation: the routes end right after they start
    after = probe.snapshot()
    found.requests.append(
        Work.between("task (call, run, result kept)", count, before, after, time.monotonic() - started)
    )
    with measured(probe, "task poll (tasks/get, completed)", count, found.requests):
        polled = [await poll_task(http, task_id) for task_id in ids]
    unfinished = [task for task in polled if task.get("status") != "completed"]
    if unfinished:
        raise BenchmarkError(
            f"{len(unfinished)} tasks had not completed {SETTLE_S} s after they started: {unfinished[0]}"
        )
    wrong = [
        task for task, n in zip(polled, range(count), strict=True) if task["result"]["structuredContent"]["n"] != n
    ]
    if wrong:
        raise BenchmarkError(f"a task answered another's result: {wrong[0]}")
    found.memory.append(Work.between("task with its result", count, before, probe.snapshot(), 0.0))


# -- what it means ----------------------------------------------------------------------------


def sent_text(work: Work) -> str:
    parts = [f"{name} {value:.2f}" for name, value in sorted(work.sent().items(), key=lambda item: -item[1])]
    return ", ".join(parts) or "none"


def render_memory(found: Measured) -> Iterator[str]:
    yield "| record | count | used_memory added | per record | keys added |"
    yield "|---|--:|--:|--:|--:|"
    for work in found.memory:
        per = work.memory / work.count
        yield f"| {work.label} | {work.count:,} | {work.memory / 1e6:,.2f} MB | {per:,.0f} B | {work.keys:,} |"


def render_requests(found: Measured) -> Iterator[str]:
    yield (
        "| request | count | round trips | sent, per request | commands run inside scripts | "
        "Redis command time (commandstats) | Redis CPU (/proc) |"
    )
    yield "|---|--:|--:|---|--:|--:|--:|"
    for work in found.requests:
        yield (
            f"| {work.label} | {work.count:,} | {work.round_trips():.2f} | {sent_text(work)} | "
            f"{work.inside():.1f} | {work.server_us():,.1f} µs | {work.cpu_us():,.1f} µs |"
        )


def by_label(found: Measured, label: str) -> Work:
    return next(work for work in [*found.requests, *found.memory] if work.label == label)


def render_capacity(found: Measured) -> Iterator[str]:
    """What one primary serves at the measured rates."""
    yield "| what | at Redis command time | at Redis CPU |"
    yield "|---|--:|--:|"
    for label in (
        "tool call, quiet session",
        "mutation confirmed with its token",
        "question asked and answered (a call)",
        "task poll (tasks/get, completed)",
        "task (call, run, result kept)",
        "session (initialize)",
    ):
        work = by_label(found, label)
        cells = [f"{PRIMARY_CORE_SHARE * 1e6 / us:,.0f}" if us > 0 else "-" for us in (work.server_us(), work.cpu_us())]
        yield f"| {label}, per second | {' | '.join(cells)} |"
    busy = by_label(found, "tool call, busy session")
    yield f"| tool call, busy session: round trips per call | {busy.round_trips():.3f} | |"
    for label, unit in (("session (initialize)", "sessions"), ("task with its result", "tasks")):
        work = by_label(found, label)
        yield f"| {unit} per GB of used_memory | {1e9 / (work.memory / work.count):,.0f} | |"
    events = by_label(found, "kept stream event")
    yield f"| kept stream events per GB of used_memory | {1e9 / (events.memory / events.count):,.0f} | |"


def render(found: Measured, options: argparse.Namespace, elapsed_s: float, versions: str) -> Iterator[str]:
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *options.argv])
    yield (
        f"`{command}`: one uvicorn worker ({DEFAULT_STACK}) serving capacity_app, its state in a redis-server "
        f"of its own; {versions}. {elapsed_s:.0f} s.\n"
    )
    yield "### Memory\n"
    yield from render_memory(found)
    yield (
        f"\nused_memory deltas (INFO memory), every record kept at once. A session: a client's initialize with "
        f"short client info and no capabilities. A token: a mutation with two arguments. A stream event: "
        f"{found.event_bytes:.0f} bytes as sent (progress notifications and the answer). A task: a small result. "
        f"mem_fragmentation_ratio at the end: {found.fragmentation:.2f}. Every one of the {found.keys:,} keys "
        "held at the end has a time to live (SCAN + PTTL).\n"
    )
    yield "### Commands per request\n"
    yield from render_requests(found)
    idle = found.idle
    if idle is not None:
        yield (
            f"\nIdle server, per second: {idle.round_trips():.1f} round trips ({sent_text(idle)}), "
            f"{idle.cpu_us():,.0f} µs of Redis CPU; counted in every row above as it ran."
        )
    yield (
        "Round trips: commands a client sent (scripts by digest, a publish among them). Command time: the usec Redis "
        "records for them, a script's including its commands. Redis CPU: utime + stime of redis-server, "
        "sockets and background work included.\n"
    )
    yield "### What one Redis primary serves\n"
    yield from render_capacity(found)
    yield (
        "\nAssumptions: Redis executes commands on one core, which it has to itself; the rates are for one kind "
        "of request alone (mixes add up by their cost); network and client time are not Redis's and are "
        "left out; memory is used_memory, before fragmentation and the headroom a fork for persistence needs."
    )


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, help="sessions opened (default 10,000; 600 with --quick)")
    parser.add_argument("--tasks", type=int, help="tasks run (default 1,000; 50 with --quick)")
    parser.add_argument("--calls", type=int, help="tool calls per flow (default 2,000; 100 with --quick)")
    parser.add_argument("--tokens", type=int, help="tokens issued (default 2,000; 100 with --quick)")
    parser.add_argument("--streams", type=int, help="streamed calls (default 500; 50 with --quick)")
    parser.add_argument("--questions", type=int, help="questions asked (default 200; 20 with --quick)")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    defaults = {"sessions": (10_000, 600), "tasks": (1_000, 50), "calls": (2_000, 100), "tokens": (2_000, 100)}
    defaults |= {"streams": (500, 50), "questions": (200, 20)}
    for name, (full, quick) in defaults.items():
        if getattr(options, name) is None:
            setattr(options, name, quick if options.quick else full)
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if options.sessions < 1 + options.calls + options.streams // STREAMS_PER_SESSION:
        parser.error("--sessions must cover the quiet calls and the streaming sessions: raise it")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    options.argv = list(argv if argv is not None else sys.argv[1:])
    started = time.monotonic()
    try:
        binary = redis_binary()
        versions = redis_versions(binary)
        with redis_process(binary) as redis_server:
            env = {REDIS_URL_ENV: f"redis://{HOST}:{redis_server.port}/0", SECRET_ENV: secrets.token_urlsafe(32)}
            with uvicorn_process(sys.executable, APP_FACTORY, HERE, env, "capacity") as server:
                server.wait_listening(time.monotonic() + START_TIMEOUT_S)
                found = asyncio.run(measure(redis_server, server, options))
    except (BenchmarkError, OSError, httpx.HTTPError, redis.RedisError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print("\n".join(render(found, options, time.monotonic() - started, versions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
