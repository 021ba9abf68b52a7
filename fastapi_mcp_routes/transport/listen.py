"""The GET stream: a session's own SSE channel for messages not tied to a request.

One task watches for the client going away, the other writes; the first to finish cancels
the other (the sse-starlette pattern). The writer polls for news every `POLL_S`: the news
(list changes, a stream's log in the `Store`) is kept by whoever makes it, so a poll is one
look. A comment line keeps idle proxies from closing the connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.transport.response_stream import KeepAlive
from fastapi_mcp_routes.transport.sse import KEEP_ALIVE_COMMENT, SSE_HEADERS

POLL_S: Final = 0.5

# Returns the framed SSE events to send now, or None once the stream must end.
Poll = Callable[[], Awaitable[list[bytes] | None]]


class ListenStream(Response):
    """A long-lived SSE response fed by `poll`; `on_close`, if any, runs when it ends, however."""

    def __init__(
        self,
        poll: Poll,
        on_close: Callable[[], Awaitable[None]] | None = None,
        keep_alive: KeepAlive | None = None,
    ) -> None:
        # No body to render: the stream writes its own. FastAPI sets `background` after this.
        super().__init__(status_code=200)
        self._poll = poll
        self._on_close = on_close
        self._keep_alive = keep_alive if keep_alive is not None else KeepAlive()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": list(SSE_HEADERS)})
            async with anyio.create_task_group() as tasks:

                async def watch() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tasks.cancel_scope.cancel()

                tasks.start_soon(watch)
                await self._write(send)
                tasks.cancel_scope.cancel()
        except OSError:
            pass  # the client went away mid-write
        finally:
            if self._on_close is not None:
                with anyio.CancelScope(shield=True):
                    await self._on_close()
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()

    async def _write(self, send: Send) -> None:
        quiet_s = 0.0
        while (messages := await self._poll()) is not None:
            for data in messages:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            quiet_s = 0.0 if messages else quiet_s + POLL_S
            if quiet_s >= self._keep_alive.interval_s:
                quiet_s = 0.0
                await send({"type": "http.response.body", "body": KEEP_ALIVE_COMMENT, "more_body": True})
            await anyio.sleep(POLL_S)
        await send({"type": "http.response.body", "body": b"", "more_body": False})
