"""nginx configured by docs/nginx.conf, the file users copy, in front of two servers: it turns
per request, passes the MCP headers and credentials as sent, sets the client's address, streams
events as they are written, and passes a client's hang-up on to the server."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from tests.support.machine import free_port
from tests.support.nginx import nginx, render_site
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.processes

MAX_BODY_BYTES = 4 * 1024 * 1024  # Limits.max_body_bytes by default, and the file's cap


class Observed:
    """What the servers saw, read by the tests across the servers' threads."""

    def __init__(self) -> None:
        self.first_event_read = threading.Event()  # the client has the stream's first event
        self.hung_up = threading.Event()  # a server saw its client disconnect
        self.holding = threading.Event()  # a server holds a request without answering
        self.posted: list[str] = []  # the bodies of the POSTs to /posted, as they arrived


observed = Observed()


class Upstream:
    """A server behind nginx, named so a test can tell which one answered."""

    def __init__(self, name: str) -> None:
        self.name = name
        # By the first segment of the path.
        self.routes = {
            "echo": self.echo,
            "events": self.events,
            "quiet": self.quiet,
            "hold": self.hold,
            "posted": self.note_post,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        handler = self.routes.get(scope["path"].split("/")[1], self.say_name)
        await handler(scope, receive, send)

    async def say_name(self, scope: Scope, receive: Receive, send: Send) -> None:
        await answer(send, 200, self.name.encode())

    async def echo(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b"".join([chunk async for chunk in body_chunks(receive)])
        seen = {
            "method": scope["method"],
            "raw_path": scope["raw_path"].decode(),
            "query": scope["query_string"].decode(),
            "headers": [[key.decode(), value.decode()] for key, value in scope["headers"]],
            "body": body.decode(),
        }
        extra = [(b"set-cookie", b"a=1"), (b"set-cookie", b"b=2"), (b"x-custom", b"kept")]
        await answer(send, 418, json.dumps(seen).encode(), extra)

    async def events(self, scope: Scope, receive: Receive, send: Send) -> None:
        await start_events(send)
        await send_body(send, b"id: 1\ndata: first\n\n")
        # Sent only once the client read the first: a proxy that buffered would wait here.
        read = await wait_in_thread(observed.first_event_read)
        await send_body(send, b"id: 2\ndata: second\n\n" if read else b"data: the first was not delivered\n\n")
        await send({"type": "http.response.body", "body": b""})

    async def quiet(self, scope: Scope, receive: Receive, send: Send) -> None:
        await start_events(send)
        await send_body(send, b": open\n\n")
        await until_disconnect(receive)  # says nothing more, as an idle SSE stream does

    async def hold(self, scope: Scope, receive: Receive, send: Send) -> None:
        observed.holding.set()
        await until_disconnect(receive)  # answers nothing at all, as a JSON-only slow call

    async def note_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        observed.posted.append(b"".join([chunk async for chunk in body_chunks(receive)]).decode())
        await answer(send, 200, self.name.encode())


@contextmanager
def dropping_server() -> Iterator[tuple[str, list[bytes]]]:
    """A server that reads each request's head and drops the connection without an answer, as a
    process that crashed mid-request; yields its URL and the heads it read."""
    heads: list[bytes] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def drop_each() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test is over
            while True:
                connection, _ = listener.accept()
                with connection:
                    heads.append(connection.recv(65536))

    thread = threading.Thread(target=drop_each, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", heads
    finally:
        with contextlib.suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept: closing alone does not (Linux)
        listener.close()
        thread.join(WAIT_S)


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        await send({"type": message["type"] + ".complete"})
        if message["type"] == "lifespan.shutdown":
            return


async def body_chunks(receive: Receive) -> AsyncIterator[bytes]:
    more = True
    while more:
        message = await receive()
        if message.get("body"):
            yield message["body"]
        more = message.get("more_body", False)


async def until_disconnect(receive: Receive) -> None:
    message: Message = await receive()
    while message["type"] != "http.disconnect":
        message = await receive()
    observed.hung_up.set()


async def answer(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    sent = [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": body})


async def start_events(send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})


async def send_body(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def wait_in_thread(event: threading.Event) -> bool:
    return await anyio.to_thread.run_sync(event.wait, WAIT_S)


@pytest.fixture(scope="module")
def balancer() -> Iterator[str]:
    with serve(Upstream("zero")) as zero, serve(Upstream("one")) as one, nginx(zero, one) as url:
        yield url


def raw_exchange(url: str, request: bytes) -> tuple[bytes, bytes]:
    """Send `request` as written (it ends with `Connection: close`); the answer's head and body."""
    address = urlsplit(url)
    with socket.create_connection((address.hostname or "", address.port or 0), timeout=WAIT_S) as raw:
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return head, body


def test_the_rendered_file_names_only_the_tests_processes_and_address() -> None:
    site = render_site(["http://127.0.0.1:1111", "http://127.0.0.1:2222", "http://127.0.0.1:3333"], 4444)
    directives = [line.strip() for line in site.splitlines() if line.strip() and not line.strip().startswith("#")]
    servers = [line for line in directives if line.startswith("server 127.")]
    assert servers == ["server 127.0.0.1:1111;", "server 127.0.0.1:2222;", "server 127.0.0.1:3333;"]
    assert [line for line in directives if line.startswith("listen")] == ["listen 127.0.0.1:4444;"]


def test_each_request_on_one_keep_alive_connection_goes_to_the_next_server(balancer: str) -> None:
    address = urlsplit(balancer)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=WAIT_S)
    names = []
    try:
        for _ in range(4):
            connection.request("GET", "/name")
            names.append(connection.getresponse().read().decode())
            if len(names) == 1:
                first_socket = connection.sock
        assert connection.sock is first_socket  # one connection all along, never reopened
    finally:
        connection.close()
    assert names in (["zero", "one", "zero", "one"], ["one", "zero", "one", "zero"])


def test_the_mcp_headers_credentials_and_body_reach_the_server_as_sent(balancer: str) -> None:
    sent_headers = {
        "authorization": "Bearer t",
        "mcp-session-id": "sealed.session-id",
        "mcp-protocol-version": "2025-11-25",
        "last-event-id": "stream-1:7",
        "mcp-method": "tools/call",
        "mcp-name": "read_note",
        "mcp-param-region": "eu",
        "x-api-key": "k",
    }
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.post("/echo/a%2Fb/c?q=1&r=%20", content=b'{"a": 1}', headers=sent_headers)
    seen = response.json()
    headers = dict(seen["headers"])
    assert (seen["method"], seen["raw_path"], seen["query"]) == ("POST", "/echo/a%2Fb/c", "q=1&r=%20")
    assert (seen["body"], headers["content-length"]) == ('{"a": 1}', "8")
    assert {name: headers.get(name) for name in sent_headers} == sent_headers
    assert headers["host"] == urlsplit(balancer).netloc  # as the client sent it, port included
    assert "connection" not in headers  # cleared: nginx keeps its connections to the servers open


def test_the_clients_address_overwrites_any_forwarded_for_it_sent(balancer: str) -> None:
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.get("/echo", headers={"x-forwarded-for": "203.0.113.9"})
    headers = dict(response.json()["headers"])
    assert (headers["x-forwarded-for"], headers["x-forwarded-proto"]) == ("127.0.0.1", "http")


def test_status_and_response_headers_pass_end_to_end(balancer: str) -> None:
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.get("/echo")
    assert response.status_code == 418
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.headers["x-custom"] == "kept"


def test_an_sse_stream_delivers_each_event_as_it_is_sent(balancer: str) -> None:
    observed.first_event_read.clear()
    lines = []
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client, client.stream("GET", "/events") as stream:
        for line in stream.iter_lines():
            lines.append(line)
            if line == "data: first":
                observed.first_event_read.set()
    assert lines == ["id: 1", "data: first", "", "id: 2", "data: second", ""]


def test_a_client_that_hangs_up_on_a_quiet_stream_closes_the_servers_stream(balancer: str) -> None:
    observed.hung_up.clear()
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client, client.stream("GET", "/quiet") as stream:
        assert next(stream.iter_lines()) == ": open"
    # The server sent nothing since: only nginx passing the hang-up on tells it.
    assert observed.hung_up.wait(WAIT_S)


def test_a_client_that_hangs_up_before_any_answer_reaches_the_server(balancer: str) -> None:
    observed.hung_up.clear()
    observed.holding.clear()
    address = urlsplit(balancer)
    with socket.create_connection((address.hostname, address.port), timeout=WAIT_S) as connection:
        connection.sendall(f"GET /hold HTTP/1.1\r\nHost: {address.netloc}\r\n\r\n".encode())
        assert observed.holding.wait(WAIT_S)
    assert observed.hung_up.wait(WAIT_S)


def test_whitespace_around_a_header_value_is_not_passed_on(balancer: str) -> None:
    # RFC 9110 section 5.5: not part of the value; uvicorn's httptools would keep it.
    request = b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id:  \tvalue \t\r\nConnection: close\r\n\r\n"
    head, body = raw_exchange(balancer, request)
    assert head.startswith(b"HTTP/1.1 418"), head
    assert ["mcp-session-id", "value"] in json.loads(body)["headers"]


def test_a_header_named_with_an_underscore_is_dropped(balancer: str) -> None:
    # nginx's default (underscores_in_headers off), which docs/nginx.conf tells users of.
    request = b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nX_Api_Key: k\r\nConnection: close\r\n\r\n"
    _, body = raw_exchange(balancer, request)
    assert [name for name, _ in json.loads(body)["headers"] if "api" in name] == []


def test_a_body_past_the_endpoints_cap_is_answered_413_by_nginx(balancer: str) -> None:
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.post("/echo", content=b"x" * (MAX_BODY_BYTES + 1))
    assert response.status_code == 413


def test_a_server_that_cannot_be_reached_is_answered_502() -> None:
    with nginx(f"http://127.0.0.1:{free_port()}") as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        response = client.get("/anything")
    assert response.status_code == 502


@contextmanager
def dropper_and_healthy() -> Iterator[tuple[list[bytes], httpx.Client]]:
    """nginx in front of a server that drops every request and one that answers (named zero);
    the heads the first read, and a client of nginx."""
    with (
        dropping_server() as (dropper, heads),
        serve(Upstream("zero")) as healthy,
        nginx(dropper, healthy) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as client,
    ):
        yield heads, client


def test_a_post_its_server_dropped_is_answered_502_and_never_sent_to_the_other() -> None:
    # A tool call may change data: sent once, it is not sent again elsewhere.
    observed.posted.clear()
    with dropper_and_healthy() as (heads, client):
        statuses = {f"call {n}": client.post("/posted", content=f"call {n}").status_code for n in range(2)}
    [dropped] = [body for body, status in statuses.items() if status == 502]
    assert [status for status in statuses.values() if status != 502] == [200]
    assert heads  # the dropping server read it
    assert dropped not in observed.posted


def test_a_get_its_server_dropped_is_answered_by_the_other() -> None:
    with dropper_and_healthy() as (heads, client):
        answers = [client.get("/name") for _ in range(2)]
    assert [(answer.status_code, answer.text) for answer in answers] == [(200, "zero"), (200, "zero")]
    assert heads  # the dropping server had one of them first
