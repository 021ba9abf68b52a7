"""What the security review's attacks make the server hold now, at the library's default bounds.

    .venv/bin/python benchmarks/soak.py         # every attack, about 2 minutes on 2 cores
    .venv/bin/python benchmarks/soak.py 2 4b    # only those

Each attack of the review (batch amplification, pinned questions, replay logs, token flood,
session flood, and the second round's idle streams, updates under load and task fan-out), and a
few variants of them, runs against a fresh uvicorn worker serving `soak_app.py`
(`mcp_routes(app)`, nothing tuned), at the review's scale where that fits in about a minute.
Per attack: the server's RSS before, at its peak and after, and its CPU while the attack ran;
what the attacker got, counted by refusal; a legitimate, credentialed client's latency while it
ran; and the worst ping, which says how long the event loop was held.

Deliberate choices:
- One fresh server per attack, so each RSS figure is that attack's alone. RSS is sampled from
  /proc every 50 ms in a thread. "After" is read a second after the attack's connections
  closed, so it includes what the server keeps by design (pinned calls waiting out their 300
  s, kept streams, tokens, sessions) and what the allocator keeps after freeing.
- Anonymous attackers connect from other loopback addresses (Linux routes all of 127/8 to the
  loopback device), because the server tells anonymous callers apart by address; addresses
  are free to an attacker on IPv6 too.
- The legitimate client runs in a thread with its own event loop and connection, so a busy
  attacker loop delays it little (the GIL still switches every 5 ms): a session holding an
  `x-api-key`, calling `small` then `ping` every 100 ms. Server, attackers and this client
  share the machine's cores, so a latency under load includes waiting for a CPU.
- uvicorn runs h11 on asyncio, named explicitly (`_http.uvicorn_process`), even where
  httptools and uvloop are installed (the `bench` extra).
- Every loop is bounded by a count or a deadline, every wait by a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
import os
import re
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from _http import DEFAULT_STACK, HOST, BenchmarkError, Connection, Process, Reply, http_request, uvicorn_process
from tool_call_vs_rest import versions

T = TypeVar("T")

HERE: Final = Path(__file__).resolve().parent
APP_FACTORY: Final = "soak_app:create_app"
SESSION_VERSION: Final = "2025-11-25"  # resumable streams, elicitation
BATCH_VERSION: Final = "2025-03-26"  # the only revision with batches
BOTH: Final = "application/json, text/event-stream"
SSE_ONLY: Final = "text/event-stream"  # every answer a stream, so every answer is logged
ASKING: Final[Mapping[str, Any]] = {"elicitation": {}}  # a client that can be asked to confirm
LEGIT_KEY: Final = "legit-key"
ORDER: Final[Mapping[str, Any]] = {"item": "tea"}  # the gated tool's arguments
TOKEN: Final = "confirmationToken"  # the argument that confirms a gated call
START_TIMEOUT_S: Final = 60.0
REQUEST_TIMEOUT_S: Final = 60.0  # one request: a batch answer of 18 MB included
ATTACK_TIMEOUT_S: Final = 120.0
SAMPLE_EVERY_S: Final = 0.05
PROBE_EVERY_S: Final = 0.1
SETTLE_S: Final = 1.0
# The bound a refusal names: "(Limits.max_x)", or "(the share of Limits.max_x anonymous callers may hold)".
BOUND: Final = re.compile(r"\((?:the share of )?(?:Limits|Sessions|Tasks)\.\w+[^)]{0,60}\)")
EVENT_ID: Final = re.compile(rb"^id: ([0-9]+)\.", re.MULTILINE)

# The scale of each attack: the review's, where it fits in about a minute on 2 cores.
REVIEW_BATCH: Final = 80_000  # tools/list in one batch
BATCH_OF: Final = 100  # Limits.max_batch_length
BATCH_CLIENTS: Final = 16
UNREAD_HOLD_S: Final = 3.0
LARGE_UNREAD_CLIENTS: Final = 32
QUESTION_ADDRESSES: Final = 80  # x 32 questions each (Limits.max_questions_per_caller) > 2,000
QUESTION_SESSIONS: Final = 4  # per address, x 8 questions each (per session) = 32
QUESTION_FLOOD_S: Final = 20.0
REPLAY_SESSIONS: Final = 160  # x 2 MB > Limits.max_replay_bytes (256 MiB)
REPLAY_ADDRESSES: Final = 4
REPLAY_CALLS: Final = 8  # per session: Limits.max_kept_streams, as in the review
REPLAY_WORKERS: Final = 4  # per address
TOKEN_FLOOD: Final = 20_000  # twice Limits.max_tokens
TOKEN_ADDRESSES: Final = 40
TOKEN_SESSIONS: Final = 5  # per address (or per made-up key)
SESSION_FLOOD: Final = 20_000  # twice Sessions.max_sessions
SESSION_ADDRESSES: Final = 200  # x 64 (Sessions.max_per_caller) > 10,000
LISTEN_ADDRESSES: Final = 47  # x 16 made-up keys, each a GET stream: past three quarters of Limits.max_streams
LISTEN_KEYS: Final = 16
BATCH_FLOOD_CLIENTS: Final = 40  # each from an address of its own
BATCH_FLOOD_ROUNDS: Final = 2  # batches of 100 list_notes each client reads, one after the other
SAMPLE_CLIENTS: Final = 50
SAMPLE_ADDRESSES: Final = 10
SAMPLE_MS: Final = 5000
PINNED_CALLS: Final = 10_000  # follow_notes calls, each left running by its hung-up client
PINNED_ADDRESSES: Final = 2
PINNED_SESSIONS: Final = 64  # per address: 128 in all, as in the review
PINNED_WORKERS: Final = 32  # per address: calls under way at once, about the review's rate
PINNED_WINDOW: Final[Mapping[str, Any]] = {"durationMs": 30_000}
HANG_UP_AFTER_S: Final = 0.05
SYNC_TASKS: Final = 48  # sync task calls of one address, each cancelled once it is a task
SYNC_WORKERS: Final = 8
SYNC_PROBE_S: Final = 5.0  # how long a sync REST route is timed once they are cancelled
TASKS_VERSION: Final = "2026-07-28"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
TASK_ADDRESSES: Final = 50  # x 16 made-up keys: 800 tasks of about 1 MB results
TASK_KEYS: Final = 16
LEGIT_TASKS: Final = 16  # Tasks.max_per_caller: an honest caller's every task
TASK_POLL_S: Final = 0.05
REQUEST_IDS: Final = itertools.count(1)  # a pinned call keeps its id busy: each call a new one


def attacker(n: int) -> str:
    """The n-th attacker's address, outside 127.0.0.0/24 where the legitimate client is."""
    return f"127.1.{n // 250}.{n % 250 + 1}"


