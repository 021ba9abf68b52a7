"""What the tests share: a real uvicorn server to run an app on, and the peers and messages the
tests speak to it with. Fixtures stay in `conftest.py`; every test module imports from here."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

START_TIMEOUT_S = 10.0

# -- a real server ---------------------------------------------------------------------------


class _Server(uvicorn.Server):
    """A uvicorn server that says when it is listening."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextmanager
def serve(app: ASGIApp) -> Iterator[str]:
    """Serve `app` with uvicorn on an ephemeral 127.0.0.1 port; yields the base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
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
