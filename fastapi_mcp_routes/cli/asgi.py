"""The app served in process, as an ASGI server serves it: its lifespan run through the ASGI
lifespan protocol around the requests (so middleware and routers see startup and shutdown as
under uvicorn, and the lifespan's state reaches each request), and a request whose response is
read as it streams (so a call's progress shows while it runs)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, Protocol

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from starlette.types import ASGIApp, Message, Scope

from fastapi_mcp_routes.cli.errors import CliError

STARTUP_S: Final = 60.0  # an app's startup (a database to reach, say) gets this long
SHUTDOWN_S: Final = 30.0
# Where the request comes from and goes to, as the app sees it: this machine, as when a client
# on the same machine calls a server listening on loopback.
CLIENT: Final = ("127.0.0.1", 50000)
SERVER: Final = ("127.0.0.1", 80)
HOST: Final = "127.0.0.1"
_ASGI: Final = {"version": "3.0", "spec_version": "2.4"}


@asynccontextmanager
async def running(app: ASGIApp) -> AsyncIterator[dict[str, Any]]:
    """The app started (its lifespan's startup done) for the block, and shut down after; yields
    the lifespan state each request's scope gets a copy of."""
    state: dict[str, Any] = {}
    to_app, app_inbox = anyio.create_memory_object_stream[Message](1)
    app_outbox, from_app = anyio.create_memory_object_stream[Message](1)
    failures: list[Exception] = []

    async def lifespan() -> None:
        scope: Scope = {"type": "lifespan", "asgi": _ASGI, "state": state}
        with app_outbox:
            try:
                await app(scope, app_inbox.receive, app_outbox.send)
            except Exception as exc:  # reported below, as the reason the startup failed
                failures.append(exc)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(lifespan)
            await _step(to_app, from_app, "startup", STARTUP_S, failures)
            try:
                yield state
            finally:
                with anyio.CancelScope(shield=True):
                    await _step(to_app, from_app, "shutdown", SHUTDOWN_S, failures)
    except* CliError as failed:
        # The task group wraps what its body raised; the user reads the sentence alone.
        first: BaseException = failed
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


async def _step(
    to_app: ObjectSendStream[Message],
    from_app: ObjectReceiveStream[Message],
    step: str,
    bound_s: float,
    failures: list[Exception],
) -> None:
    try:
        with anyio.fail_after(bound_s):
            await to_app.send({"type": f"lifespan.{step}"})
            message = await from_app.receive()
    except TimeoutError:
        raise CliError(f"The app's {step} did not finish within {bound_s:g} seconds.") from None
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if failures:
            raise CliError(f"The app failed at {step}: {_described(failures[0])}.") from None
        return  # an app without a lifespan: served as servers serve it, without one
    if message["type"] == f"lifespan.{step}.failed":
        reason = _described(failures[0]) if failures else message.get("message") or "no reason given"
        raise CliError(f"The app failed at {step}: {reason}.")


def _described(exc: BaseException) -> str:
    message = str(exc).rstrip(".")
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Reader(Protocol):
    """Takes a response as it arrives."""

    def start(self, status: int, headers: Mapping[str, str]) -> None: ...

    def feed(self, chunk: bytes) -> None: ...


async def post(
    app: ASGIApp, state: Mapping[str, Any], path: str, headers: Sequence[tuple[str, str]], body: bytes, reader: Reader
) -> None:
    """POST `body` to `path` through the app, handing the response to `reader` as it streams."""
    finished = anyio.Event()
    sent = False
    started = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # the client stays until the whole response is read
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
            raw = message.get("headers", ())
            reader.start(message["status"], {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw})
        elif message["type"] == "http.response.body":
            reader.feed(message.get("body", b""))
            if not message.get("more_body", False):
                finished.set()

    try:
        await app(_scope(state, path, headers, body), receive, send)
    except Exception as exc:
        # Starlette answers a crash with a 500 and then raises it again: the answer is enough.
        if not started:
            raise CliError(f"The app failed while answering the request: {_described(exc)}.") from None
    finally:
        finished.set()


def _scope(state: Mapping[str, Any], path: str, headers: Sequence[tuple[str, str]], body: bytes) -> Scope:
    host = () if any(name.lower() == "host" for name, _ in headers) else (("host", HOST),)
    sent = [*host, *headers, ("content-length", str(len(body)))]
    return {
        "type": "http",
        "asgi": _ASGI,
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in sent],
        "client": CLIENT,
        "server": SERVER,
        "state": dict(state),  # shallow-copied per request, as servers do
        "extensions": {},
    }
