"""A round-robin HTTP balancer for tests: each request goes to the next upstream in turn.

    python scripts/round_robin.py --port 0 http://127.0.0.1:8001 http://127.0.0.1:8002

It listens on 127.0.0.1 only and prints `listening on http://127.0.0.1:N` once it accepts
connections (`--port 0` picks a free port). It stands in for the load balancer in front of
several replicas, at its least forgiving: it turns per *request*, not per connection, so two
requests on one keep-alive connection reach different upstreams, and nothing sticks a session
to the process that opened it.

Deliberate choices:
- Bodies stream both ways. A request body is handed to the upstream as it arrives; a response
  is relayed chunk by chunk as the upstream sends it (`aiter_raw`: bytes as they came, encoded
  or not), so an SSE stream that stays open for minutes delivers each event when it is sent.
- One exchange is one task group: the relay of the upstream's answer, and a watch on the
  client's connection. The first to end cancels the other, and the upstream response is always
  closed, so a client that hangs up is seen by the upstream at once, even while the upstream is
  quiet. (Starlette's `StreamingResponse` learns of a disconnect only on its next write under
  ASGI 2.4, and then skips its background task: a quiet SSE stream would outlive its client.)
- Headers pass end to end, Host included, except the hop-by-hop ones (RFC 9110 section 7.6.1);
  each answer says where it went in `x-upstream: <index>`, counting upstreams from 0.
- No timeout on reading an upstream: a quiet stream is not a dead one. The upstreams are local.
"""

from __future__ import annotations

import argparse
import itertools
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import Final

import anyio
import httpx
import uvicorn
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from starlette.types import Receive, Scope, Send

HOST: Final = "127.0.0.1"
UPSTREAM_HEADER: Final = b"x-upstream"
# RFC 9110 section 7.6.1, and Trailer (the framing is this hop's); a Connection header may name
# more. Proxy-Authorization passes: this balancer asks for none, and the endpoint counts it a
# credential of the caller's (RFC 9110 section 11.7.2 lets a proxy relay it).
HOP_BY_HOP: Final = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"transfer-encoding", b"upgrade"}
)
Headers = list[tuple[bytes, bytes]]
# Seconds a shutdown waits for open exchanges (streams that never end) before cancelling them.
SHUTDOWN_S: Final = 2


class RoundRobin:
    """An ASGI app that forwards each request to the next of `upstreams`, streaming both ways."""

    def __init__(self, upstreams: Sequence[str], client: httpx.AsyncClient) -> None:
        if not upstreams:
            raise ValueError("round_robin needs at least one upstream URL, got none")
        self._upstreams = [_upstream(url) for url in upstreams]
        self._client = client
        self._turn = itertools.count()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise RuntimeError(f"round_robin forwards HTTP only, got a {scope['type']!r} connection")
        index = next(self._turn) % len(self._upstreams)
        body_in, body_out = anyio.create_memory_object_stream[bytes]()
        has_body = _has_body(scope["headers"])
        # Built as a plain request, not by the client, which would add headers of its own.
        request = httpx.Request(
            scope["method"],
            _target(self._upstreams[index], scope),
            headers=_end_to_end(scope["headers"]),
            content=_chunks(body_out) if has_body else None,
        )
        with body_out:  # closed at the end, whether or not the upstream read the body
            await _first_to_end(
                partial(_relay, self._client, request, index, send),
                partial(_read_client, receive, body_in, has_body),
            )


async def _first_to_end(*tasks: Callable[[], Awaitable[None]]) -> None:
    """Run `tasks` together; the first to end cancels the others."""
    async with anyio.create_task_group() as group:

        async def run(task: Callable[[], Awaitable[None]]) -> None:
            await task()
            group.cancel_scope.cancel()

        for task in tasks:
            group.start_soon(run, task)


