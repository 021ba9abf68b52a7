"""Server CPU of an authenticated call, REST and MCP tool call, with the PyJWT `JWTBearer` and
with the python-jose one it replaced, side by side in one run.

    .venv/bin/python benchmarks/jwt_auth.py            # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/jwt_auth.py --quick    # a smoke run

Deliberate choices:
- Two servers of the same app (`jwt_app.py`), one uvicorn worker each on h11 + asyncio: one
  with the library's `JWTBearer` (PyJWT), run by this interpreter; one with `JWTBearer` as it
  was before the port, read from git history (the parent of the commit that took the last
  `from jose import` out of `auth/jwt.py`) into a module file under `.tools/bench/jose/`, run
  by a virtualenv there that has python-jose (made on first use, with this project's FastAPI,
  Starlette, pydantic, uvicorn and cryptography versions). The project's own virtualenv stays
  free of python-jose.
- The token is RS256 (2048-bit key, the key most issuers sign with), the key a PEM given at
  startup; each request carries it and each verification runs in full (no cache of verified
  tokens in either version).
- Four calls on each server: REST with no token (the floor), REST with the token verified by
  the route's `Security`, and the tool call in a 2025-11-25 session and in 2026-07-28, each
  verifying the token at `/mcp` and again at the route (see `jwt_app.py`).
- Server CPU (utime + stime of the server's process, from /proc) per call is the figure, as in
  `tool_call_vs_rest.py`: each round runs every call on both servers back to back, their order
  flipping every round; a figure is the median over rounds of CPU per call, a ratio the median
  of the per-round ratios. Servers are pinned to the last CPU, this client to the first.
- Each round also times the bearer alone, called as FastAPI calls it, in a process of each
  interpreter (`jwt_app.verification_cpu_us`): the verification's own CPU, free of the HTTP
  around it, whose noise on a shared machine is larger than one verification.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
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

import jwt
from _http import BenchmarkError, Connection, Pools, Process, http_request, send_batch, uvicorn_process
from _stacks import H11, choose_pinning, pin_client
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt_app import AUDIENCE, BEARER_MODULE_ENV, ISSUER, KEY_ENV, SCOPE

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parent
JOSE_DIR: Final = ROOT / ".tools" / "bench" / "jose"
JOSE_VENV: Final = JOSE_DIR / "venv"
JOSE_BEARER: Final = JOSE_DIR / "jose_jwt_bearer.py"
JWT_MODULE: Final = "fastapi_mcp_routes/auth/jwt.py"
JOSE_PACKAGE: Final = "python-jose[cryptography]==3.5.0"
SHARED_PACKAGES: Final = ("fastapi", "starlette", "pydantic", "pydantic-core", "uvicorn", "anyio", "cryptography")
FACTORY: Final = "jwt_app:create_app"
START_TIMEOUT_S: Final = 60.0
BATCH_TIMEOUT_S: Final = 120.0
STATELESS: Final = "2026-07-28"
SESSION: Final = "2025-11-25"
ARGUMENTS: Final = {"item_id": 42, "q": "hello"}
TARGET: Final = "/items/42?q=hello"
PYJWT: Final = "PyJWT"
JOSE: Final = "python-jose"


# -- the python-jose side --------------------------------------------------------------------


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def jose_bearer_source() -> tuple[str, str]:
    """`auth/jwt.py` as it was just before python-jose left it, and the commit it is read at."""
    port = git("log", "-1", "--format=%H", "-S", "from jose import", "--", JWT_MODULE).strip()
    if not port:
        raise BenchmarkError(f"no commit in this history took python-jose out of {JWT_MODULE}")
    source = git("show", f"{port}^:{JWT_MODULE}")
    if "from jose import" not in source:
        raise BenchmarkError(f"{JWT_MODULE} at {port[:7]}^ does not use python-jose")
    return source, git("rev-parse", "--short", f"{port}^").strip()


def ensure_jose_venv() -> Path:
    """The virtualenv with python-jose and this project (made, or reused when made for the same
    requirements); its interpreter."""
    shared = [f"{name}=={importlib.metadata.version(name)}" for name in SHARED_PACKAGES]
    wanted = "\n".join([JOSE_PACKAGE, *shared, f"-e {ROOT}"])
    stamp = JOSE_VENV / ".requirements"
    python = JOSE_VENV / "bin" / "python"
    if stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"installing python-jose into {JOSE_VENV.relative_to(ROOT)} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(JOSE_VENV)], check=True, timeout=300)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, JOSE_PACKAGE, *shared, "-e", str(ROOT)], check=True, timeout=900)
    stamp.write_text(wanted)
    return python


def version_in(python: Path, package: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False)
    return done.stdout.strip() or "absent"


# -- the token -------------------------------------------------------------------------------


def issue(key_file: Path) -> str:
    """A fresh RS256 key, its public half written to `key_file`, and a token it signs."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    key_file.write_bytes(public)
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "bench", "exp": now + 24 * 3600, "scope": SCOPE}
    return jwt.encode(claims, private, algorithm="RS256")


