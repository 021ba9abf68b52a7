"""The Streamable-HTTP endpoint: HTTP checks, sessions, and JSON-RPC messages in and out.

A POST runs a pipeline of named steps: check the request (origin, media types), read the body
within its cap, decode and classify the messages, resolve the session and protocol version,
dispatch, encode. Every refusal is an `HttpError` raised by a step and turned into a response
in `_refusal`, so no step builds an error response itself.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from fastapi_mcp_routes.server.dispatch import CallContext, Dispatcher, negotiate_version
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS, check_request, is_modern, status_for
from fastapi_mcp_routes.server.sessions import Session, SessionStore
from fastapi_mcp_routes.store.replay import StreamLog, StreamLogs
from fastapi_mcp_routes.tools.invoke import caller_from_scope
from fastapi_mcp_routes.transport.listen import ListenStream
from fastapi_mcp_routes.transport.origin import OriginPolicy
from fastapi_mcp_routes.transport.response_stream import KeepAlive, ResponseStream, sse_event
from fastapi_mcp_routes.transport.stateless import SUBSCRIBE, StatelessAnswer, subscription
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import CallCancelled, HttpError, InvalidRequest, McpError
from fastapi_mcp_routes.wire.json import dumps, loads
from fastapi_mcp_routes.wire.jsonrpc import (
    Message,
    Notification,
    ParamsNotObject,
    Reply,
    RequestId,
    classify,
    encode_error,
    encode_result,
    internal_error,
    request_id_of,
    truncate,
)
from fastapi_mcp_routes.wire.jsonrpc import (
    Request as RpcRequest,
)

if TYPE_CHECKING:
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

logger = logging.getLogger("fastapi_mcp_routes")

_HEADERS_KEY = "fastapi_mcp_routes.headers"
_JSON_TYPES = frozenset({c.MEDIA_JSON, "application/*", "*/*"})
_SSE_TYPES = frozenset({c.MEDIA_SSE, "text/*", "*/*"})


@dataclass(frozen=True, slots=True)
class TransportConfig:
    origin_policy: OriginPolicy
    max_body_bytes: int
    forward_headers: frozenset[bytes]  # lower-case header names the route inherits
    credential_headers: frozenset[bytes]  # what a session is bound to
    max_stream_seconds: float | None = None  # end resumable POST streams after this long


@dataclass(frozen=True, slots=True)
class _Parsed:
    messages: list[Message | McpError]
    batch: bool
    ids: list[RequestId | None]  # the request id of each entry, for errors
    methods: list[str | None]  # the method each entry names, if any
    first: Any  # the first message as decoded, before classification


class StreamableHTTPEndpoint:
    """Serves MCP on one path: POST for messages, DELETE to end a session, GET refused."""

    def __init__(
        self,
        config: TransportConfig,
        dispatcher: Dispatcher,
        sessions: SessionStore | None,
        rate_limit: EndpointRateLimit | None = None,
    ) -> None:
        self._rate_limit = rate_limit
        self._config = config
        self._dispatcher = dispatcher
        self._sessions = sessions
        self.max_stream_seconds = config.max_stream_seconds
        self.keep_alive = KeepAlive()

    async def __call__(self, request: Request) -> Response:
        try:
            self._check_origin(request)
            if self._rate_limit is not None:
                self._rate_limit.check(request)
            if request.method == "POST":
                return await self._post(request)
            if _header(request, c.HEADER_PROTOCOL_VERSION) in MODERN_VERSIONS:
                # The stateless revision has no GET stream and no session to delete.
                raise HttpError(405, InvalidRequest("Method not allowed."), {"allow": "POST"})
            if request.method == "DELETE" and self._sessions is not None:
                return self._delete(request, self._sessions)
            if request.method == "GET" and self._sessions is not None:
                return self._listen(request, self._sessions)
            allow = "POST, DELETE" if self._sessions is not None else "POST"
            raise HttpError(405, InvalidRequest("Method not allowed."), {"allow": allow})
        except HttpError as refusal:
            return _refusal(refusal)
        except ClientDisconnect:
            return Response(status_code=400)

    def refuse_foreign_origin(self, request: Request) -> None:
        """The Origin/Host check as a FastAPI dependency: refusals raise HTTPException(403)."""
        try:
            self._check_origin(request)
        except HttpError as refusal:
            raise HTTPException(refusal.status, refusal.error.message) from None

    # -- steps -------------------------------------------------------------------------------

    def _check_origin(self, request: Request) -> None:
        policy = self._config.origin_policy
        host = _header(request, c.HEADER_HOST)
        server = request.scope.get("server")
        if not policy.host_allowed(host, server[0] if server else None):
            raise HttpError(403, InvalidRequest("Forbidden: this Host is not allowed."))
        if not policy.origin_allowed(_header(request, c.HEADER_ORIGIN), host, request.scope.get("scheme", "http")):
            raise HttpError(403, InvalidRequest("Forbidden: this Origin is not allowed."))

    async def _post(self, request: Request) -> Response:
        accepts = _check_media_types(request)
        body = await _read_body(request, self._config.max_body_bytes)
        parsed = _parse(body)
        if is_modern(_header(request, c.HEADER_PROTOCOL_VERSION), parsed.first):
            return self._post_stateless(request, parsed, accepts)
        first = parsed.messages[0]
        if parsed.batch and "initialize" in parsed.methods:
            raise HttpError(400, InvalidRequest("Invalid Request: initialize must not be part of a batch."))
        # An initialize needs no session, even when its params are wrong (then it gets -32602).
        opening = parsed.methods[0] == "initialize"
        identity = caller_identity(request, self._config)
        session = None if opening or self._sessions is None else _require_session(request, self._sessions, identity)
        version = _protocol_version(request, session, opening)
        if parsed.batch and version != c.BATCH_VERSION:
            raise HttpError(400, InvalidRequest(f"Invalid Request: batches are not allowed in protocol {version}."))
        caller = caller_from_scope(request.scope, self._config.forward_headers)
        principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
        ctx = CallContext(version, caller, session, credentials=identity, principal=principal)
        if opening and isinstance(first, RpcRequest):
            return await self._initialize(request, first, ctx)
        return _Answer(self, parsed, ctx, accepts)

    def _post_stateless(self, request: Request, parsed: _Parsed, accepts: _Accepts) -> Response:
        """A 2026-07-28 POST: exactly one request (or a notification, acknowledged and dropped)."""
        entry = parsed.messages[0]
        if parsed.batch:
            raise HttpError(400, InvalidRequest("Invalid Request: a 2026-07-28 POST carries one message, not a batch."))
        if isinstance(entry, Notification):
            return Response(status_code=202)
        if isinstance(entry, Reply):
            raise HttpError(400, InvalidRequest("Invalid Request: no server request waits for a response here."))
        if isinstance(entry, McpError):
            raise HttpError(400, entry, request_id=parsed.ids[0])
        try:
            envelope = check_request(entry, request.scope["headers"])
        except McpError as error:
            raise HttpError(status_for(error), error, request_id=entry.id) from None
        caller = caller_from_scope(request.scope, self._config.forward_headers)
        # What a requestState is bound to: the caller's credentials, sorted, without Cookie
        # (clients keep whatever cookies the app sets, as sessions also allow for).
        principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
        credentials = caller_identity(request, self._config)
        ctx = CallContext(envelope.version, caller, envelope=envelope, credentials=credentials, principal=principal)
        if entry.method == SUBSCRIBE:
            if not accepts.sse:
                refusal = InvalidRequest("Not Acceptable: a subscription is a text/event-stream.")
                raise HttpError(406, refusal, request_id=entry.id)
            return subscription(self._dispatcher, entry)
        return StatelessAnswer(self._dispatcher, entry, ctx, accepts.sse, accepts.json, self.keep_alive)

    async def _initialize(self, request: Request, initialize: RpcRequest, ctx: CallContext) -> Response:
        try:
            result = await self._dispatcher.request(initialize, ctx)
        except McpError as error:
            return Response(encode_error(initialize.id, error), media_type=c.MEDIA_JSON)
        headers = {}
        if self._sessions is not None:
            binding = self._sessions.binding([caller_identity(request, self._config)])
            params = initialize.params
            version = negotiate_version(str(params["protocolVersion"]))
            opened = self._sessions.open(binding, version, params.get("clientInfo"), params.get("capabilities"))
            headers[c.HEADER_SESSION_ID] = opened.id
        return Response(encode_result(initialize.id, result), media_type=c.MEDIA_JSON, headers=headers)

    def _delete(self, request: Request, sessions: SessionStore) -> Response:
        session = _require_session(request, sessions, caller_identity(request, self._config))
        _protocol_version(request, session, opening=False)
        sessions.close(session.id, session.binding)
        return Response(status_code=204)

    def _listen(self, request: Request, sessions: SessionStore) -> Response:
        """Open the session's GET stream for notifications not tied to a request."""
        if _accepted_types(_header(request, c.HEADER_ACCEPT) or "").isdisjoint(_SSE_TYPES):
            raise HttpError(406, InvalidRequest("Not Acceptable: the GET stream is text/event-stream."))
        session = _require_session(request, sessions, caller_identity(request, self._config))
        _protocol_version(request, session, opening=False)  # an invalid header is refused here too
        last_event_id = _header(request, c.HEADER_LAST_EVENT_ID)
        if last_event_id is not None:
            found = session.stream_logs.find(last_event_id) if session.stream_logs is not None else None
            if found is None:
                # The general GET stream would never carry the answer the client waits for.
                raise HttpError(400, InvalidRequest("Bad Request: Last-Event-ID names no stream that can be resumed."))
            return _resume(session, *found)
        if session.listening:
            raise HttpError(409, InvalidRequest("Conflict: this session already has a GET stream open."))
        session.listening = True
        generation: int | None = None

        def poll() -> list[bytes] | None:
            nonlocal generation
            # Refreshing the session keeps it alive while it listens, and ends the stream
            # once the session is closed or expired.
            if session.closed or sessions.find(session.id, session.binding) is None:
                return None
            generation, messages = self._dispatcher.changes_since(generation)
            return [sse_event(dumps(message)) for message in messages]

        def close() -> None:
            session.listening = False

        return ListenStream(poll, close)

    async def answer(self, entry: Message | McpError, entry_id: RequestId | None, ctx: CallContext) -> bytes | None:
        """The encoded response to one message; `None` for notifications, replies and
        cancelled requests."""
        if isinstance(entry, McpError):
            return encode_error(entry_id, entry)
        if isinstance(entry, Notification):
            try:
                await self._dispatcher.notification(entry.method, entry.params, ctx)
            except Exception:  # a notification gets no answer, so a failure is only logged
                logger.exception("taking notification %s failed", truncate(entry.method))
            return None
        if isinstance(entry, Reply):
            self._dispatcher.reply(entry, ctx)
            return None
        try:
            return encode_result(entry.id, await self._dispatcher.request(entry, ctx))
        except McpError as error:
            return encode_error(entry.id, error)
        except CallCancelled:
            return None
        except Exception as exc:
            return internal_error(entry.id, exc)


