"""What the test modules share, and the one place they import it from (fixtures stay in
 `conftest.py`; no test module imports another): a real uvicorn server, several server processes
with a balancer, a real Redis and the stores a test runs on, the official SDK client, JSON-RPC
messages over streamable HTTP and the SSE they come back in, 2026-07-28 requests, the explorer in
a real Chromium, bearer tokens from a test issuer, tool discovery with the default credential
headers, and the app whose tools stream, with what its routes observed."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import httpx
import redis.asyncio
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import Depends, FastAPI
from jose import jwk, jwt
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from playwright.sync_api import Browser, Locator, Page, sync_playwright
from starlette.types import ASGIApp

from fastapi_mcp_routes import ToolCalls, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolRegistry

START_TIMEOUT_S = 10.0
WAIT_S = 20.0  # the bound on every wait for a server or a peer

# -- the app in process ------------------------------------------------------------------------


@asynccontextmanager
async def connected(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app served in process, with its lifespan running (discovery at startup)."""
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as http,
    ):
        yield http


# -- a real server -----------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """A uvicorn server that says when it is listening."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextmanager
def serve(app: ASGIApp, *, send_buffer_bytes: int | None = None) -> Iterator[str]:
    """Serve `app` with uvicorn on an ephemeral 127.0.0.1 port; yields the base URL. With
    `send_buffer_bytes`, each connection's kernel send buffer is that size, not autotuned (up
    to megabytes), so a client that stops reading soon blocks the server's writes."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = _Server(config)
    sockets = None
    if send_buffer_bytes is not None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Accepted connections inherit the listening socket's buffer size (Linux).
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
        listener.bind(("127.0.0.1", 0))
        sockets = [listener]
    thread = threading.Thread(target=server.run, kwargs={"sockets": sockets}, daemon=True)
    thread.start()
    if not server.listening.wait(START_TIMEOUT_S) or not server.servers:
        server.should_exit = True
        raise RuntimeError("uvicorn did not start listening")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT_S)
        for listener in sockets or ():
            listener.close()


def one_process(store: Store | None = None) -> Deployment:
    """What a single process serves with: a random secret of its own, and a store (its memory)."""
    return Deployment(Secret.configure(None, {}), store or MemoryStore())


# -- several processes: uvicorn workers, replicas, a balancer ---------------------------------

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
PROCESS_START_S = 30.0  # the bound on a process getting ready: a worker imports the whole app
STOP_S = 10.0  # how long a stopped process may take to exit before it is killed
_Ready = TypeVar("_Ready")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class Running:
    """A process this test run started, in a process group of its own, and its output so far."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_until(self, ready: Callable[[Running], _Ready | None], what: str) -> _Ready:
        """Poll `ready` until it says yes (there is no other signal from another process);
        fails with the process's output once it exits or `PROCESS_START_S` passes."""
        deadline = time.monotonic() + PROCESS_START_S
        while True:
            found = ready(self)
            if found:
                return found
            status = exit_status(self.process)
            if status is not None:
                raise RuntimeError(f"{what} exited with status {status} before it was ready:\n{self.log()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} was not ready within {PROCESS_START_S} s:\n{self.log()}")
            time.sleep(0.05)


def _with_the_starting_thread() -> Callable[[], None] | None:
    """What a started process runs before its command so that it gets SIGTERM once the thread
    that started it ends (Linux `prctl(PR_SET_PDEATHSIG)`); None elsewhere."""
    try:
        prctl = ctypes.CDLL(None).prctl
    except AttributeError:
        return None
    set_death_signal = 1  # PR_SET_PDEATHSIG

    def end_with_the_starting_thread() -> None:
        prctl(set_death_signal, signal.SIGTERM)

    return end_with_the_starting_thread


END_WITH_THE_STARTING_THREAD = _with_the_starting_thread()


@contextmanager
def start_process(command: list[str], env: Mapping[str, str] | None = None) -> Iterator[Running]:
    """Run `command` from the project's root in a process group of its own, with `env` added to
    this environment, its output kept in a file; at the end the group gets SIGTERM, then SIGKILL
    after `STOP_S`. Call it from the thread that lives as long as the process should (pytest's
    own): on Linux the process also gets SIGTERM once that thread ends, so a test run killed
    before its cleanup leaves no server behind."""
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-") as directory:
        log_path = Path(directory) / "output.log"
        # Appended to, so reading the file never moves where the process writes.
        with log_path.open("ab") as output:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env={**os.environ, **(env or {})},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=END_WITH_THE_STARTING_THREAD,
            )
        try:
            yield Running(process, log_path)
        finally:
            _stop(process)


def exit_status(process: subprocess.Popen[bytes]) -> int | None:
    """The status a process exited with, or None while it runs. The process is not reaped
    (WNOWAIT): while the leader of a group is a zombie, the group's id cannot be reused, so a
    signal to the group reaches only what is left of it (say a worker it orphaned)."""
    if process.returncode is not None:
        return process.returncode
    exited = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    return exited.si_status if exited is not None else None


