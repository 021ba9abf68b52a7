"""The answer to a session-era POST of messages, written while the messages are answered.

A POST's answer is written as its calls run, so it can become an SSE stream as soon as a call
has something to say first (transport/response_stream.py). Batches (2025-03-26 only) are
answered as one JSON array, without streaming.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.server.channel import SessionChannel
from fastapi_mcp_routes.transport.http import Accepts, Parsed
from fastapi_mcp_routes.transport.replay import StreamLogs
from fastapi_mcp_routes.transport.response_stream import ResponseStream
from fastapi_mcp_routes.wire.jsonrpc import Request as RpcRequest

if TYPE_CHECKING:
    from fastapi_mcp_routes.transport.endpoint import StreamableHTTPEndpoint


class SessionAnswer(Response):
    """Answers the messages of one POST while its response is being sent."""

    def __init__(
        self,
        endpoint: StreamableHTTPEndpoint,
        parsed: Parsed,
        channel: SessionChannel,
        accepts: Accepts,
        logs: StreamLogs | None,
    ) -> None:
        # Not Response.__init__: this response writes itself, it renders no body or headers.
        self.background = None  # FastAPI attaches background tasks here when it has any
        self._endpoint = endpoint
        self._parsed = parsed
        self._channel = channel
        self._accepts = accepts
        self._logs = logs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parsed, channel, endpoint = self._parsed, self._channel, self._endpoint
        keep_alive = endpoint.keep_alive
        stream = ResponseStream(
            send, self._accepts.sse, self._accepts.json, keep_alive, self._logs, endpoint.max_stream_seconds
        )
        # Messages about a call go on its stream only when the client reads SSE.
        if self._accepts.sse and not parsed.batch:
            channel.emit = stream.emit
        try:
            if parsed.batch:
                replies = [
                    await endpoint.answer(entry, entry_id, channel)
                    for entry, entry_id in zip(parsed.messages, parsed.ids, strict=True)
                ]
                bodies = [reply for reply in replies if reply is not None]
                body = b"[" + b",".join(bodies) + b"]" if bodies else None
            else:
                body = await endpoint.answer(parsed.messages[0], parsed.ids[0], channel)
            answered_request = any(isinstance(entry, RpcRequest) for entry in parsed.messages)
            await stream.finish(body, answered_request=answered_request)
        finally:
            # An answer cancelled from outside (a server shutdown, a middleware's timeout)
            # leaves no keep-alive behind to write to a response that has ended.
            stream.abandon()
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()