# -- the calls -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    impl: str
    process: Process

    @property
    def port(self) -> int:
        return self.process.port


def mcp_post(port: int, token: str, message: Mapping[str, Any], headers: Mapping[str, str]) -> bytes:
    accept = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {token}"}
    return http_request(port, "POST", "/mcp", {**accept, **headers}, message)


def session_call(port: int, token: str, session_id: str) -> bytes:
    params = {"name": "get_item", "arguments": ARGUMENTS}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    return mcp_post(port, token, message, {"mcp-protocol-version": SESSION, "mcp-session-id": session_id})


def stateless_call(port: int, token: str) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"name": "get_item", "arguments": ARGUMENTS, "_meta": meta}
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"mcp-protocol-version": STATELESS, "mcp-method": "tools/call", "mcp-name": "get_item"}
    return mcp_post(port, token, message, headers)


async def open_session(connection: Connection, port: int, token: str) -> str:
    hello = {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    reply = await connection.send(mcp_post(port, token, message, {"mcp-protocol-version": SESSION}))
    session_id = reply.headers.get("mcp-session-id")
    if reply.status != 200 or not session_id:
        raise BenchmarkError(f"initialize answered HTTP {reply.status} without a session: {reply.body[:200]!r}")
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {"mcp-protocol-version": SESSION, "mcp-session-id": session_id}
    reply = await connection.send(mcp_post(port, token, done, headers))
    if reply.status != 202:
        raise BenchmarkError(f"notifications/initialized answered HTTP {reply.status}, expected 202")
    return session_id


IN_PROCESS: Final = "the bearer alone, in process (no HTTP)"
VERIFICATIONS: Final = 2000  # per round and interpreter: a fifth of a second or so
CALLS: Final = (
    "REST, no token",
    "REST, token verified once",
    f"tool call ({SESSION} session), token verified twice",
    f"tool call ({STATELESS}), token verified twice",
)


async def requests_for(server: Server, token: str, pools: Pools) -> tuple[bytes, ...]:
    """The four calls' requests for one server, checked first: the tool call's result is the REST
    JSON, and with no token both refuse."""
    (connection,) = await pools.get(server, 1)
    port = server.port
    session_id = await open_session(connection, port, token)
    bearer = {"authorization": f"Bearer {token}"}
    requests = (
        http_request(port, "GET", f"/open{TARGET}"),
        http_request(port, "GET", TARGET, bearer),
        session_call(port, token, session_id),
        stateless_call(port, token),
    )
    rest = await connection.send(requests[1])
    for request in requests[2:]:
        result = (await connection.send(request)).json().get("result", {})
        if rest.status != 200 or result.get("structuredContent") != rest.json():
            raise BenchmarkError(f"{server.impl}: the tool call gave {result!r}, REST {rest.body[:200]!r}")
    refused = [await connection.send(request.replace(token.encode(), b"x.y.z")) for request in requests[1:]]
    if [reply.status for reply in refused] != [401] * 3:
        raise BenchmarkError(f"{server.impl}: a bad token was not refused: {[r.status for r in refused]}")
    return requests


# -- the rounds ------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    cpu_us: list[float] = field(default_factory=list)  # per round: server CPU per call


def verification_cpu_us(python: Path, env: Mapping[str, str], token: str) -> float:
    code = f"import jwt_app; print(jwt_app.verification_cpu_us({token!r}, {VERIFICATIONS}))"
    done = subprocess.run(
        [str(python), "-c", code], cwd=HERE, env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise BenchmarkError(f"timing the bearer with {python} failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout)


async def measure(
    servers: Sequence[Server],
    interpreters: Mapping[str, tuple[Path, Mapping[str, str]]],
    token: str,
    options: argparse.Namespace,
) -> dict[tuple[str, str], Tally]:
    pools = Pools()
    try:
        requests = {server.impl: await requests_for(server, token, pools) for server in servers}
        tallies = {(server.impl, call): Tally() for server in servers for call in (IN_PROCESS, *CALLS)}
        for server in servers:
            (connection,) = await pools.get(server, 1)
            for index, call in enumerate(CALLS):
                request = requests[server.impl][index]
                await send_batch(server.process, [connection], [request], options.warmup, 200, call, BATCH_TIMEOUT_S)
        for round_index in range(options.rounds):
            for index, call in enumerate(CALLS):
                order = servers if round_index % 2 == 0 else list(reversed(servers))
                for server in order:
                    (connection,) = await pools.get(server, 1)
                    request = requests[server.impl][index]
                    batch = await send_batch(
                        server.process, [connection], [request], options.requests, 200, call, BATCH_TIMEOUT_S
                    )
                    tallies[server.impl, call].cpu_us.append(batch.cpu_s / options.requests * 1e6)
            order = servers if round_index % 2 == 0 else list(reversed(servers))
            for server in order:
                python, env = interpreters[server.impl]
                cpu_us = await asyncio.to_thread(verification_cpu_us, python, env, token)
                tallies[server.impl, IN_PROCESS].cpu_us.append(cpu_us)
        return tallies
    finally:
        pools.close()


# -- the report ------------------------------------------------------------------------------


def median_ratio(over: Tally, under: Tally) -> float:
    return statistics.median(a / b for a, b in zip(over.cpu_us, under.cpu_us, strict=True) if b)


def render(tallies: Mapping[tuple[str, str], Tally]) -> Iterator[str]:
    yield f"| call | {JOSE} | {PYJWT} | {PYJWT} / {JOSE} |"
    yield "|---|--:|--:|--:|"
    for call in (IN_PROCESS, *CALLS):
        jose, pyjwt = tallies[JOSE, call], tallies[PYJWT, call]
        cells = [f"{statistics.median(t.cpu_us):,.0f} µs" for t in (jose, pyjwt)]
        yield f"| {call} | {cells[0]} | {cells[1]} | {median_ratio(pyjwt, jose):.2f}x |"
    yield ""
    yield f"| ratio | {JOSE} | {PYJWT} |"
    yield "|---|--:|--:|"
    ratios = (
        ("REST with the token / REST with none", CALLS[1], CALLS[0]),
        (f"tool call ({SESSION}) / REST with the token", CALLS[2], CALLS[1]),
        (f"tool call ({STATELESS}) / REST with the token", CALLS[3], CALLS[1]),
    )
    for what, over, under in ratios:
        cells = [f"{median_ratio(tallies[impl, over], tallies[impl, under]):.2f}x" for impl in (JOSE, PYJWT)]
        yield f"| {what} | {cells[0]} | {cells[1]} |"
    yield ""
    for impl in (JOSE, PYJWT):
        pairs = zip(tallies[impl, CALLS[1]].cpu_us, tallies[impl, CALLS[0]].cpu_us, strict=True)
        verify = statistics.median(with_token - without for with_token, without in pairs)
        yield f"- {impl}: one verification (REST with the token less REST with none): {verify:,.0f} µs"


def versions(jose_python: Path, jose_commit: str) -> str:
    version = importlib.metadata.version
    head = git("rev-parse", "--short", "HEAD").strip()
    return (
        f"{PYJWT} {version('pyjwt')} (fastapi-mcp-routes {head}); {JOSE} {version_in(jose_python, 'python-jose')}"
        f" (JWTBearer at {jose_commit}); cryptography {version('cryptography')}, fastapi {version('fastapi')},"
        f" uvicorn {version('uvicorn')}; {os.cpu_count()} CPUs"
    )


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, help="measured rounds (default 7; 2 with --quick)")
    parser.add_argument("--requests", type=int, help="requests per call, server and round (default 1000)")
    parser.add_argument("--warmup", type=int, help="warm-up requests per call and server (default 200)")
    parser.add_argument("--no-pin", action="store_true", help="pin neither the servers nor this client to a CPU")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    options.rounds = options.rounds if options.rounds is not None else (2 if options.quick else 7)
    options.requests = options.requests if options.requests is not None else (50 if options.quick else 1000)
    options.warmup = options.warmup if options.warmup is not None else (20 if options.quick else 200)
    if options.rounds < 1 or options.requests < 1 or options.warmup < 1:
        parser.error("--rounds, --requests and --warmup must each be at least 1")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    started = time.monotonic()
    try:
        jose_python = ensure_jose_venv()
        source, jose_commit = jose_bearer_source()
        JOSE_BEARER.write_text(source)
        pinning, pinned = choose_pinning(not options.no_pin)
        cpu = None if pinning is None else pinning.server_cpu
        key_file = JOSE_DIR / "bench-public.pem"
        token = issue(key_file)
        interpreters: dict[str, tuple[Path, Mapping[str, str]]] = {
            PYJWT: (Path(sys.executable), {KEY_ENV: str(key_file)}),
            JOSE: (jose_python, {KEY_ENV: str(key_file), BEARER_MODULE_ENV: str(JOSE_BEARER)}),
        }
        with ExitStack() as stack:
            servers = []
            for impl, (python, env) in interpreters.items():
                process = stack.enter_context(uvicorn_process(python, FACTORY, HERE, env, impl, cpu=cpu))
                servers.append(Server(impl, process))
            deadline = time.monotonic() + START_TIMEOUT_S
            for server in servers:
                server.process.wait_listening(deadline)
            pin_client(pinning)
            tallies = asyncio.run(measure(servers, interpreters, token, options))
    except (BenchmarkError, OSError, EOFError, TimeoutError, subprocess.SubprocessError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(f"`{command}`: {options.rounds} rounds x {options.requests} requests per call, server and round.")
    print(f"Servers: one uvicorn worker each, {H11.label}. CPU pinning: {pinned}.")
    print("Server CPU per call (utime + stime): median over rounds; ratios: median of the per-round ratios.\n")
    print("\n".join(render(tallies)), end="\n\n")
    print(versions(jose_python, jose_commit))
    print(f"Total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
