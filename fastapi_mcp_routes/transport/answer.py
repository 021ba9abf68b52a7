"""The answer to a session-era POST of messages, written while the messages are answered.

A POST's answer is written as its calls run, so it can become an SSE stream as soon as a call
has something to say first (transport/response_stream.py). Batches (2025-03-26 only) are
answered as one JSON array, without streaming.
"""

from __future__ import annotations

import logging

import anyio.lowlevel
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.server.budget import AnswerBudget, Holding
from fastapi_mcp_routes.server.channel import SessionChannel
from fastapi_mcp_routes.server.dispatch import Dispatcher
from fastapi_mcp_routes.transport.http import BUSY_RETRY_AFTER_S, STORE_RETRY_AFTER_S, Accepts, Parsed
from fastapi_mcp_routes.transport.replay import StreamLogs
from fastapi_mcp_routes.transport.response_stream import Header, KeepAlive, ResponseStream, SelfWritten
from fastapi_mcp_routes.transport.step_up import FORBIDDEN, StepUp
from fastapi_mcp_routes.wire.errors import (
    InsufficientScope,
    InvalidRequest,
    McpError,
    NeedsSharedStore,
    ServerBusy,
    StoreUnavailable,
)
from fastapi_mcp_routes.wire.failures import error_answer
from fastapi_mcp_routes.wire.jsonrpc import (
    Message,
    Notification,
    Reply,
    RequestId,
    encode_error,
    encode_result,
    truncate,
)
from fastapi_mcp_routes.wire.jsonrpc import Request as RpcRequest

logger = logging.getLogger("fastapi_mcp_routes")

_BUSY_HEADERS = ((b"retry-after", str(BUSY_RETRY_AFTER_S).encode()),)
_STORE_DOWN_HEADERS = ((b"retry-after", str(STORE_RETRY_AFTER_S).encode()),)