class _Answer(Response):
    """The response to a POST of messages: they are answered while it is being sent, so the
    answer can become an SSE stream as soon as a call has something to say first."""

    def __init__(self, endpoint: StreamableHTTPEndpoint, parsed: _Parsed, ctx: CallContext, accepts: _Accepts) -> None:
        # Not Response.__init__: this response writes itself, it renders no body or headers.
        self.background = None  # FastAPI attaches background tasks here when it has any
        self._endpoint = endpoint
        self._parsed = parsed
        self._ctx = ctx
        self._accepts = accepts
        self._max_open_s = endpoint.max_stream_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parsed = self._parsed
        logs = _stream_logs_of(self._ctx.session)
        keep_alive = self._endpoint.keep_alive
        stream = ResponseStream(send, self._accepts.sse, self._accepts.json, keep_alive, logs, self._max_open_s)
        # Messages about a call go on its stream only when the client reads SSE; batches
        # (2025-03-26 only) are answered as one JSON array, without streaming.
        ctx = self._ctx
        if self._accepts.sse and not parsed.batch:
            ctx.emit = stream.emit
        try:
            if parsed.batch:
                replies = [
                    await self._endpoint.answer(entry, entry_id, ctx)
                    for entry, entry_id in zip(parsed.messages, parsed.ids, strict=True)
                ]
                bodies = [reply for reply in replies if reply is not None]
                body = b"[" + b",".join(bodies) + b"]" if bodies else None
            else:
                body = await self._endpoint.answer(parsed.messages[0], parsed.ids[0], ctx)
            answered_request = any(isinstance(entry, RpcRequest) for entry in parsed.messages)
            await stream.finish(body, answered_request=answered_request)
        finally:
            # An answer cancelled from outside (a server shutdown, a middleware's timeout)
            # leaves no keep-alive behind to write to a response that has ended.
            stream.abandon()
        if self.background is not None:  # tasks the endpoint's own dependencies added
            await self.background()