def _stop(process: subprocess.Popen[bytes]) -> None:
    _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline and exit_status(process) is None:
        time.sleep(0.05)
    _signal_group(process, signal.SIGKILL)
    process.wait()


def _signal_group(process: subprocess.Popen[bytes], signal_number: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has exited
        os.killpg(process.pid, signal_number)


@contextmanager
def serve_processes(app_path: str, *, workers: int = 1, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Serve `app_path` ("module:attribute", importable from the project's root) with `python -m
    uvicorn --workers K` in a process group of its own, `env` added to this environment; yields
    the base URL once every worker has started, and stops the group at the end."""
    with serve_process_group(app_path, workers=workers, env=env) as (url, _):
        yield url


@contextmanager
def serve_process_group(
    app_path: str, *, workers: int = 1, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, Running]]:
    """`serve_processes`, yielding the process group too (a test may kill it, as a crash would)."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app_path, "--host", HOST, "--port", str(port)]
    command += ["--workers", str(workers), "--no-access-log", "--timeout-graceful-shutdown", "2"]

    def started(running: Running) -> bool:
        # uvicorn logs the address once it listens, and each worker the end of its startup; a
        # worker that fails is started again and again, so its first traceback ends the wait.
        log = running.log()
        if "Traceback (most recent call last)" in log:
            raise RuntimeError(f"uvicorn serving {app_path} failed to start:\n{log}")
        return "Uvicorn running on" in log and log.count("Application startup complete.") >= workers

    with start_process(command, env) as running:
        running.wait_until(started, f"uvicorn serving {app_path} with {workers} worker(s)")
        yield f"http://{HOST}:{port}", running


@contextmanager
def round_robin(*upstreams: str) -> Iterator[str]:
    """Run scripts/round_robin.py over `upstreams` (base URLs); yields the balancer's base URL."""
    command = [sys.executable, str(ROOT / "scripts" / "round_robin.py"), "--port", "0", *upstreams]

    def listening(running: Running) -> str | None:
        found = re.search(r"listening on (http://\S+)", running.log())
        return found.group(1) if found else None

    with start_process(command) as running:
        yield running.wait_until(listening, "the round-robin balancer")


# -- a real Redis ------------------------------------------------------------------------------

# A Redis to test against when no redis-server can be started here.
REDIS_URL_VARIABLE = "FASTAPI_MCP_ROUTES_TEST_REDIS_URL"
_REDIS_FOLDERS = ("/usr/bin", "/usr/sbin", "/usr/local/bin")  # where packages put redis-server


class RedisMissing(LookupError):
    """Neither a redis-server to start nor a Redis URL to test against."""


def _redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found is not None:
        return found
    candidates = (os.path.join(folder, "redis-server") for folder in _REDIS_FOLDERS)
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def redis_missing() -> str | None:
    """Why `redis_server` has no Redis to give here, and how to get one; `None` when it has."""
    if _redis_binary() is not None or os.environ.get(REDIS_URL_VARIABLE):
        return None
    return (
        "The Redis tests need a Redis: install redis-server (apt install redis-server), "
        f"or set {REDIS_URL_VARIABLE} to the URL of one they may write to (redis://host:port/db)."
    )


def gone_redis_url() -> str:
    """The URL of a Redis that is gone: a 127.0.0.1 port nothing listens on."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def redis_server(port: int | None = None) -> Iterator[str]:
    """A Redis to test against; yields its URL. A redis-server of its own (on PATH, or in
    /usr/bin, /usr/sbin, /usr/local/bin) on a free 127.0.0.1 port (or on `port`, say to start
    it again where it was), keeping nothing on disk, stopped at the end; without the binary, the
    Redis that `FASTAPI_MCP_ROUTES_TEST_REDIS_URL` names. `RedisMissing` when there is neither."""
    binary = _redis_binary()
    if binary is None and port is not None:
        raise RedisMissing("a Redis on a port of the test's choosing needs redis-server: apt install redis-server")
    if binary is None:
        missing = redis_missing()
        if missing is not None:
            raise RedisMissing(missing)
        yield os.environ[REDIS_URL_VARIABLE]
        return
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-redis-") as directory:
        command = [binary, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
        with start_process([*command, "--dir", directory]) as running:
            running.wait_until(lambda _: redis_pings(port), f"redis-server on port {port}")
            yield f"redis://{HOST}:{port}/0"


def redis_pings(port: int, host: str = HOST) -> bool:
    """Whether a Redis server on `host`:`port` answers PING."""
    try:
        with socket.create_connection((host, port), timeout=1) as connection:
            connection.sendall(b"*1\r\n$4\r\nPING\r\n")
            return connection.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisLink:
    """A TCP relay to a Redis (a thread of its own), which a test can cut: every connection
    through it drops and new ones are refused until it is restored, as when a network between
    one process and Redis fails while the others still reach it. With `latency_s`, each write
    that crosses it is held that long, in order, as over a link to a Redis far away. `url` is
    the Redis URL through the relay."""

    def __init__(self, redis_url: str, latency_s: float = 0.0) -> None:
        target = httpx.URL(redis_url)
        self._target = (target.host, target.port or 6379)
        self._latency_s = latency_s
        self._cut = False
        self._connections: set[Any] = set()
        self._loop = asyncio.new_event_loop()
        self._closing: asyncio.Event | None = None
        listening = threading.Event()
        self.port = 0

        async def serve_relay() -> None:
            closing = self._closing = asyncio.Event()
            server = await asyncio.start_server(self._relay, HOST, 0)
            self.port = server.sockets[0].getsockname()[1]
            listening.set()
            async with server:
                await closing.wait()

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(serve_relay(),), daemon=True)
        self._thread.start()
        if not listening.wait(START_TIMEOUT_S):
            raise RuntimeError("the relay to Redis did not start listening")
        self.url = f"redis://{HOST}:{self.port}{target.path or '/0'}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._cut:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        ends = {writer, upstream_writer}
        self._connections |= ends

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    if self._latency_s:  # the link's delay, not synchronisation
                        await asyncio.sleep(self._latency_s)
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        self._connections -= ends

    def cut(self) -> None:
        """Drop every connection through the relay, and refuse new ones."""
        done = threading.Event()

        def drop() -> None:
            self._cut = True
            for end in list(self._connections):
                end.transport.abort()
            done.set()

        self._loop.call_soon_threadsafe(drop)
        done.wait(START_TIMEOUT_S)

    def restore(self) -> None:
        """Let connections through again."""
        self._cut = False

    def close(self) -> None:
        """Cut every connection and stop the relay."""
        self.cut()
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        self._thread.join(START_TIMEOUT_S)


@contextmanager
def redis_link(redis_url: str, latency_s: float = 0.0) -> Iterator[RedisLink]:
    """A `RedisLink` to the Redis at `redis_url` (`latency_s` each way), closed at the end."""
    link = RedisLink(redis_url, latency_s)
    try:
        yield link
    finally:
        link.close()


class Stores:
    """Makes the stores of one test, all of one kind, and closes them: `MemoryStore`s, or
    `RedisStore`s on the Redis at `redis_url` under a prefix of the test's own."""

    def __init__(self, redis_url: str | None = None) -> None:
        self.redis_url = redis_url
        self.prefix = f"test-{secrets.token_hex(6)}:"
        self._made: list[Store] = []

    def make(self, clock: Callable[[], float] | None = None, **options: Any) -> Store:
        """A new store. RedisStores of one test share what they hold, as two processes on one
        Redis would (`options` go to their client); MemoryStores share nothing."""
        store: Store
        if self.redis_url is None:
            store = MemoryStore() if clock is None else MemoryStore(clock)
        else:
            store = RedisStore.from_url(self.redis_url, prefix=self.prefix, clock=clock, **options)
        self._made.append(store)
        return store

    async def redis_keys(self) -> dict[str, dict[str, str] | None]:
        """Every key the RedisStores of this test hold (without the prefix), with its fields
        when it is a hash: what is left in Redis."""
        assert self.redis_url is not None
        client = redis.asyncio.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            held: dict[str, dict[str, str] | None] = {}
            for key in await client.keys(self.prefix + "*"):
                fields = await client.hgetall(key) if await client.type(key) == "hash" else None
                held[key.removeprefix(self.prefix)] = fields
            return held
        finally:
            await client.aclose()

    async def aclose(self) -> None:
        for store in self._made:
            await store.aclose()


# -- the official SDK client -------------------------------------------------------------------


@asynccontextmanager
async def mcp_client(
    base_url: str, headers: dict[str, str] | None = None, *, mode: str = "legacy", **options: Any
) -> AsyncIterator[Client]:
    """The official MCP client on `{base_url}/mcp`, sending `headers` on every request; in a
    session (`legacy`) unless `mode` says otherwise; `options` are the client's callbacks."""
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    async with http, Client(transport, mode=mode, **options) as client:
        yield client


# -- JSON-RPC over streamable HTTP -------------------------------------------------------------

SESSION_VERSION = "2025-11-25"  # the latest revision that has sessions
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
JSON_ONLY = {**HEADERS, "accept": "application/json"}  # a client that reads no SSE


def rpc(method: str, params: dict[str, Any] | None = None, request_id: int | str | None = 1) -> dict[str, Any]:
    """A JSON-RPC request; a notification when `request_id` is None."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if request_id is not None:
        message["id"] = request_id
    return message


def initialize(
    version: str = SESSION_VERSION, capabilities: dict[str, Any] | None = None, request_id: int = 0
) -> dict[str, Any]:
    """The `initialize` request that opens a session."""
    client = {"name": "t", "version": "1"}
    params = {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": client}
    return rpc("initialize", params, request_id)


def open_session(
    http: httpx.Client,
    *,
    version: str = SESSION_VERSION,
    accept: str = HEADERS["accept"],
    capabilities: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, str]:
    """Open a session over plain HTTP (`headers` are sent too, say a credential); the headers
    its later requests carry: the same, plus the session id and the protocol version."""
    sent = {**HEADERS, "accept": accept, "mcp-protocol-version": version, **(headers or {})}
    response = http.post("/mcp", json=initialize(version, capabilities), headers=sent)
    assert response.status_code == 200, response.text
    return {**sent, "mcp-session-id": response.headers["mcp-session-id"]}


def tool_call(
    name: str, arguments: dict[str, Any] | None = None, *, request_id: int = 1, progress_token: str | None = None
) -> dict[str, Any]:
    """A `tools/call` request; with a progress token, the call may stream."""
    params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return rpc("tools/call", params, request_id)


def result_of(http: httpx.Client, message: dict[str, Any], headers: dict[str, str] = HEADERS) -> dict[str, Any]:
    """POST one request, answered in JSON with 200; the answer's result."""
    response = http.post("/mcp", json=message, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


def call_tool(
    http: httpx.Client,
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] = HEADERS,
    request_id: int = 1,
) -> dict[str, Any]:
    """Call a tool over plain HTTP; the call's result."""
    return result_of(http, tool_call(name, arguments, request_id=request_id), headers)


# -- reading server-sent events ----------------------------------------------------------------


def _lines(body: str | Iterable[str]) -> Iterable[str]:
    return body.splitlines() if isinstance(body, str) else body


def iter_sse_messages(body: str | Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (its text, or its lines as they arrive), in order;
    a priming event's empty data is no message."""
    for line in _lines(body):
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])


def sse_messages(body: str | Iterable[str]) -> list[dict[str, Any]]:
    """Every JSON-RPC message of an SSE body."""
    return list(iter_sse_messages(body))


def sse_ids(body: str | Iterable[str]) -> list[str]:
    """The event ids of an SSE body, in order."""
    return [line[len("id: ") :] for line in _lines(body) if line.startswith("id: ")]


def read_to_first_message(stream: httpx.Response) -> str | None:
    """Read a streamed answer up to its first JSON-RPC message, and no further; the id of the
    last event read (each read is bounded by the client's timeout)."""
    last_id = None
    got_message = False
    for line in stream.iter_lines():
        if line.startswith("id: "):
            last_id = line[len("id: ") :]
        got_message = got_message or line.startswith("data: {")
        if got_message and not line:
            break  # the event is whole: its fields may come in any order
    return last_id


# -- the stateless revision --------------------------------------------------------------------

STATELESS_VERSION = "2026-07-28"  # the revision without sessions: each request says who it is


def stateless_meta(capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `_meta` a 2026-07-28 request carries: the revision, the client's capabilities and name."""
    return {
        "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }


def stateless_request(
    method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A 2026-07-28 request: `params` with `meta` (by default `stateless_meta()`) as their `_meta`."""
    return rpc(method, {**(params or {}), "_meta": stateless_meta() if meta is None else meta})


def stateless_headers(method: str, name: str | None = None, **extra: str) -> dict[str, str]:
    """The routing headers a conforming 2026-07-28 client sends with `method` (and a tool's `name`)."""
    sent = {**HEADERS, "mcp-protocol-version": STATELESS_VERSION, "mcp-method": method}
    if name is not None:
        sent["mcp-name"] = name
    return {**sent, **extra}


def post_stateless(
    http: httpx.Client,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    meta: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """POST one 2026-07-28 request with the routing headers a conforming client sends, and
    `headers` besides (say a credential)."""
    sent = {**stateless_headers(method, (params or {}).get("name")), **(headers or {})}
    return http.post("/mcp", json=stateless_request(method, params, meta), headers=sent)


# -- runs across several processes of tests/workers_app.py ------------------------------------

WORKERS_APP = "tests.workers_app:app"
# A fixed test secret of 32+ bytes, shared by every process of a deployment.
SECRET = "workers-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"
CONCURRENT_SESSIONS = 5  # two cores serve the servers and the clients
PID_HEADER = "x-worker-pid"
FRESH_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)  # a new connection per request
ELICITATION: dict[str, Any] = {"elicitation": {}}  # the capability of a client that can ask its user
ORDER = {"item": "tea", "quantity": 2}
COLOUR = {"colour": "teal"}


def deployment_env(redis_url: str = "", secret: str = SECRET) -> dict[str, str]:
    """What every process of a deployment gets: the shared secret (or none: a process of its
    own), and a Redis or none."""
    return {"FASTAPI_MCP_ROUTES_SECRET": secret, "FASTAPI_MCP_ROUTES_REDIS_URL": redis_url}


@dataclass
class Tally:
    """How a run went: the operations that succeeded, why the others failed (an error, a
    refusal, an error result; an error ends its session), and which processes served them."""

    succeeded: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    pids: set[str] = field(default_factory=set)

    def failed(self, reason: str) -> None:
        self.failures[reason[:300]] += 1

    def note(self, response: httpx.Response) -> dict[str, Any] | None:
        """Count one answer over plain HTTP; its result when it succeeded."""
        self.pids.add(response.headers.get(PID_HEADER, "none"))
        message = final_message(response)
        reason = refusal(message) if message is not None else "no JSON-RPC answer"
        if message is None or reason is not None:
            self.failed(f"{response.status_code} {reason}")
            return None
        self.succeeded += 1
        result: dict[str, Any] = message["result"]
        return result

    def note_result(self, result: types.CallToolResult) -> None:
        """Count one SDK tool call, whose structured result says which process ran it."""
        if result.is_error:
            text = " ".join(block.text for block in result.content if isinstance(block, types.TextContent))
            self.failed(f"isError: {text}")
            return
        self.succeeded += 1
        self.pids.add(str((result.structured_content or {}).get("pid", "none")))

    def add(self, other: Tally) -> None:
        self.succeeded += other.succeeded
        self.failures.update(other.failures)
        self.pids |= other.pids

    def report(self) -> str:
        reasons = "; ".join(f"{count} x {reason}" for reason, count in self.failures.most_common())
        return f"{self.failures.total()} failures ({reasons}), {self.succeeded} successes"


async def over_processes(run: Callable[[], Awaitable[Tally]], processes: int, tries: int = 3) -> Tally:
    """`run`, again (at most `tries` times in all) until `processes` processes served it, or
    something failed: uvicorn's workers take connections as the kernel hands them out, and on a
    busy machine one worker may take a whole run."""
    total = Tally()
    for _ in range(tries):
        total.add(await run())
        if len(total.pids) >= processes or total.failures:
            break
    return total


def assert_all_succeeded(tally: Tally, processes: int) -> None:
    """Every operation of the run succeeded, served by this many processes."""
    assert not tally.failures, tally.report()
    assert len(tally.pids) == processes, f"served by {sorted(tally.pids)}, expected {processes} processes"


def final_message(response: httpx.Response) -> dict[str, Any] | None:
    """The JSON-RPC answer of a response, in JSON or as the last message of its SSE body."""
    content_type = response.headers.get("content-type", "")
    try:
        if content_type.startswith("application/json"):
            message: dict[str, Any] = response.json()
            return message
        if content_type.startswith("text/event-stream"):
            messages = sse_messages(response.text)
            return messages[-1] if messages else None
    except ValueError:
        return None
    return None


def refusal(message: dict[str, Any]) -> str | None:
    """Why a JSON-RPC answer is not a success: its error, or its error result's text."""
    if "error" in message:
        return str(message["error"].get("message"))
    result = message.get("result")
    if not isinstance(result, dict):
        return f"no result in {message!r}"
    if result.get("isError"):
        return " ".join(block.get("text", "") for block in result.get("content", []))
    return None


def describe(error: BaseException) -> str:
    """An error in a line: the first of a group, by type and message."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


async def a_few_at_once(task: Callable[[], Awaitable[None]], times: int, tally: Tally) -> None:
    """Run `task` `times` times, `CONCURRENT_SESSIONS` at once (one client at a time would find
    one uvicorn worker taking nearly every connection), each within `WAIT_S`. An error ends its
    task and is counted as a failure; the first task that hangs stops the run."""
    limiter = anyio.CapacityLimiter(CONCURRENT_SESSIONS)
    async with anyio.create_task_group() as running:

        async def bounded() -> None:
            async with limiter:
                try:
                    with anyio.fail_after(WAIT_S):
                        await task()
                except TimeoutError:
                    tally.failed(f"no answer within {WAIT_S} s: the run stopped there")
                    running.cancel_scope.cancel()
                except Exception as error:
                    tally.failed(describe(error))

        for _ in range(times):
            running.start_soon(bounded)


async def sessions_over_fresh_connections(url: str, sessions: int, calls: int) -> Tally:
    """Session-era sessions over plain HTTP, a new connection for each request (as clients
    without a pool, and balancers that turn per connection, send them)."""
    tally = Tally()
    opening = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:

        async def one_session() -> None:
            opened = await http.post("/mcp", json=initialize(), headers=opening)
            if tally.note(opened) is None:
                return
            headers = {**opening, "mcp-session-id": opened.headers["mcp-session-id"]}
            for number in range(calls):
                call = tool_call("read_note", {"note_id": number}, request_id=number + 1)
                tally.note(await http.post("/mcp", json=call, headers=headers))

        await a_few_at_once(one_session, sessions, tally)
    return tally


async def sdk_sessions(url: str, mode: str, sessions: int, calls: int) -> Tally:
    """The official client's sessions (`legacy`), or its stateless calls (`auto`)."""
    tally = Tally()

    async def one_session() -> None:
        async with mcp_client(url, mode=mode) as client:
            for number in range(calls):
                tally.note_result(await client.call_tool("read_note", {"note_id": number}))

    await a_few_at_once(one_session, sessions, tally)
    return tally


async def stateless_rounds(url: str, rounds: int) -> Tally:
    """2026-07-28 requests, a new connection each: a list, a read, and a mutation the user
    confirms through `input_required`, whose retry carries the requestState."""
    tally = Tally()
    capable = stateless_meta(ELICITATION)
    order = {"name": "place_order", "arguments": ORDER}
    async with httpx.AsyncClient(base_url=url, timeout=WAIT_S, limits=FRESH_CONNECTIONS) as http:

        async def post(
            method: str, params: dict[str, Any], meta: dict[str, Any] | None = None
        ) -> dict[str, Any] | None:
            headers = stateless_headers(method, params.get("name"))
            return tally.note(await http.post("/mcp", json=stateless_request(method, params, meta), headers=headers))

        async def one_round() -> None:
            await post("tools/list", {})
            await post("tools/call", {"name": "read_note", "arguments": {"note_id": 1}})
            asked = await post("tools/call", order, capable)
            if asked is None:
                return
            if asked.get("resultType") != "input_required":
                tally.failed(f"a mutation ran unconfirmed: {asked!r}")
                return
            [key] = asked["inputRequests"]
            answer = {key: {"action": "accept", "content": {}}}
            done = await post(
                "tools/call", {**order, "requestState": asked["requestState"], "inputResponses": answer}, capable
            )
            if done is not None and "order" not in done.get("structuredContent", {}):
                tally.failed(f"a confirmed mutation did not run: {done!r}")

        await a_few_at_once(one_round, rounds, tally)
    return tally


async def sdk_confirmed_mutations(url: str, mode: str, sessions: int) -> tuple[Tally, int]:
    """The official client's sessions whose calls ask the user, who accepts: two orders (the
    confirmation asks) and a question the route asks; and how many questions came."""
    tally = Tally()
    asked = 0

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        nonlocal asked
        asked += 1
        return types.ElicitResult(action="accept", content=dict(COLOUR) if params.message == "Which colour?" else {})

    async def one_session() -> None:
        async with mcp_client(url, mode=mode, elicitation_callback=on_elicit) as client:
            for _ in range(2):
                ordered = await client.call_tool("place_order", ORDER)
                tally.note_result(ordered)
                if not ordered.is_error and "order" not in (ordered.structured_content or {}):
                    tally.failed(f"a confirmed mutation did not run: {ordered.structured_content!r}")
            answered = await client.call_tool("ask", {})
            tally.note_result(answered)
            if (answered.structured_content or {}).get("content") != COLOUR:
                tally.failed(f"the route did not get the answer: {answered.structured_content!r}")

    await a_few_at_once(one_session, sessions, tally)
    return tally, asked


# -- bearer tokens from a test issuer ----------------------------------------------------------

ISSUER = "https://issuer.example"
AUDIENCE = "https://api.example/mcp"


def rsa_pair() -> tuple[str, str]:
    """A fresh RSA key pair, as (private PEM, public PEM)."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private_pem, public_pem


PRIVATE, PUBLIC = rsa_pair()


def claims(**changes: Any) -> dict[str, Any]:
    """Claims for alice from ISSUER to AUDIENCE, valid for five minutes; a change to None drops a claim."""
    now = int(time.time())
    merged = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now + 300, **changes}
    return {key: value for key, value in merged.items() if value is not None}


def token(private: str = PRIVATE, kid: str | None = "k1", **changes: Any) -> str:
    """An RS256 token with scope notes:read, signed by the issuer's key unless told otherwise."""
    headers = {"kid": kid} if kid else None
    return str(jwt.encode(claims(**{"scope": "notes:read", **changes}), private, algorithm="RS256", headers=headers))


def _segment(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def unsigned(**changes: Any) -> str:
    """A token that says `alg: none` and carries no signature."""
    return f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims(**changes))}."


def hs256_with_public_key() -> str:
    """The classic confusion attack: HMAC-sign with the RSA public key as the secret."""
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    signing_input = f"{_segment(header)}.{_segment(claims(sub='mallory'))}"
    signature = hmac.new(PUBLIC.encode(), signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def public_jwk(kid: str) -> dict[str, Any]:
    """The issuer's public key as a JWK named `kid`."""
    key: dict[str, Any] = jwk.construct(PUBLIC, "RS256").to_dict()
    return {**key, "kid": kid, "alg": "RS256", "use": "sig"}


# -- a real browser ----------------------------------------------------------------------------

CHROMIUM_VARIABLE = "FASTAPI_MCP_ROUTES_CHROMIUM"
# Where the browser tests leave their screenshots (git-ignored): what the page looked like.
ARTIFACTS = ROOT / ".artifacts" / "explorer"


def chromium_path() -> str | None:
    """The Chromium the browser tests drive: the executable `FASTAPI_MCP_ROUTES_CHROMIUM` names,
    else Debian's `chromium` on PATH. Never a browser Playwright downloads."""
    named = os.environ.get(CHROMIUM_VARIABLE)
    found = named or shutil.which("chromium") or shutil.which("chromium-browser")
    return found if found and os.access(found, os.X_OK) else None


def chromium_missing() -> str | None:
    """Why there is no Chromium to drive here, and how to get one; `None` when there is."""
    if chromium_path() is not None:
        return None
    return (
        "The explorer's browser tests need Chromium: install Debian's (apt-get install chromium; "
        f"`make test` does), or set {CHROMIUM_VARIABLE} to a Chromium executable."
    )


@contextmanager
def chromium() -> Iterator[Browser]:
    """Headless Chromium, launched from the system's executable, closed at the end."""
    executable = chromium_path()
    if executable is None:
        raise RuntimeError(chromium_missing())
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, timeout=WAIT_S * 1000)
        try:
            yield browser
        finally:
            browser.close()


class ExplorerPage:
    """The explorer open in a browser tab, as a person uses it: what it lists, the Authorize
    dialog, a tool's form; and every console error and uncaught exception of the page."""

    def __init__(self, page: Page, url: str) -> None:
        self.page = page
        self.url = url
        self.errors: list[str] = []
        page.set_default_timeout(WAIT_S * 1000)
        page.on("console", lambda message: self._console(message.type, message.text))
        page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, kind: str, text: str) -> None:
        if kind == "error":
            self.errors.append(text)

    def open(self) -> None:
        """Load the page and wait until it has shown what the endpoint lists."""
        self.page.goto(f"{self.url}/mcp/explorer")
        self.loaded()

    def loaded(self) -> None:
        # The status line empties once everything is loaded and shown.
        self.page.locator("#status").wait_for(state="hidden")

    def tool_names(self) -> list[str]:
        names: list[str] = self.page.eval_on_selector_all("#tools .card", "cards => cards.map(c => c.dataset.name)")
        return names

    def authorize(self, **fields: str) -> None:
        """Enter credentials under Authorize (`x_api_key="..."` fills the x-api-key field,
        `authorization` the bearer token) and wait for the page to show what they see."""
        self.page.click("#authorize")
        for name, value in fields.items():
            self.page.fill(f"#credential-{name.replace('_', '-')}", value)
        self.page.click("#authorize-save")
        self.page.locator("#caller").filter(has_text="Sending").wait_for()
        self.loaded()

    def tool(self, name: str) -> Locator:
        """A tool's card, opened, with its form (built when the card is first opened)."""
        card = self.page.locator(f"#tools .card[data-name='{name}']")
        if card.get_attribute("open") is None:
            card.locator(":scope > summary").click()
        card.locator(":scope > .try").wait_for()
        return card

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


# -- tool discovery ----------------------------------------------------------------------------

# The credential headers `mcp_routes` uses by default.
CREDENTIALS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-auth-token"})


def registry_of(app: FastAPI, credential_headers: frozenset[str] = CREDENTIALS) -> ToolRegistry:
    """The tool registry of `app`, keeping `credential_headers` out of the tools' arguments."""
    return ToolRegistry(app, credential_headers)


def tool_of(app: FastAPI, name: str, credential_headers: frozenset[str] = CREDENTIALS) -> Tool:
    """The tool `name` as discovered in `app` now."""
    return registry_of(app, credential_headers).table().by_name[name]


# -- an app whose tools stream -----------------------------------------------------------------

Context = Annotated[ToolContext, Depends()]


class Observed:
    """What the server-side routes saw, read by the tests across the server's thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.quiet_started = threading.Event()  # set as the `quiet` route starts
        self.gate = threading.Event()  # holds the `gated` route until a test opens it
        self.gated_done = threading.Event()  # set as the `gated` route returns


observed = Observed()


def streaming_app(**options: Any) -> FastAPI:
    """An app whose tools stream: progress, logs, questions, cancellation, long quiet calls;
    `options` go to `mcp_routes`."""
    app = FastAPI(title="Streaming")
    # What these routes do with their stream is the subject here, not confirming mutations.
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False), **options))

    @mcp_tool()
    @app.get("/count")
    async def count(ctx: Context, steps: int = 3) -> dict[str, int]:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, total=steps, message=f"step {step}")
        return {"steps": steps}

    @mcp_tool()
    @app.get("/chatty")
    async def chatty(ctx: Context) -> dict[str, bool]:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, {"said": level}, logger="chatty")
        return {"done": True}

    @mcp_tool()
    @app.get("/slow")
    async def slow(ctx: Context) -> dict[str, bool]:
        try:
            await ctx.report_progress(1)  # tells the test the route is running
            await anyio.sleep_forever()  # runs until the test cancels it
        except anyio.get_cancelled_exc_class():
            observed.cancelled.set()
            raise
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.get("/quiet")
    async def quiet() -> dict[str, bool]:
        observed.quiet_started.set()  # tells the test the route is running; the client hears nothing
        await anyio.sleep_forever()  # runs until the test cancels it
        return {"finished": True}  # pragma: no cover - never reached

    @mcp_tool()
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
        answer = await ctx.elicit("Which colour?", schema)
        return {"action": answer.action, "content": answer.content}

    @mcp_tool()
    @app.get("/gated")
    async def gated(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        opened = await anyio.to_thread.run_sync(observed.gate.wait, WAIT_S)
        await ctx.report_progress(2)
        observed.gated_done.set()
        return {"opened": opened}

    @mcp_tool()
    @app.post("/ask-twice")
    async def ask_twice(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
        first = await ctx.elicit("First question?", schema)
        second = await ctx.elicit("Second question?", schema)
        return {"answers": [first.content, second.content]}

    @mcp_tool()
    @app.post("/broad")
    async def broad(ctx: Context) -> dict[str, Any]:
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
        try:
            answer = await ctx.elicit("Anything?", schema)
        except Exception as exc:  # a route's own broad handler must not swallow the question
            return {"swallowed": type(exc).__name__}
        return {"answer": answer.content}

    @mcp_tool()
    @app.post("/complete")
    async def complete(ctx: Context, prompt: str) -> dict[str, Any]:
        message = {"role": "user", "content": {"type": "text", "text": prompt}}
        result = await ctx.sample([message], max_tokens=20, system_prompt="Be brief.")
        return {"model": result.get("model"), "text": result.get("content", {}).get("text")}

    @mcp_tool()
    @app.get("/many")
    async def many(ctx: Context, count: int) -> dict[str, int]:
        for step in range(1, count + 1):
            await ctx.report_progress(step)
        return {"count": count}

    @mcp_tool()
    @app.get("/long")
    async def long(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(1)
        # Simulated slow work, not synchronisation: the quiet stretch in which keep-alives go out.
        await anyio.sleep(0.3)
        return {"done": True}

    @mcp_tool()
    @app.get("/plain")
    async def plain(ctx: Context) -> dict[str, Any]:
        return {"is_tool_call": ctx.is_tool_call, "session": ctx.session_id is not None}

    return app


NOTES: list[str] = []  # what `notes_app`'s `add_note` added


def notes_app(**options: Any) -> FastAPI:
    """A small app for deployments of several processes: a read-only tool, a gated mutation and
    a tool whose route asks its client; `options` go to `mcp_routes`."""
    app = FastAPI(title="Notes")
    app.include_router(mcp_routes(app, **options))

    @mcp_tool(name="list_notes")
    @app.get("/notes")
    def list_notes() -> list[str]:
        return NOTES

    @mcp_tool(name="add_note")
    @app.post("/notes")
    def add_note(text: str) -> dict[str, str]:
        NOTES.append(text)
        return {"added": text}

    @mcp_tool(name="ask", confirm=False)
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Which colour?", {"type": "object", "properties": {}})
        return {"action": answer.action}

    return app


def pending_of(result: Mapping[str, Any]) -> dict[str, Any]:
    """The plan and token of a gated call's pending answer: an `isError` result with no
    structured content (the tool's outputSchema is the route's own), carrying them in `_meta`."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    pending: dict[str, Any] = result["_meta"][PENDING_META_KEY]
    assert pending["pending"] is True
    (block,) = result["content"]  # what the model reads: what to do, then the plan as JSON
    how, plan = block["text"].rsplit("\n", 1)
    assert f"confirmationToken={pending['token']!r}" in how
    assert json.loads(plan) == pending
    return pending


def sdk_pending_of(result: types.CallToolResult) -> dict[str, Any]:
    """`pending_of` for the official SDK client's result: what a program reads the token from."""
    return pending_of(result.model_dump(by_alias=True, exclude_none=True))


def is_pending(result: Mapping[str, Any]) -> bool:
    """Whether a gated call's answer is its pending plan (an `isError` result too), not a refusal."""
    return PENDING_META_KEY in result.get("_meta", {})