# -- the client ------------------------------------------------------------------------------


def rpc(method: str, params: Mapping[str, Any] | None = None, request_id: int | None = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = dict(params)
    if request_id is not None:
        message["id"] = request_id
    return message


def call(name: str, arguments: Mapping[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": dict(arguments or {})}, request_id)


@dataclass(frozen=True, slots=True)
class Session:
    """An open session, and what its requests carry."""

    id: str
    version: str
    address: str
    key: str | None = None

    def headers(self, accept: str = BOTH) -> dict[str, str]:
        headers = {"accept": accept, "mcp-protocol-version": self.version, "mcp-session-id": self.id}
        return headers | ({"x-api-key": self.key} if self.key else {})

    def post(self, port: int, body: Any, accept: str = BOTH) -> bytes:
        return http_request(port, "POST", "/mcp", self.headers(accept), body)


class Pipe:
    """A keep-alive connection from one address; a failed request is counted in `got` and the
    connection opened again for the next."""

    def __init__(self, port: int, address: str, got: Counter[str]) -> None:
        self.port = port
        self.address = address
        self._got = got
        self._connection: Connection | None = None

    async def send(self, request: bytes) -> Reply | None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                if self._connection is None:
                    self._connection = await Connection.open(self.port, self.address)
                return await self._connection.send(request)
        except (OSError, EOFError, TimeoutError, asyncio.LimitOverrunError, BenchmarkError) as error:
            self._got[f"client errors ({type(error).__name__})"] += 1
            self.close()
            return None

    async def open_session(
        self, version: str = SESSION_VERSION, key: str | None = None, capabilities: Mapping[str, Any] | None = None
    ) -> Session | None:
        """Initialize a session (and say so); `None`, counted in `got`, when refused."""
        hello = {"protocolVersion": version, "capabilities": dict(capabilities or {}), "clientInfo": {"name": "soak"}}
        headers = {"accept": BOTH, "mcp-protocol-version": version} | ({"x-api-key": key} if key else {})
        reply = await self.send(http_request(self.port, "POST", "/mcp", headers, rpc("initialize", hello, 0)))
        if reply is None or "mcp-session-id" not in reply.headers:
            if reply is not None:
                self._got[label(reply)] += 1
            return None
        session = Session(reply.headers["mcp-session-id"], version, self.address, key)
        await self.send(session.post(self.port, rpc("notifications/initialized", request_id=None)))
        return session

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


def label(reply: Reply) -> str:
    """What an answer amounts to, for counting: a refusal by the bound it names."""
    text = reply.body[:4000].decode("utf-8", "replace")
    bound = BOUND.search(text)
    named = bound.group()[1:-1] if bound else None
    error = re.search(r'"error":\{"code":(-?[0-9]+),"message":"([^"]{0,60})', text)
    said = named or (error[2] if error else text[:60])
    if reply.status != 200:
        return f"HTTP {reply.status} ({said})"
    if '"isError":true' in text:
        return f"refused ({said})"
    return f"JSON-RPC error {error[1]} ({said})" if error else "answered"


def entry_label(entry: Mapping[str, Any]) -> str:
    result = entry.get("result")
    if result is not None and not result.get("isError"):
        return "entries answered"
    said = str(result.get("content")) if result is not None else str(entry.get("error", {}).get("message", ""))
    bound = BOUND.search(said)
    return f"entries refused ({bound.group()[1:-1] if bound else entry.get('error')})"


async def in_parallel(jobs: Iterable[Coroutine[Any, Any, None]]) -> None:
    async with asyncio.TaskGroup() as group:
        for job in jobs:
            group.create_task(job)


async def open_sessions(pipe: Pipe, count: int, **options: Any) -> list[Session]:
    sessions = [await pipe.open_session(**options) for _ in range(count)]
    return [session for session in sessions if session is not None]


# -- what each attack measures ------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """What an attack got, and what became of the legitimate caller's own state."""

    got: Counter[str] = field(default_factory=Counter)
    legit: str = ""
    cleanup: Callable[[], Awaitable[None]] | None = None  # run once RSS after is read


async def batch_amplification(port: int) -> Outcome:
    """The review's 80,000 tools/list in one batch, then the same requests in batches of the
    most allowed, on 16 connections of one anonymous 2025-03-26 session."""
    outcome = Outcome()
    got = outcome.got
    pipes = [Pipe(port, attacker(0), got) for _ in range(BATCH_CLIENTS)]
    session = await pipes[0].open_session(BATCH_VERSION)
    if session is None:
        raise BenchmarkError("the attacker could not open a 2025-03-26 session")
    whole = [rpc("tools/list", request_id=n) for n in range(REVIEW_BATCH)]
    reply = await pipes[0].send(session.post(port, whole))
    if reply is not None:
        got[f"batch of {REVIEW_BATCH:,}: {label(reply)}"] += 1
    batches = [
        [rpc("tools/list", request_id=n) for n in range(first, first + BATCH_OF)]
        for first in range(0, REVIEW_BATCH, BATCH_OF)
    ]

    async def worker(pipe: Pipe) -> None:
        while batches:
            answered = await pipe.send(session.post(port, batches.pop()))
            if answered is not None:
                got["bytes sent back in all"] += len(answered.body)
                got.update(entry_label(entry) for entry in answered.json())

    await in_parallel(worker(pipe) for pipe in pipes)
    for pipe in pipes:
        pipe.close()
    return outcome


def unread_batches(name: str, arguments: Mapping[str, Any] | None, clients: int) -> Callable[[int], Awaitable[Outcome]]:
    """Clients that POST a max-length batch and do not read the answer for a while (then read
    it, to count what it held)."""

    async def attack(port: int) -> Outcome:
        outcome = Outcome()
        got = outcome.got
        pipe = Pipe(port, attacker(0), got)
        session = await pipe.open_session(BATCH_VERSION)
        pipe.close()
        if session is None:
            raise BenchmarkError("the attacker could not open a 2025-03-26 session")
        if name == "tools/list":
            batch = [rpc("tools/list", request_id=n) for n in range(BATCH_OF)]
        else:
            batch = [call(name, arguments, n) for n in range(BATCH_OF)]
        request = session.post(port, batch)
        connections = [await Connection.open(port, attacker(0)) for _ in range(clients)]
        try:
            for connection in connections:
                connection.write(request)
            await asyncio.sleep(UNREAD_HOLD_S)  # the server has answered; nobody reads
            for connection in connections:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    reply = await connection.receive()
                got["bytes held per unread answer"] = len(reply.body)
                got.update(entry_label(entry) for entry in reply.json())
        finally:
            for connection in connections:
                connection.close()
        return outcome

    return attack


async def batch_flood(port: int) -> Outcome:
    """40 anonymous clients, each from an address of its own, each reading two batches of 100
    `list_notes` calls (about 12 kB in, 18 MB out per batch) one after the other."""
    outcome = Outcome()
    got = outcome.got

    async def client(n: int) -> None:
        pipe = Pipe(port, attacker(n), got)
        session = await pipe.open_session(BATCH_VERSION)
        if session is None:
            return
        for _ in range(BATCH_FLOOD_ROUNDS):
            batch = [call("list_notes", None, next(REQUEST_IDS)) for _ in range(BATCH_OF)]
            reply = await pipe.send(session.post(port, batch))
            if reply is not None and reply.status == 200:
                got["bytes sent back in all"] += len(reply.body)
                got.update(entry_label(entry) for entry in reply.json())
            elif reply is not None:
                got[label(reply)] += 1
        pipe.close()

    await in_parallel(client(n) for n in range(BATCH_FLOOD_CLIENTS))
    return outcome


async def stream_samples(port: int) -> Outcome:
    """50 anonymous sessions from 10 addresses sample a stream of 1 MB frames at once, each for
    5 s (the response cap, 16 MiB of frames, ends each window first)."""
    outcome = Outcome()
    got = outcome.got

    async def client(n: int) -> None:
        pipe = Pipe(port, attacker(n % SAMPLE_ADDRESSES), got)
        session = await pipe.open_session()
        if session is not None:
            reply = await pipe.send(session.post(port, call("frames", {"durationMs": SAMPLE_MS}, next(REQUEST_IDS))))
            if reply is not None:
                got["bytes sent back in all"] += len(reply.body)
                got[sample_label(reply)] += 1
        pipe.close()

    await in_parallel(client(n) for n in range(SAMPLE_CLIENTS))
    return outcome


def task_request(port: int, method: str, params: Mapping[str, Any], key: str) -> bytes:
    """`tasks_request` as bytes on the wire, with an x-api-key."""
    headers, body = tasks_request(method, params, next(REQUEST_IDS))
    return http_request(port, "POST", "/mcp", headers | {"x-api-key": key}, body)


async def run_tasks(pipe: Pipe, key: str, count: int) -> list[str]:
    """Start `count` report tasks under `key`, then wait for each to end; what each kept."""
    started = []
    for _ in range(count):
        reply = await pipe.send(task_request(pipe.port, "tools/call", {"name": "report", "arguments": {}}, key))
        result = reply.json().get("result", {}) if reply is not None and reply.status == 200 else {}
        if result.get("resultType") == "task":
            started.append(result["taskId"])
        elif reply is not None:
            return [label(reply)] * count
    return [await task_end(pipe, key, task_id) for task_id in started]


async def task_end(pipe: Pipe, key: str, task_id: str) -> str:
    """Poll a task until it ends: whether its result is kept, or what stands in for it."""
    request = task_request(pipe.port, "tasks/get", {"taskId": task_id}, key)
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    while time.monotonic() < deadline:
        reply = await pipe.send(request)
        task = reply.json().get("result", {}) if reply is not None and reply.status == 200 else {}
        if task.get("status") not in ("working", "input_required"):
            break
        await asyncio.sleep(TASK_POLL_S)
    result = task.get("result", {})
    if task.get("status") == "completed" and not result.get("isError"):
        return "results kept"
    said = BOUND.search(str(result.get("content", "")))
    return f"results let go ({said.group()[1:-1] if said else task.get('status')})"


async def kept_results(port: int) -> Outcome:
    """800 tasks with results of about 1 MB, under made-up x-api-keys from 50 addresses (16
    each, one at a time per address); then the legitimate caller runs its 16."""
    outcome = Outcome()
    got = outcome.got

    async def address(n: int) -> None:
        pipe = Pipe(port, attacker(n), got)
        for index in range(TASK_KEYS):
            got.update(await run_tasks(pipe, f"made-up-{n}-{index}", 1))
        pipe.close()

    await in_parallel(address(n) for n in range(TASK_ADDRESSES))
    pipe = Pipe(port, HOST, got)
    mine = Counter(await run_tasks(pipe, LEGIT_KEY, LEGIT_TASKS))
    pipe.close()
    outcome.legit = f"its {LEGIT_TASKS} tasks: {got_text(mine)}"
    return outcome


def sample_label(reply: Reply) -> str:
    """A sample's answer by how many frames it carried, or its refusal."""
    counted = re.search(rb'"frameCount":([0-9]+)', reply.body)
    return f"samples of {int(counted[1])} frames" if counted and reply.status == 200 else label(reply)


async def pinned_questions(port: int) -> Outcome:
    """Anonymous callers that declare elicitation call the gated tool, read up to the question
    and hang up, as fast as they can for 20 s; then the legitimate caller asks to be asked."""
    outcome = Outcome()
    got = outcome.got
    sessions: list[Session] = []
    for n in range(QUESTION_ADDRESSES):
        pipe = Pipe(port, attacker(n), got)
        sessions += await open_sessions(pipe, QUESTION_SESSIONS, capabilities=ASKING)
        pipe.close()
    deadline = time.monotonic() + QUESTION_FLOOD_S

    async def worker(session: Session) -> None:
        while time.monotonic() < deadline:
            got[await ask_and_hang_up(port, session)] += 1

    await in_parallel(worker(session) for session in sessions)
    legit = await Pipe(port, HOST, got).open_session(key=LEGIT_KEY, capabilities=ASKING)
    if legit is not None:
        outcome.legit = f"its gated call: {await ask_and_hang_up(port, legit)}"

    async def cleanup() -> None:  # ending the sessions ends their pinned calls
        pipe = Pipe(port, HOST, Counter())
        for session in sessions:
            await pipe.send(http_request(port, "DELETE", "/mcp", session.headers()))
        pipe.close()

    outcome.cleanup = cleanup
    return outcome


async def ask_and_hang_up(port: int, session: Session) -> str:
    """Call the gated tool on a connection of its own; read to the question and hang up."""
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            connection = await Connection.open(port, session.address)
            try:
                connection.write(session.post(port, call("place_order", ORDER, next(REQUEST_IDS))))
                status, headers = await connection.receive_head()
                if headers.get("content-type", "").startswith("text/event-stream"):
                    await connection.read_until(b"elicitation/create")
                    return "asked, then hung up: pinned"
                return label(Reply(status, headers, await connection.receive_body(status, headers)))
            finally:
                connection.close()
    except (OSError, EOFError, TimeoutError, asyncio.LimitOverrunError, BenchmarkError) as error:
        return f"client errors ({type(error).__name__})"


async def replay_logs(port: int) -> Outcome:
    """Anonymous 2025-11-25 sessions each ask for the large answer 8 times over SSE, so every
    answer is logged for Last-Event-ID; then each tries to resume its last stream."""
    outcome = Outcome()
    got = outcome.got
    legit_pipe = Pipe(port, HOST, got)
    legit = await legit_pipe.open_session(key=LEGIT_KEY)
    legit_stream = await stream_number(legit_pipe, legit) if legit is not None else None
    per_address = REPLAY_SESSIONS // REPLAY_ADDRESSES
    last_streams: dict[Session, int] = {}

    async def address(n: int) -> None:
        setup = Pipe(port, attacker(n), got)
        sessions = await open_sessions(setup, per_address)
        setup.close()
        jobs = [session for _ in range(REPLAY_CALLS) for session in sessions]

        async def worker() -> None:
            pipe = Pipe(port, attacker(n), got)
            while jobs:
                session = jobs.pop()
                stream = await stream_number(pipe, session, "large")
                got["answers of about 2 MB" if stream is not None else "answers without a stream"] += 1
                if stream is not None:
                    last_streams[session] = max(stream, last_streams.get(session, 0))
            pipe.close()

        await in_parallel(worker() for _ in range(REPLAY_WORKERS))

    await in_parallel(address(n) for n in range(REPLAY_ADDRESSES))
    resumed = [resumable(port, session, stream) for session, stream in last_streams.items()]
    got.update(f"last streams {'kept' if kept else 'not kept'} for a resume" for kept in await asyncio.gather(*resumed))
    if legit is not None and legit_stream is not None:
        kept = await resumable(port, legit, legit_stream)
        outcome.legit = f"its finished stream: {'kept' if kept else 'pushed out'}"
    legit_pipe.close()
    return outcome


async def stream_number(pipe: Pipe, session: Session, tool: str = "small") -> int | None:
    """Call a tool with an SSE-only Accept; the number of the stream that carried the answer."""
    reply = await pipe.send(session.post(pipe.port, call(tool), accept=SSE_ONLY))
    numbers = EVENT_ID.findall(reply.body) if reply is not None and reply.status == 200 else []
    return int(numbers[-1]) if numbers else None


async def resumable(port: int, session: Session, stream: int) -> bool:
    """Whether GET with Last-Event-ID `<stream>.0` would replay the stream (read the head only)."""
    headers = session.headers(SSE_ONLY) | {"last-event-id": f"{stream}.0"}
    async with asyncio.timeout(REQUEST_TIMEOUT_S):
        connection = await Connection.open(port, session.address)
        try:
            connection.write(http_request(port, "GET", "/mcp", headers))
            status, _ = await connection.receive_head()
        finally:
            connection.close()
    return status == 200


def token_flood(made_up_keys: bool) -> Callable[[int], Awaitable[Outcome]]:
    """20,000 calls of the gated tool by callers that cannot be asked, each answered with a
    token, after the legitimate caller got one: by anonymous callers at 40 addresses, or by
    callers that send made-up x-api-key values (claimed credentials nobody checks)."""

    async def attack(port: int) -> Outcome:
        outcome = Outcome()
        got = outcome.got
        legit_pipe = Pipe(port, HOST, got)
        legit = await legit_pipe.open_session(key=LEGIT_KEY)
        first = await legit_pipe.send(legit.post(port, call("place_order", ORDER))) if legit is not None else None
        token = first.json().get("result", {}).get("structuredContent", {}).get("token") if first else None
        if token is None:
            raise BenchmarkError(f"the legitimate caller got no token: {first.body[:200] if first else None!r}")
        calls = TOKEN_FLOOD // (TOKEN_ADDRESSES * TOKEN_SESSIONS)

        async def address(n: int) -> None:
            pipe = Pipe(port, attacker(n), got)
            keys = [f"made-up-{n}-{s}" if made_up_keys else None for s in range(TOKEN_SESSIONS)]
            sessions = [s for s in [await pipe.open_session(key=key) for key in keys] if s is not None]
            for session in sessions:
                for request_id in range(calls):
                    reply = await pipe.send(session.post(port, call("place_order", {"item": "x"}, request_id)))
                    if reply is not None:
                        got["tokens issued" if b'"pending":true' in reply.body else label(reply)] += 1
            pipe.close()

        await in_parallel(address(n) for n in range(TOKEN_ADDRESSES))
        if legit is not None:
            confirmed = await legit_pipe.send(legit.post(port, call("place_order", {**ORDER, TOKEN: token})))
            placed = confirmed is not None and b'"placed"' in confirmed.body
            outcome.legit = "its token: still runs the call" if placed else f"its token: {describe(confirmed)}"
        legit_pipe.close()
        return outcome

    return attack


def describe(reply: Reply | None) -> str:
    if reply is None:
        return "no answer"
    text = reply.body.decode("utf-8", "replace")
    match = re.search(r"Not run: ([^\"]+)", text)
    return match.group(1)[:80] if match else label(reply)


def session_flood(made_up_keys: bool) -> Callable[[int], Awaitable[Outcome]]:
    """20,000 initialize after the legitimate caller opened a session it then leaves idle: from
    200 anonymous addresses, or with made-up x-api-key values."""

    async def attack(port: int) -> Outcome:
        outcome = Outcome()
        got = outcome.got
        legit_pipe = Pipe(port, HOST, got)
        legit = await legit_pipe.open_session(key=LEGIT_KEY)
        per_address = SESSION_FLOOD // SESSION_ADDRESSES
        opened: list[list[Session]] = []

        async def address(n: int) -> None:
            pipe = Pipe(port, attacker(n), got)
            keys = [f"made-up-{n}-{s}" if made_up_keys else None for s in range(per_address)]
            sessions = [session for key in keys if (session := await pipe.open_session(key=key))]
            got["sessions opened"] += len(sessions)
            opened.append(sessions)
            pipe.close()

        await in_parallel(address(n) for n in range(SESSION_ADDRESSES))
        await in_parallel(still_open(port, sessions, got) for sessions in opened)
        if legit is not None:
            ping = await legit_pipe.send(legit.post(port, rpc("ping")))
            alive = ping is not None and ping.status == 200
            outcome.legit = "its idle session: alive" if alive else f"its idle session: gone ({describe(ping)})"
        refused: Counter[str] = Counter()
        newcomer = await Pipe(port, attacker(SESSION_ADDRESSES), refused).open_session()
        outcome.legit += "; a new anonymous caller: " + ("served" if newcomer else f"refused, {got_text(refused)}")
        legit_pipe.close()
        return outcome

    return attack


async def still_open(port: int, sessions: Sequence[Session], got: Counter[str]) -> None:
    """Ping each session once the flood is over: how many the server still holds."""
    if not sessions:
        return
    pipe = Pipe(port, sessions[0].address, got)
    for session in sessions:
        reply = await pipe.send(session.post(port, rpc("ping")))
        got["of them still open" if reply is not None and reply.status == 200 else "of them closed since"] += 1
    pipe.close()


async def hold_get_stream(port: int, session: Session) -> tuple[int, Connection | None]:
    """Open the session's GET stream; its status, and the connection holding it open if accepted."""
    async with asyncio.timeout(REQUEST_TIMEOUT_S):
        connection = await Connection.open(port, session.address)
        connection.write(http_request(port, "GET", "/mcp", session.headers(SSE_ONLY)))
        status, _ = await connection.receive_head()
    if status == 200:
        return status, connection
    connection.close()
    return status, None


def listener_lockout(port: int) -> Awaitable[Outcome]:
    """47 addresses x 16 made-up x-api-keys, each holding a GET stream open; then a listener
    with the app's demo key, and an anonymous one, each ask for a GET stream."""

    async def attack() -> Outcome:
        outcome = Outcome()
        got = outcome.got
        held: list[Connection] = []

        async def address(n: int) -> None:
            pipe = Pipe(port, attacker(n), got)
            for index in range(LISTEN_KEYS):
                session = await pipe.open_session(key=f"made-up-{n}-{index}")
                if session is None:
                    continue
                status, connection = await hold_get_stream(port, session)
                got["streams held" if connection else f"streams refused (HTTP {status})"] += 1
                if connection is not None:
                    held.append(connection)
            pipe.close()

        await in_parallel(address(n) for n in range(LISTEN_ADDRESSES))
        verdicts = []
        for who, address_of, key in (
            ("a demo-key", HOST, LEGIT_KEY),
            ("an anonymous", attacker(LISTEN_ADDRESSES), None),
        ):
            pipe = Pipe(port, address_of, got)
            session = await pipe.open_session(key=key)
            status, connection = await hold_get_stream(port, session) if session else (0, None)
            verdicts.append(f"{who} listener: " + ("served" if connection else f"refused (HTTP {status})"))
            if connection is not None:
                connection.close()
            pipe.close()
        outcome.legit = "; ".join(verdicts)
        for connection in held:
            connection.close()
        return outcome

    return attack()


async def pinned_calls(port: int) -> Outcome:
    """The review's 10,000 follow_notes calls asking for 30 s windows, over 128 anonymous
    2025-11-25 sessions from 2 addresses, each connection closed 50 ms after its request."""
    outcome = Outcome()
    got = outcome.got

    async def address(n: int) -> None:
        setup = Pipe(port, attacker(n), got)
        sessions = await open_sessions(setup, PINNED_SESSIONS)
        setup.close()
        if not sessions:
            return
        left = itertools.count()

        async def worker() -> None:
            while next(left) < PINNED_CALLS // PINNED_ADDRESSES:
                session = sessions[next(REQUEST_IDS) % len(sessions)]
                got[await call_and_hang_up(port, session)] += 1

        await in_parallel(worker() for _ in range(PINNED_WORKERS))

    await in_parallel(address(n) for n in range(PINNED_ADDRESSES))
    return outcome


async def call_and_hang_up(port: int, session: Session) -> str:
    """Call follow_notes for a 30 s window on a connection of its own, and close it after 50
    ms: what came back by then (a refusal), or "left running"."""
    request = session.post(port, call("follow_notes", PINNED_WINDOW, next(REQUEST_IDS)))
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            connection = await Connection.open(port, session.address)
            try:
                connection.write(request)
                try:
                    async with asyncio.timeout(HANG_UP_AFTER_S):
                        status, headers = await connection.receive_head()
                except TimeoutError:
                    return "calls hung up on after 50 ms"
                if headers.get("content-type", "").startswith("text/event-stream"):
                    return "calls hung up on after 50 ms"
                return label(Reply(status, headers, await connection.receive_body(status, headers)))
            finally:
                connection.close()
    except (OSError, EOFError, TimeoutError, asyncio.LimitOverrunError, BenchmarkError) as error:
        return f"client errors ({type(error).__name__})"


def tasks_request(method: str, params: Mapping[str, Any], request_id: int) -> tuple[dict[str, str], dict[str, Any]]:
    """A 2026-07-28 request of a client that declares the tasks extension: headers and body."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": TASKS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
    }
    headers = {"accept": BOTH, "mcp-protocol-version": TASKS_VERSION, "mcp-method": method}
    name = params.get("name", params.get("taskId"))  # what Mcp-Name must repeat
    if name is not None:
        headers["mcp-name"] = name
    return headers, rpc(method, {**params, "_meta": meta}, request_id)


async def cancelled_sync_tasks(port: int) -> Outcome:
    """One anonymous address starts 48 tasks of the sync export (15 s in a thread each), eight
    at a time, and cancels each once it is a task; then a sync REST route is timed for 5 s."""
    outcome = Outcome()
    got = outcome.got

    started = itertools.count()

    async def start_and_cancel() -> None:
        pipe = Pipe(port, attacker(0), got)
        while next(started) < SYNC_TASKS:
            await start_one(pipe)
        pipe.close()

    async def start_one(pipe: Pipe) -> None:
        headers, body = tasks_request("tools/call", {"name": "export_notes", "arguments": {}}, next(REQUEST_IDS))
        reply = await pipe.send(http_request(port, "POST", "/mcp", headers, body))
        task_id = reply.json().get("result", {}).get("taskId") if reply is not None and reply.status == 200 else None
        if task_id is None:
            got[label(reply) if reply is not None else "no answer"] += 1
        else:
            headers, body = tasks_request("tasks/cancel", {"taskId": task_id}, next(REQUEST_IDS))
            cancelled = await pipe.send(http_request(port, "POST", "/mcp", headers, body))
            done = cancelled is not None and cancelled.status == 200
            got["tasks started, then cancelled" if done else "cancel failed"] += 1

    # A few at a time, each cancelled as soon as it is a task: fewer running than Tasks.max_per_caller.
    await in_parallel(start_and_cancel() for _ in range(SYNC_WORKERS))
    rest = Pipe(port, HOST, got)
    latencies: list[float] = []
    deadline = time.monotonic() + SYNC_PROBE_S
    while time.monotonic() < deadline:
        started = time.perf_counter()
        reply = await rest.send(http_request(port, "GET", "/sync-ping"))
        if reply is not None and reply.status == 200:
            latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(PROBE_EVERY_S)
    rest.close()
    p50, worst = milliseconds(latencies, statistics.median), milliseconds(latencies, max)
    outcome.legit = f"a sync REST route meanwhile: p50 {p50}, max {worst} ({len(latencies)})"


# -- updates and task changes on listening streams ---------------------------------------------

IDLE_STREAMS: Final = 500  # anonymous GET streams, each in a session of its own
IDLE_ADDRESSES: Final = 32  # x 16 (Limits.max_streams_per_caller) >= 500
WRITES_S: Final = 5.0  # the REST writer's run, alone and beside the streams
SUBSCRIBERS: Final = 16
WRITERS: Final = 4  # connections writing at once: about 1,300 writes a second here
BURST_S: Final = 10.0
LAST_NOTICE_S: Final = 10.0  # how long a subscriber may take, after the burst, to hear the one write
TASK_ADDRESSES: Final = 31  # x 16 tasks and 16 streams (the per-caller bounds) = 496
TASKS_PER_ADDRESS: Final = 16
TASK_STEPS: Final = 100  # one every 100 ms: 10 s of progress per task
STATELESS: Final = "2026-07-28"
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
UPDATED: Final = b"notifications/resources/updated"
TASK_STATUS: Final = b"notifications/tasks"


def note_write(port: int, note: int = 1) -> bytes:
    return http_request(port, "PUT", f"/notes/{note}?text=soak")


async def rest_writer(port: int, seconds: float, got: Counter[str], label_: str) -> None:
    """PUT /notes/1 one after the other on one connection for `seconds`: writes/s and p50."""
    latencies: list[float] = []
    connection = await Connection.open(port, HOST)
    request = note_write(port)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                reply = await connection.send(request)
            if reply.status == 200:
                latencies.append((time.perf_counter() - started) * 1000)
    finally:
        connection.close()
    p50 = statistics.median(latencies) if latencies else math.nan
    got[f"writes/s {label_} (p50 {p50:.1f} ms)"] = round(len(latencies) / seconds)


async def get_stream(port: int, session: Session, got: Counter[str]) -> Connection | None:
    """The session's GET stream, open once its head is read; `None`, counted, when refused."""
    connection = await Connection.open(port, session.address)
    connection.write(http_request(port, "GET", "/mcp", session.headers(SSE_ONLY)))
    async with asyncio.timeout(REQUEST_TIMEOUT_S):
        status, headers = await connection.receive_head()
    if status == 200:
        return connection
    got[label(Reply(status, headers, await connection.receive_body(status, headers)))] += 1
    connection.close()
    return None


async def idle_streams_beside_a_writer(port: int) -> Outcome:
    """A REST writer's PUT /notes/1 alone, then beside 500 idle anonymous GET streams (sessions
    subscribed to nothing) from 32 addresses."""
    outcome = Outcome()
    got = outcome.got
    await rest_writer(port, WRITES_S, got, "alone")
    streams: list[Connection] = []

    async def address(n: int) -> None:
        pipe = Pipe(port, attacker(n), got)
        count = IDLE_STREAMS // IDLE_ADDRESSES + (n < IDLE_STREAMS % IDLE_ADDRESSES)
        for session in await open_sessions(pipe, count):
            stream = await get_stream(port, session, got)
            if stream is not None:
                streams.append(stream)
        pipe.close()

    try:
        await in_parallel(address(n) for n in range(IDLE_ADDRESSES))
        got["idle GET streams open"] = len(streams)
        await rest_writer(port, WRITES_S, got, f"beside {len(streams)} streams")
    finally:
        for stream in streams:
            stream.close()
    return outcome


async def heard(connection: Connection, marker: bytes, last: bytes, counts: Counter[str], done: asyncio.Event) -> None:
    """Count the events carrying `marker` until one names `last` (then set `done`)."""
    while True:
        event = await connection.read_until(b"\n\n")
        if marker in event:
            counts["notices"] += 1
            if last in event:
                counts["last"] += 1
                done.set()
                return


async def updates_under_load(port: int) -> Outcome:
    """16 sessions subscribed to notes://1 and notes://2 read their GET streams while 4 REST
    connections write notes://1 for 10 s; a second before the end, notes://2 is written once:
    does every subscriber hear that one update, published under load?"""
    outcome = Outcome()
    got = outcome.got
    pipe = Pipe(port, attacker(0), got)
    sessions = await open_sessions(pipe, SUBSCRIBERS)
    for session in sessions:
        for uri in ("notes://1", "notes://2"):
            await pipe.send(session.post(port, rpc("resources/subscribe", {"uri": uri})))
    pipe.close()
    streams = [stream for session in sessions if (stream := await get_stream(port, session, got))]
    counts = [Counter[str]() for _ in streams]
    done = [asyncio.Event() for _ in streams]
    readers = [
        asyncio.create_task(heard(stream, UPDATED, b"notes://2", count, event))
        for stream, count, event in zip(streams, counts, done, strict=True)
    ]
    writes = 0

    async def writer() -> None:
        nonlocal writes
        connection = await Connection.open(port, HOST)
        deadline = time.monotonic() + BURST_S
        try:
            while time.monotonic() < deadline:
                if (await connection.send(note_write(port))).status == 200:
                    writes += 1
        finally:
            connection.close()

    async def once_under_load() -> None:
        await asyncio.sleep(BURST_S - 1)
        connection = await Connection.open(port, HOST)
        await connection.send(note_write(port, 2))
        connection.close()

    try:
        await in_parallel([*(writer() for _ in range(WRITERS)), once_under_load()])
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LAST_NOTICE_S):
                await asyncio.gather(*(event.wait() for event in done))
    finally:
        for reader in readers:
            reader.cancel()
        for stream in streams:
            stream.close()
    got[f"writes in {BURST_S:g} s"] = writes
    got["notices per subscriber (median)"] = round(statistics.median(c["notices"] for c in counts)) if counts else 0
    got["subscribers heard notes://2's one update"] = sum(event.is_set() for event in done)
    got["subscribers never heard it"] = sum(not event.is_set() for event in done)
    return outcome


def stateless_post(port: int, method: str, params: Mapping[str, Any], name: str | None = None) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "soak", "version": "1"},
    }
    headers = {"accept": BOTH, "mcp-protocol-version": STATELESS, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return http_request(port, "POST", "/mcp", headers, rpc(method, {**params, "_meta": meta}))


async def task_fan_out(port: int) -> Outcome:
    """496 anonymous 2026-07-28 tasks (31 addresses x 16) report a step every 100 ms for 10 s,
    each followed by a subscriptions/listen stream of its own caller naming it."""
    outcome = Outcome()
    got = outcome.got
    counts: list[Counter[str]] = []
    done: list[asyncio.Event] = []
    streams: list[Connection] = []
    readers: list[asyncio.Task[None]] = []

    async def address(n: int) -> None:
        pipe = Pipe(port, attacker(n), got)
        arguments = {"steps": TASK_STEPS, "every_ms": 100}
        for _ in range(TASKS_PER_ADDRESS):
            reply = await pipe.send(
                stateless_post(port, "tools/call", {"name": "progress", "arguments": arguments}, "progress")
            )
            task_id = (
                reply.json().get("result", {}).get("taskId") if reply is not None and reply.status == 200 else None
            )
            if task_id is None:
                got["tasks refused" if reply is not None else "tasks unanswered"] += 1
                continue
            connection = await Connection.open(port, attacker(n))
            connection.write(stateless_post(port, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}}))
            status, _ = await connection.receive_head()
            if status != 200:
                got[f"listen streams refused (HTTP {status})"] += 1
                connection.close()
                continue
            count, event = Counter[str](), asyncio.Event()
            streams.append(connection)
            counts.append(count)
            done.append(event)
            readers.append(asyncio.create_task(heard(connection, TASK_STATUS, b'"status":"completed"', count, event)))
        pipe.close()

    try:
        await in_parallel(address(n) for n in range(TASK_ADDRESSES))
        got["tasks followed"] = len(streams)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TASK_STEPS * 0.1 * 3):
                await asyncio.gather(*(event.wait() for event in done))
    finally:
        for reader in readers:
            reader.cancel()
        for stream in streams:
            stream.close()
    got["task notices per stream (median)"] = round(statistics.median(c["notices"] for c in counts)) if counts else 0
    got["streams that heard their task end"] = sum(event.is_set() for event in done)
    got["streams that never heard it"] = sum(not event.is_set() for event in done)
    return outcome