def _stream_logs_of(session: Session | None) -> StreamLogs | None:
    """The session's stream logs (made on first use) when its revision resumes streams."""
    if session is None or session.protocol_version < c.RESUMABLE_VERSION:
        return None
    if session.stream_logs is None:
        session.stream_logs = StreamLogs()
    return session.stream_logs


def _resume(session: Session, log: StreamLog, seen: int) -> Response:
    """Replay one stream after the event the client saw last, then follow it to its answer."""
    logs = session.stream_logs

    def poll() -> list[bytes] | None:
        nonlocal seen
        if session.closed:
            return None
        news = log.events[seen:]
        seen += len(news)
        if news or not log.complete:
            return news
        if logs is not None:
            logs.forget(log)  # delivered whole at last
        return None

    return ListenStream(poll, lambda: None)


def _require_session(request: Request, sessions: SessionStore, identity: bytes) -> Session:
    """The caller's live session named by the request: 400 without an id, 404 for any other."""
    session_id = _header(request, c.HEADER_SESSION_ID)
    if not session_id:
        raise HttpError(400, InvalidRequest("Bad Request: the Mcp-Session-Id header is required."))
    session = sessions.find(session_id, sessions.binding([identity]))
    if session is None:
        logger.info("refused unknown, expired or foreign session %s", truncate(session_id))
        raise HttpError(404, InvalidRequest("Session not found."))
    return session