async def _relay(client: httpx.AsyncClient, request: httpx.Request, index: int, send: Send) -> None:
    try:
        upstream = await client.send(request, stream=True)
    except httpx.HTTPError as error:
        await _bad_gateway(send, index, f"upstream {index} ({request.url}) failed: {error!r}\n")
        return
    try:
        headers = [*_end_to_end(upstream.headers.raw), (UPSTREAM_HEADER, str(index).encode())]
        await send({"type": "http.response.start", "status": upstream.status_code, "headers": headers})
        async for chunk in upstream.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        with anyio.CancelScope(shield=True):
            await upstream.aclose()  # before its end: the upstream's connection closes


async def _read_client(receive: Receive, body: MemoryObjectSendStream[bytes], has_body: bool) -> None:
    """Hand the request body on as it comes, then wait for the client to hang up."""
    async with body:
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            if has_body and message.get("body"):
                await body.send(message["body"])
            more = message.get("more_body", False)
    while (await receive())["type"] != "http.disconnect":
        pass


async def _chunks(body: MemoryObjectReceiveStream[bytes]) -> AsyncIterator[bytes]:
    async for chunk in body:
        yield chunk


async def _bad_gateway(send: Send, index: int, text: str) -> None:
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(text.encode())).encode()),
        (UPSTREAM_HEADER, str(index).encode()),
    ]
    await send({"type": "http.response.start", "status": 502, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode()})


def _upstream(url: str) -> httpx.URL:
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host or parsed.query or parsed.fragment:
        raise ValueError(f"an upstream must be an http(s) URL without query or fragment, got {url!r}")
    return parsed


def _target(upstream: httpx.URL, scope: Scope) -> httpx.URL:
    """The upstream URL for a request: its path as the client wrote it, after the upstream's own."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope["query_string"]
    prefix = upstream.raw_path.rstrip(b"/")
    return upstream.copy_with(raw_path=prefix + raw_path + (b"?" + query if query else b""))


def _end_to_end(headers: Sequence[tuple[bytes, bytes]]) -> Headers:
    """The headers a proxy passes on: not the hop-by-hop ones, and each value without the
    whitespace around it, which is not part of it (RFC 9110 section 5.5). httptools leaves it on
    what it parsed, and httpx refuses to send a value that starts or ends with it."""
    named = {
        name.strip().lower().encode()
        for key, value in headers
        if key.lower() == b"connection"
        for name in value.decode("latin-1").split(",")
    }
    return [(key, value.strip(b" \t")) for key, value in headers if key.lower() not in HOP_BY_HOP | named]


def _has_body(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    for key, value in headers:
        if key.lower() == b"transfer-encoding":
            return True
        if key.lower() == b"content-length":
            return value.strip() != b"0"
    return False


async def serve(upstreams: Sequence[str], port: int) -> None:
    """Balance requests over `upstreams` on 127.0.0.1:`port` (0: a free one) until stopped."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((HOST, port))
    listener.listen(socket.SOMAXCONN)  # connections queue from now on, before the server runs
    # No timeout on reads (quiet streams), no bound on connections (each open stream holds one),
    # and no proxy from the environment: the upstreams are on this machine.
    timeout = httpx.Timeout(10.0, read=None, write=None, pool=None)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
    async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:
        config = uvicorn.Config(
            RoundRobin(upstreams, client),
            lifespan="off",
            log_level="warning",
            # The upstreams' own Date and Server headers pass through; no second pair.
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=SHUTDOWN_S,
        )
        print(f"listening on http://{HOST}:{listener.getsockname()[1]}", flush=True)
        await uvicorn.Server(config).serve(sockets=[listener])


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one (default)")
    parser.add_argument("upstreams", nargs="+", metavar="UPSTREAM_URL", help="base URL of an upstream")
    args = parser.parse_args(argv)
    try:
        for url in args.upstreams:
            _upstream(url)
    except ValueError as error:
        parser.error(str(error))
    anyio.run(serve, args.upstreams, args.port)


if __name__ == "__main__":
    main()