# -- the legitimate client and the RSS sampler ----------------------------------------------


class LegitClient:
    """A credentialed client that calls `small`, then `ping`, every 100 ms, in a thread with an
    event loop of its own."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.calls_ms: list[float] = []
        self.pings_ms: list[float] = []
        self.failures: Counter[str] = Counter()

    def __enter__(self) -> LegitClient:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise BenchmarkError("the legitimate client could not open its session")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_S + 5)

    async def _run(self) -> None:
        pipe = Pipe(self._port, HOST, self.failures)
        session = await pipe.open_session(key=LEGIT_KEY)
        if session is None:
            return
        self._ready.set()
        small, ping = session.post(self._port, call("small")), session.post(self._port, rpc("ping"))
        while not self._stop.is_set():
            for request, latencies in ((small, self.calls_ms), (ping, self.pings_ms)):
                started = time.perf_counter()
                reply = await pipe.send(request)
                if reply is not None and reply.status == 200:
                    latencies.append((time.perf_counter() - started) * 1000)
                elif reply is not None:
                    self.failures[label(reply)] += 1
            await asyncio.sleep(PROBE_EVERY_S)
        pipe.close()


class PeakRss:
    """The highest RSS of a process, sampled every 50 ms in a thread while in the block."""

    def __init__(self, process: Process) -> None:
        self._process = process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self.peak = process.rss_bytes()

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(SAMPLE_EVERY_S * 20)

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                self.peak = max(self.peak, self._process.rss_bytes())
            except OSError:
                return  # the server is gone; the run reports that itself


# -- the run ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attack:
    name: str
    review: str  # what the review measured, before the bounds
    run: Callable[[int], Awaitable[Outcome]]


ATTACKS: Final = (
    Attack(
        "1. Batch amplification: 80,000 tools/list (anonymous, 2025-03-26)",
        "4 MB in, 758 MB out; RSS +2.9 GB; loop frozen 12 s",
        batch_amplification,
    ),
    Attack(
        "1b. The same, never read: a batch of 100 tools/list, 2 clients",
        "2 unread answers held 1.6 GB",
        unread_batches("tools/list", None, 2),
    ),
    Attack(
        "1c. Never read: a batch of 100 large calls (2 MB answers), 32 clients",
        "(not measured)",
        unread_batches("large", None, LARGE_UNREAD_CLIENTS),
    ),
    Attack(
        "2. Pinned questions: ask, hang up, repeat (anonymous, 20 s)",
        "1,600 calls/s pinned 300 s each; 25,000 held 1.24 GB",
        pinned_questions,
    ),
    Attack(
        "3. Replay logs: 160 sessions x 8 answers of 2 MB (anonymous)",
        "16 MB per session; 50 sessions +801 MB in 3 s",
        replay_logs,
    ),
    Attack(
        "4. Token flood: 20,000 anonymous tokens",
        "10,000 tokens evicted a legitimate user's token",
        token_flood(made_up_keys=False),
    ),
    Attack(
        "4b. Token flood: 20,000 tokens under 200 made-up x-api-keys",
        "(not measured)",
        token_flood(made_up_keys=True),
    ),
    Attack(
        "5. Session flood: 20,000 anonymous initialize from 200 addresses",
        "evicted credentialed callers' idle sessions",
        session_flood(made_up_keys=False),
    ),
    Attack(
        "5b. Session flood: 20,000 initialize with made-up x-api-keys",
        "(not measured)",
        session_flood(made_up_keys=True),
    ),
    Attack(
        "5c. Listener lock-out: 47 addresses x 16 made-up x-api-keys hold GET streams",
        "locked out every listener",
        listener_lockout,
    ),
    Attack(
        "6. Pinned calls: 10,000 follow_notes of 30 s, hung up after 50 ms (128 anonymous sessions, 2 addresses)",
        "68 MB -> 1,056 MB in 14 s; legit p50 148 ms",
        pinned_calls,
    ),
    Attack(
        "6b. Cancelled sync tasks: 48 sync task calls of one address, each cancelled",
        "thread pool exhausted; a sync REST route took 26 s",
        cancelled_sync_tasks,
    ),
    Attack(
        "7. Batch flood: 40 clients x 2 batches of 100 list_notes (anonymous, 40 addresses, 2025-03-26)",
        "1.46 GB answered in 6.6 s; peak RSS 1,060 MB",
        batch_flood,
    ),
    Attack(
        "7b. Stream samples: 50 at once of 1 MB frames (anonymous, 10 addresses)",
        "peaked at 2.7 GB; legit max 6 s",
        stream_samples,
    ),
    Attack(
        "8. Kept task results: 800 tasks of 1 MB results (made-up x-api-keys, 50 addresses)",
        "held 781 MB; anonymous callers alone about 500 MB",
        kept_results,
    ),
    Attack(
        "9. Idle streams: 500 anonymous GET streams from 32 addresses beside a REST writer",
        "PUT /notes/1 from ~1,940/s to 64/s (p50 1.9 to 53 ms)",
        idle_streams_beside_a_writer,
    ),
    Attack(
        "9b. Updates under load: 16 subscribed streams, ~1,300 writes/s",
        "13,705 of ~26,000 updates lost",
        updates_under_load,
    ),
    Attack(
        "9c. Task fan-out: 496 tasks reporting progress, 496 listen streams",
        "CPU 4% to 59-79%; ~90% of progress notifications lost per stream",
        task_fan_out,
    ),
)


@dataclass(frozen=True, slots=True)
class Row:
    attack: Attack
    before: int
    peak: int
    after: int
    elapsed_s: float
    cpu_s: float  # the server's CPU time while the attack ran
    outcome: Outcome
    calls_ms: list[float]
    pings_ms: list[float]
    legit_failures: Counter[str]


def run(attack: Attack) -> Row:
    """Start a fresh server, warm it up, run the attack while sampling, stop the server."""
    with uvicorn_process(sys.executable, APP_FACTORY, HERE, {}, "soak") as process:
        process.wait_listening(time.monotonic() + START_TIMEOUT_S)
        asyncio.run(warm_up(process.port))
        with LegitClient(process.port) as legit:
            before = process.rss_bytes()
            with PeakRss(process) as sampled:
                started, cpu_before = time.monotonic(), process.cpu_seconds()
                outcome = asyncio.run(bounded(attack.run(process.port)))
                elapsed, cpu = time.monotonic() - started, process.cpu_seconds() - cpu_before
                time.sleep(SETTLE_S)
                after = process.rss_bytes()
        if outcome.cleanup is not None:
            asyncio.run(bounded(outcome.cleanup()))
        if process.popen.poll() is not None:
            raise BenchmarkError(f"the server died during {attack.name!r} (exit {process.popen.returncode})")
    return Row(
        attack, before, sampled.peak, after, elapsed, cpu, outcome, legit.calls_ms, legit.pings_ms, legit.failures
    )


async def bounded(work: Awaitable[T]) -> T:
    async with asyncio.timeout(ATTACK_TIMEOUT_S):
        return await work


async def warm_up(port: int) -> None:
    """Every tool once, so discovery and first-call allocations are not counted as the attack's."""
    got: Counter[str] = Counter()
    pipe = Pipe(port, HOST, got)
    session = await pipe.open_session()
    if session is None:
        raise BenchmarkError(f"the server refused the warm-up session: {dict(got)}")
    for request in (rpc("tools/list"), call("small"), call("large"), call("place_order", ORDER)):
        reply = await pipe.send(session.post(port, request))
        if reply is None or reply.status != 200:
            raise BenchmarkError(f"warming up, {request['method']} failed: {dict(got)}")
    pipe.close()