def caller_identity(request: Request, config: TransportConfig) -> bytes:
    """Who the caller is, for binding sessions and request states: the principal that `auth`
    returned (subject, plus tenant where it has one), else the credential headers, sorted."""
    principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
    if principal is not None:
        subject = getattr(principal, "subject", None) or getattr(principal, "sub", None) or str(principal)
        tenant = getattr(principal, "tenant", None) or ""
        return b"principal\x00" + str(subject).encode() + b"\x00" + str(tenant).encode()
    wanted = config.credential_headers
    return b"\x00".join(sorted(k + b"=" + v for k, v in request.scope["headers"] if k in wanted))


@dataclass(frozen=True, slots=True)
class _Accepts:
    json: bool
    sse: bool


def _check_media_types(request: Request) -> _Accepts:
    content_type = _header(request, c.HEADER_CONTENT_TYPE) or ""
    if content_type.split(";", 1)[0].strip().lower() != c.MEDIA_JSON:
        raise HttpError(415, InvalidRequest("Unsupported Media Type: the body must be application/json."))
    accepts = _accepts(_header(request, c.HEADER_ACCEPT) or "")
    if not (accepts.json or accepts.sse):
        raise HttpError(406, InvalidRequest("Not Acceptable: accept application/json or text/event-stream."))
    return accepts


