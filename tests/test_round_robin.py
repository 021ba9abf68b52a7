"""scripts/round_robin.py, the balancer the multi-process tests and the conformance script put
in front of several servers: it turns per request, streams both ways, and passes a client's
hang-up on to the upstream."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import anyio
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from tests.support.machine import free_port
from tests.support.processes import round_robin
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.processes


class Observed:
    """What the upstreams saw, read by the tests across the servers' threads."""

    def __init__(self) -> None:
        self.first_event_read = threading.Event()  # the client has the stream's first event
        self.hung_up = threading.Event()  # an upstream saw its client disconnect
        self.holding = threading.Event()  # an upstream holds a request without answering
        self.first_chunk = threading.Event()  # an upstream has the first chunk of a body


observed = Observed()


class Upstream:
    """A server behind the balancer, named so a test can tell which one answered."""

    def __init__(self, name: str) -> None:
        self.name = name
        # By the first segment of the path.
        self.routes = {
            "echo": self.echo,
            "events": self.events,
            "quiet": self.quiet,
            "hold": self.hold,
            "upload": self.upload,
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
        # Sent only once the client read the first: a balancer that buffered would wait here.
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

    async def upload(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks = []
        async for chunk in body_chunks(receive):
            observed.first_chunk.set()
            chunks.append(chunk.decode())
        await answer(send, 200, "|".join(chunks).encode())


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
    with serve(Upstream("zero")) as zero, serve(Upstream("one")) as one, round_robin(zero, one) as url:
        yield url


def test_each_request_on_one_keep_alive_connection_goes_to_the_next_upstream(balancer: str) -> None:
    address = urlsplit(balancer)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=WAIT_S)
    answers = []
    try:
        for _ in range(4):
            connection.request("GET", "/name")
            response = connection.getresponse()
            answers.append((response.getheader("x-upstream"), response.read().decode()))
            if len(answers) == 1:
                first_socket = connection.sock
        assert connection.sock is first_socket  # one connection all along, never reopened
    finally:
        connection.close()
    names = {"0": "zero", "1": "one"}
    assert [name for _, name in answers] == [names[upstream] for upstream, _ in answers]
    assert [upstream for upstream, _ in answers] in (["0", "1", "0", "1"], ["1", "0", "1", "0"])


def test_method_path_query_headers_and_body_reach_the_upstream_unchanged(balancer: str) -> None:
    sent_headers = {
        "x-custom": "1",
        "authorization": "Bearer t",
        "proxy-authorization": "Basic cA==",
        "connection": "keep-alive, x-hop",
        "x-hop": "gone",
        "te": "trailers",
    }
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.post("/echo/a%2Fb/c?q=1&r=%20", content=b'{"a": 1}', headers=sent_headers)
    seen = response.json()
    headers = dict(seen["headers"])
    assert (seen["method"], seen["raw_path"], seen["query"]) == ("POST", "/echo/a%2Fb/c", "q=1&r=%20")
    assert seen["body"] == '{"a": 1}'
    assert (headers["x-custom"], headers["authorization"], headers["content-length"]) == ("1", "Bearer t", "8")
    assert headers["proxy-authorization"] == "Basic cA=="  # a credential the endpoint reads
    assert headers["host"] == urlsplit(balancer).netloc  # as the client sent it
    assert "x-hop" not in headers  # named by Connection: this hop's only
    assert "te" not in headers
    assert "connection" not in headers or headers["connection"] == "keep-alive"


def test_status_and_response_headers_pass_end_to_end_and_say_which_upstream(balancer: str) -> None:
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.get("/echo")
    assert response.status_code == 418
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    assert response.headers["x-custom"] == "kept"
    assert response.headers["x-upstream"] in {"0", "1"}
    assert len(response.headers.get_list("date")) <= 1  # the upstream's, not a second one


def test_a_request_body_streams_to_the_upstream_as_it_comes(balancer: str) -> None:
    observed.first_chunk.clear()

    def body() -> Iterator[bytes]:
        yield b"first"
        # Sent only once the upstream has the first: a balancer that read the whole body first
        # would never pass it on.
        yield b"second" if observed.first_chunk.wait(WAIT_S) else b"the first was held back"

    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client:
        response = client.post("/upload", content=body())
    assert response.text == "first|second"


def test_an_sse_stream_delivers_each_event_as_it_is_sent(balancer: str) -> None:
    observed.first_event_read.clear()
    lines = []
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client, client.stream("GET", "/events") as stream:
        for line in stream.iter_lines():
            lines.append(line)
            if line == "data: first":
                observed.first_event_read.set()
    assert lines == ["id: 1", "data: first", "", "id: 2", "data: second", ""]


def test_a_client_that_hangs_up_on_a_quiet_stream_closes_the_upstream_stream(balancer: str) -> None:
    observed.hung_up.clear()
    with httpx.Client(base_url=balancer, timeout=WAIT_S) as client, client.stream("GET", "/quiet") as stream:
        assert next(stream.iter_lines()) == ": open"
    # The upstream sent nothing since: only the balancer passing the hang-up on tells it.
    assert observed.hung_up.wait(WAIT_S)


def test_a_client_that_hangs_up_before_any_answer_reaches_the_upstream(balancer: str) -> None:
    observed.hung_up.clear()
    observed.holding.clear()
    address = urlsplit(balancer)
    with socket.create_connection((address.hostname, address.port), timeout=WAIT_S) as connection:
        connection.sendall(f"GET /hold HTTP/1.1\r\nHost: {address.netloc}\r\n\r\n".encode())
        assert observed.holding.wait(WAIT_S)
    assert observed.hung_up.wait(WAIT_S)


def test_an_upstream_that_cannot_be_reached_is_answered_502() -> None:
    with round_robin(f"http://127.0.0.1:{free_port()}") as url, httpx.Client(base_url=url, timeout=WAIT_S) as client:
        response = client.get("/anything")
    assert response.status_code == 502
    assert response.headers["x-upstream"] == "0"
    assert "upstream 0" in response.text


def test_whitespace_around_a_header_value_is_not_passed_on(balancer: str) -> None:
    # RFC 9110 section 5.5: not part of the value. uvicorn[standard]'s httptools leaves it on what
    # the balancer parsed, and httpx refuses to send it: the request got 502.
    address = urlsplit(balancer)
    request = b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padded:  \tvalue \t\r\nConnection: close\r\n\r\n"
    with socket.create_connection((address.hostname or "", address.port or 0), timeout=WAIT_S) as raw:
        raw.sendall(request)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 418"), head
    assert ["x-padded", "value"] in json.loads(body)["headers"]