# -- the report ------------------------------------------------------------------------------


def megabytes(value: float) -> str:
    return f"{value / 1e6:+,.0f} MB" if value else "0 MB"


def got_text(got: Counter[str]) -> str:
    return "; ".join(
        f"{count / 1e6:,.1f} MB {what.removeprefix('bytes ')}" if what.startswith("bytes ") else f"{count:,} {what}"
        for what, count in sorted(got.items(), key=lambda item: (item[0].startswith("bytes "), -item[1]))
        if count
    )


def milliseconds(values: Sequence[float], how: Callable[[Sequence[float]], float]) -> str:
    return f"{how(values):,.1f} ms" if values else "none answered"


def render(rows: Sequence[Row]) -> str:
    lines = [
        "| attack | review's figure | now: RSS peak growth | attacker got | legit client p50 |",
        "|---|---|--:|---|--:|",
    ]
    for row in rows:
        cells = [
            row.attack.name,
            row.attack.review,
            megabytes(row.peak - row.before),
            got_text(row.outcome.got),
            milliseconds(row.calls_ms, statistics.median),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "| attack | RSS before / peak / after | attack took | server CPU | legit small call p50 / max (n) "
        "| worst ping | the legitimate caller's own state |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for row in rows:
        rss = " / ".join(f"{value / 1e6:,.0f}" for value in (row.before, row.peak, row.after)) + " MB"
        calls = f"{milliseconds(row.calls_ms, statistics.median)} / {milliseconds(row.calls_ms, max)}"
        legit = row.outcome.legit or "-"
        if row.legit_failures:
            legit += f" (its probe failed: {got_text(row.legit_failures)})"
        cells = [
            row.attack.name.split(":")[0],
            rss,
            f"{row.elapsed_s:.1f} s",
            f"{row.cpu_s:.1f} s ({row.cpu_s / row.elapsed_s:.0%})" if row.elapsed_s else "-",
            f"{calls} ({len(row.calls_ms)})",
            milliseconds(row.pings_ms, max),
            legit,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    chosen = [attack for attack in ATTACKS if not args or attack.name.split(".")[0] in args]
    started = time.monotonic()
    measured = versions()
    rows = []
    try:
        for attack in chosen:
            print(f"{attack.name} ...", file=sys.stderr, flush=True)
            rows.append(run(attack))
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"soak failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *args])
    print(f"`{command}`: each attack against a fresh uvicorn worker ({DEFAULT_STACK}) at the default bounds.\n")
    print(render(rows), end="\n\n")
    print(measured)
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