@functools.lru_cache(maxsize=64)  # clients send the same few Accept values; bounded
def _accepts(accept: str) -> _Accepts:
    accepted = _accepted_types(accept)
    return _Accepts(json=not accepted.isdisjoint(_JSON_TYPES), sse=not accepted.isdisjoint(_SSE_TYPES))


def _accepted_types(accept: str) -> set[str]:
    """The media ranges an Accept header allows, leaving out those given `q=0`."""
    accepted = set()
    for part in accept.split(","):
        media_range, _, parameters = part.partition(";")
        refused = any(
            p.strip().replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in parameters.split(";")
        )
        if not refused:
            accepted.add(media_range.strip().lower())
    return accepted


async def _read_body(request: Request, limit: int) -> bytes:
    declared = _header(request, c.HEADER_CONTENT_LENGTH) or ""
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)  # stop reading: never buffer more than the cap
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> HttpError:
    return HttpError(413, InvalidRequest(f"Payload Too Large: the body may be at most {limit} bytes."))


def _parse(body: bytes) -> _Parsed:
    try:
        value: Any = loads(body)
    except McpError as error:
        raise HttpError(400, error) from None
    batch = isinstance(value, list)
    values = value if batch else [value]
    if not values:
        raise HttpError(400, InvalidRequest("Invalid Request: an empty batch."))
    messages: list[Message | McpError] = []
    for item in values:
        try:
            messages.append(classify(item))
        except ParamsNotObject as error:
            messages.append(error)
        except McpError as error:
            if not batch:
                raise HttpError(400, error, request_id=request_id_of(item)) from None
            messages.append(error)
    methods = [item.get("method") if isinstance(item, dict) else None for item in values]
    return _Parsed(messages, batch, [request_id_of(item) for item in values], methods, values[0])


def _protocol_version(request: Request, session: Session | None, opening: bool) -> str:
    """The version a request is handled under: its session's, else its header's, else the
    spec's fallback. An unsupported header is refused; a supported one that differs from the
    session's is tolerated (clients only SHOULD send the negotiated version)."""
    header = _header(request, c.HEADER_PROTOCOL_VERSION)
    if header is None or opening:
        return session.protocol_version if session is not None else c.FALLBACK_VERSION
    if header not in c.SESSION_ERA_VERSIONS:
        raise HttpError(
            400,
            InvalidRequest(
                f"Bad Request: unsupported MCP-Protocol-Version {truncate(header)!r}; "
                f"supported: {', '.join(c.SESSION_ERA_VERSIONS)}."
            ),
        )
    return session.protocol_version if session is not None else header


def _header(request: Request, name: str) -> str | None:
    """A request header's first value. Starlette's `Headers.get` scans the whole list on every
    call; a POST looks up about eight headers, so they are read into a dict once per request,
    kept in the request's scope under a key of ours."""
    scope = request.scope
    table: dict[bytes, bytes] | None = scope.get(_HEADERS_KEY)
    if table is None:
        raw = list(scope["headers"])
        table = scope[_HEADERS_KEY] = dict(reversed(raw))  # reversed: the first copy wins
    value = table.get(name.encode("latin-1"))
    return None if value is None else value.decode("latin-1")


def _refusal(refusal: HttpError) -> Response:
    return Response(
        encode_error(refusal.request_id, refusal.error),
        status_code=refusal.status,
        media_type=c.MEDIA_JSON,
        headers=refusal.headers,
    )
