"""The app served in this process: through its ASGI interface with its lifespan running, or by
a real uvicorn server on a thread of its own."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from tests.support.waits import START_TIMEOUT_S


@asynccontextmanager
async def connected(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app served in process, with its lifespan running (discovery at startup)."""
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://testserver") as http,
    ):
        yield http


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


@contextmanager
def never_answering() -> Iterator[tuple[str, threading.Event]]:
    """A TCP listener that accepts connections and never answers them; yields its base URL and
    an event set at its first connection. The connections close when the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted = threading.Event()
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the listener closed
            held.append(connection)
            accepted.set()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (Linux)
        listener.close()
        for connection in held:
            connection.close()
        thread.join(START_TIMEOUT_S)


@contextmanager
def answering_with(answer: bytes) -> Iterator[str]:
    """A TCP listener that answers each connection's first read with `answer`, whatever it is (an
    HTTP response no server would send), then closes it; yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve_each() -> None:
        while not done.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return  # the listener closed
            with connection:
                connection.recv(64 * 1024)
                connection.sendall(answer)

    thread = threading.Thread(target=serve_each, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept (Linux)
        listener.close()
        thread.join(START_TIMEOUT_S)