class SessionAnswer(SelfWritten):
    """Answers the messages of one POST while its response is being sent."""

    def __init__(
        self,
        *,
        dispatcher: Dispatcher,
        parsed: Parsed,
        channel: SessionChannel,
        accepts: Accepts,
        logs: StreamLogs | None,
        keep_alive: KeepAlive,
        max_open_s: float | None,
        max_batch_answer_bytes: int,
        budget: AnswerBudget,
        step_up: StepUp,
    ) -> None:
        super().__init__()  # the answer writes its own status and headers, JSON or SSE, once it knows which
        self._dispatcher = dispatcher
        self._keep_alive = keep_alive
        self._max_open_s = max_open_s
        self._parsed = parsed
        self._channel = channel
        self._accepts = accepts
        self._logs = logs
        self._max_batch_answer_bytes = max_batch_answer_bytes
        self._budget = budget
        self._step_up = step_up
        # The one request was refused for a scope the token lacks: answered 403 with the challenge.
        self._forbidden: tuple[Header, ...] | None = None
        self._scope: Scope = {}
        self._stream: ResponseStream | None = None
        # A cancelled request is answered with an error when an empty SSE stream would not do:
        # a POST with a request is never 202, and this client reads no SSE.
        self._answer_cancelled = not accepts.sse
        self._busy: ServerBusy | None = None  # the one request was refused: too many calls run
        # The one reply could not be handed on: the store's outage; the client may send it again.
        self._store_down = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parsed, channel = self._parsed, self._channel
        # The client leaving does not cancel its calls in this era; the channel hears of it, so
        # a call that only samples a stream ends early (server/channel.py, `client_left`).
        stream = ResponseStream(
            send,
            self._accepts.sse,
            self._accepts.json,
            self._keep_alive,
            self._logs,
            self._max_open_s,
            receive=receive,
            listener=channel,
            watch_now=False,  # watched once a call that samples asks (`ClientChannel.hung_up`)
        )
        self._scope, self._stream = scope, stream
        channel.answer_stream = stream  # watched for a disconnect once a call that samples asks
        # Messages about a call go on its stream only when the client reads SSE.
        if self._accepts.sse and not parsed.batch:
            channel.emit = stream.emit
        async with stream:
            if parsed.batch:
                answered_request = any(isinstance(entry, RpcRequest) for entry in parsed.messages)
                # Held against the answer budget until written: a batch's answers wait for each other.
                with Holding(self._budget, channel.holder) as holding:
                    body = _array(await self._answer_batch(holding))
                    await stream.finish(body, answered_request=answered_request)
            else:
                first = parsed.messages[0]
                body = await self._answer(first, parsed.ids[0])
                answered_request = isinstance(first, RpcRequest)
                # Held against the answer budget until written: a client that reads slowly keeps it here.
                held = self._budget.hold_written(channel.holder, body)
                try:
                    await self._finish(stream, body, answered_request)
                finally:
                    if held is not None:
                        held.release()
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()

    async def _finish(self, stream: ResponseStream, body: bytes | None, answered_request: bool) -> None:
        if self._busy is not None:  # 429 or 503 where nothing of the answer went out yet
            await stream.finish(body, answered_request=True, status=self._busy.status, headers=_BUSY_HEADERS)
        elif self._forbidden is not None:
            await stream.finish(body, answered_request=True, status=FORBIDDEN, headers=self._forbidden)
        elif self._store_down:
            await stream.finish(body, answered_request=False, status=503, headers=_STORE_DOWN_HEADERS)
        else:
            await stream.finish(body, answered_request=answered_request)

    async def _answer_batch(self, holding: Holding) -> list[bytes]:
        """Each entry's answer in order, yielding to the event loop between entries, so a long
        batch of quick requests cannot hold the loop. Once the answers reach
        `max_batch_answer_bytes`, or the caller's answers in this process the answer budget's
        bounds (`holding`), later requests are not run: each gets an error naming the bound (an
        entry that already ran keeps its answer, however large)."""
        parsed, cap = self._parsed, self._max_batch_answer_bytes
        bodies: list[bytes] = []
        size = 0
        full: InvalidRequest | None = None
        for entry, entry_id in zip(parsed.messages, parsed.ids, strict=True):
            await anyio.lowlevel.checkpoint()
            if full is not None:
                if isinstance(entry, RpcRequest):
                    bodies.append(encode_error(entry_id, full))
                continue
            reply = await self._answer(entry, entry_id)
            if reply is not None:
                bodies.append(reply)
                size += len(reply)
                reason = holding.hold(size)
                if reason is not None:
                    full = _not_held(reason)
                elif size >= cap:
                    full = _batch_full(cap)
        return bodies

    async def _answer(self, entry: Message | McpError, entry_id: RequestId | None) -> bytes | None:
        """The encoded response to one message; `None` for notifications, replies and
        cancelled requests (where an empty SSE stream would not do, a cancelled request gets
        an error)."""
        if isinstance(entry, McpError):
            return encode_error(entry_id, entry)
        dispatcher, channel = self._dispatcher, self._channel
        if isinstance(entry, Notification):
            try:
                await dispatcher.notification(entry.method, entry.params, channel)
            except NeedsSharedStore:
                pass  # in a batch, which has no place for it; logged once as a WARNING
            except Exception:  # a notification gets no answer, so a failure is only logged
                logger.exception("taking notification %s failed", truncate(entry.method))
            return None
        if isinstance(entry, Reply):
            try:
                await dispatcher.reply(entry, channel)
            except StoreUnavailable as down:
                if self._parsed.batch:  # no place for an answer to a reply: the question waits on
                    logger.warning("a reply in a batch was not handed on: %s", down.reason)
                    return None
                self._store_down = True
                return encode_error(None, down)
            return None
        try:
            return encode_result(entry.id, await dispatcher.request(entry, channel))
        except Exception as exc:
            if isinstance(exc, ServerBusy) and not self._parsed.batch:
                self._busy = exc  # in a batch, the refused request's error is its answer
            if isinstance(exc, InsufficientScope):
                return self._refused_scope(entry.id, exc)
            return error_answer(entry.id, exc, answer_cancelled=self._answer_cancelled)

    def _refused_scope(self, request_id: RequestId, refused: InsufficientScope) -> bytes:
        """HTTP 403 with the challenge while nothing of the answer went out; in a batch, whose
        other answers a client's retry would run again, or once streamed, the answer says it."""
        stream = self._stream
        if self._parsed.batch or stream is None or stream.streaming:
            return self._step_up.in_answer(request_id, refused, self._scope)
        self._forbidden = self._step_up.headers(refused, self._scope)
        return encode_error(request_id, refused)


def _array(bodies: list[bytes]) -> bytes | None:
    """The answers as one JSON array, copied once."""
    if not bodies:
        return None
    parts = [b"["]
    for body in bodies:
        parts += (body, b",")
    parts[-1] = b"]"
    bodies.clear()
    return b"".join(parts)


def _not_held(reason: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid Request: not run, {reason}; send this request again later.")


def _batch_full(cap: int) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid Request: not run, the batch's answers reached {cap} bytes (Limits.max_batch_answer_bytes); "
        "send this request again on its own."
    )
