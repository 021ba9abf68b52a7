"""The Streamable-HTTP endpoint: HTTP checks, sessions, and JSON-RPC messages in and out.

A POST runs a pipeline of named steps (transport/http.py): check the media types, read the
body within its cap, decode and classify the messages, then hand them to the stateless path
(transport/stateless.py) or resolve the session and protocol version and answer them here.
Every refusal is an `HttpError` raised by a step and turned into a response in `_refusal`, so
no step builds an error response itself.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from fastapi import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from fastapi_mcp_routes.options import Limits
from fastapi_mcp_routes.server.budget import AnswerBudget
from fastapi_mcp_routes.server.channel import Channels, SessionChannel, StatelessChannel
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.dispatch import Dispatcher, negotiate_version
from fastapi_mcp_routes.server.envelope import MODERN_VERSIONS, check_request, status_for
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.store.base import Holder, SessionRecord, StoreFull
from fastapi_mcp_routes.store.policy import holder_of
from fastapi_mcp_routes.transport.answer import SessionAnswer
from fastapi_mcp_routes.transport.credentials import CredentialCheck
from fastapi_mcp_routes.transport.http import (
    RETRY_AFTER_S,
    STORE_RETRY_AFTER_S,
    Headers,
    Posted,
    accepts_sse,
    caller_identity,
    client_address,
    read_post,
)
from fastapi_mcp_routes.transport.origin import OriginPolicy
from fastapi_mcp_routes.transport.replay import Senders, StreamLogs
from fastapi_mcp_routes.transport.response_stream import KeepAlive
from fastapi_mcp_routes.transport.session_streams import Claim, SessionLease, resume_stream, session_stream
from fastapi_mcp_routes.transport.stateless import (
    SUBSCRIBE,
    ListenFilter,
    StatelessAnswer,
    listen_filter,
    subscription,
)
from fastapi_mcp_routes.transport.step_up import FORBIDDEN, StepUp
from fastapi_mcp_routes.transport.stream_slots import SLOT_TTL_RENEWALS, StreamSlots
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import (
    HttpError,
    InsufficientScope,
    InvalidRequest,
    McpError,
    NeedsSharedStore,
    StoreUnavailable,
)
from fastapi_mcp_routes.wire.failures import error_answer, internal_error
from fastapi_mcp_routes.wire.fields import field_table
from fastapi_mcp_routes.wire.jsonrpc import (
    Notification,
    Reply,
    encode_error,
    encode_result,
    truncate,
)
from fastapi_mcp_routes.wire.jsonrpc import Request as RpcRequest

if TYPE_CHECKING:
    from fastapi_mcp_routes.transport.rate_limit import EndpointRateLimit

logger = logging.getLogger("fastapi_mcp_routes")

STORE_DOWN_LOG_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class TransportConfig:
    origin_policy: OriginPolicy
    limits: Limits
    forward_headers: frozenset[bytes]  # lower-case header names the route inherits
    credential_headers: frozenset[bytes]  # what a session is bound to
    max_stream_seconds: float | None = None  # end resumable POST streams after this long
    step_up: StepUp = field(default_factory=StepUp)  # how a refusal for a missing scope is answered


class StreamableHTTPEndpoint:
    """Serves MCP on one path: POST for messages, GET to listen, DELETE to end a session."""

    def __init__(
        self,
        *,
        config: TransportConfig,
        dispatcher: Dispatcher,
        channels: Channels,
        deployment: Deployment,
        sessions: SessionManager | None,
        rate_limit: EndpointRateLimit | None = None,
        budget: AnswerBudget | None = None,
    ) -> None:
        self._rate_limit = rate_limit
        limits = config.limits
        self._budget = budget or AnswerBudget(limits.max_answer_bytes, limits.max_answer_bytes_per_caller)
        self._config = config
        self._dispatcher = dispatcher
        self._channels = channels
        self._store = deployment.store
        self._sessions = sessions
        self._slots = StreamSlots(deployment.store, config.limits, deployment.secret)
        verify = config.limits.verify_credentials
        self._credentials = CredentialCheck(verify, config.credential_headers) if verify is not None else None
        self.keep_alive = KeepAlive(config.limits.keep_alive_s)
        # The resumable streams this process sends; `senders.renew_forever` runs for the app's life.
        self.senders = Senders(deployment.store, self.keep_alive.interval_s)
        self._store_down_logged = -math.inf

    @property
    def forward_headers(self) -> frozenset[bytes]:
        """The header names a route's request inherits from its caller."""
        return self._config.forward_headers

    async def __call__(self, request: Request) -> Response:
        try:
            headers: Headers = field_table(request.scope["headers"])
            self._check_origin(request, headers)
            if self._rate_limit is not None:
                await self._rate_limit.check(request)
            if request.method == "POST":
                return await self._post(request, headers)
            if headers.get(c.HEADER_PROTOCOL_VERSION) in MODERN_VERSIONS:
                # The stateless revision has no GET stream and no session to delete.
                raise HttpError(405, InvalidRequest("Method not allowed."), {"allow": "POST"})
            if request.method == "DELETE" and self._sessions is not None:
                return await self._delete(request, headers, self._sessions)
            if request.method == "GET" and self._sessions is not None:
                return await self._listen(request, headers, self._sessions)
            allow = "GET, POST, DELETE" if self._sessions is not None else "POST"
            raise HttpError(405, InvalidRequest("Method not allowed."), {"allow": allow})
        except HttpError as refusal:
            self._dispatcher.recorder.refused(refusal.error)
            return _refusal(refusal)
        except StoreUnavailable as down:
            self._dispatcher.recorder.refused(down)
            self._log_store_down(down)
            return _refusal(HttpError(503, down, {"retry-after": str(STORE_RETRY_AFTER_S)}))
        except ClientDisconnect:
            return Response(status_code=400)
        except Exception as exc:
            # A defect (or a store value nothing foresaw): the traceback stays in the log.
            failure = internal_error("the request could not be handled", "handling an MCP request failed", exc=exc)
            return _refusal(HttpError(500, failure))

    async def over_rate_limit(self, request: Request) -> Response | None:
        """The endpoint's rate limit, for a route served beside it (the Server Card): the
        refusal to send, or `None` when the caller is within it."""
        if self._rate_limit is None:
            return None
        try:
            await self._rate_limit.check(request)
        except HttpError as refusal:
            return _refusal(refusal)
        except StoreUnavailable as down:
            self._log_store_down(down)
            return _refusal(HttpError(503, down, {"retry-after": str(STORE_RETRY_AFTER_S)}))
        return None

    def host_refusal(self, request: Request) -> Response | None:
        """The endpoint's Host check, for a route served beside it that any origin may read (the
        Server Card): the 403 to send, or `None` for a Host the endpoint would answer."""
        server = request.scope.get("server")
        if self._config.origin_policy.host_allowed(request.headers.get(c.HEADER_HOST), server[0] if server else None):
            return None
        return _refusal(HttpError(403, InvalidRequest("Forbidden: this Host is not allowed.")))

    def _log_store_down(self, down: StoreUnavailable) -> None:
        """One WARNING a minute while the store cannot be reached, not one a request."""
        now = time.monotonic()
        if now - self._store_down_logged > STORE_DOWN_LOG_S:
            self._store_down_logged = now
            logger.warning("answering 503: the shared store cannot be reached (%s)", down.reason)

    def refuse_foreign_origin(self, request: Request) -> None:
        """The Origin/Host check as a FastAPI dependency: refusals raise HTTPException(403)."""
        try:
            self._check_origin(request, field_table(request.scope["headers"]))
        except HttpError as refusal:
            raise HTTPException(refusal.status, refusal.error.message) from None

    # -- steps -------------------------------------------------------------------------------

    def _check_origin(self, request: Request, headers: Headers) -> None:
        server = request.scope.get("server")
        refusal = self._config.origin_policy.refusal(
            headers.get(c.HEADER_HOST),
            server[0] if server else None,
            headers.get(c.HEADER_ORIGIN),
            request.scope.get("scheme", "http"),
        )
        if refusal is not None:
            raise HttpError(403, InvalidRequest(refusal))

    async def _post(self, request: Request, headers: Headers) -> Response:
        config, limits = self._config, self._config.limits
        posted = await read_post(
            request,
            headers,
            max_body_bytes=limits.max_body_bytes,
            max_batch_length=limits.max_batch_length,
            credential_headers=config.credential_headers,
            forward_headers=config.forward_headers,
        )
        parsed = posted.parsed
        account = None
        if self._credentials is not None:  # without the app's check, no request pays for one
            account = await self._account(request, posted.identity, posted.principal)
        holder = holder_of(posted.identity, posted.address, posted.principal, account)
        if posted.modern:
            return await self._post_stateless(request, posted, holder)
        if parsed.batch and "initialize" in parsed.methods:
            raise HttpError(400, InvalidRequest("Invalid Request: initialize must not be part of a batch."))
        # An initialize needs no session, even when its params are wrong (then it gets -32602).
        opening = parsed.methods[0] == "initialize"
        session = None
        if not opening and self._sessions is not None:
            session = await self._require_session(headers, self._sessions, posted.identity, holder)
        version = _protocol_version(headers, session.protocol_version if session else None, opening)
        if parsed.batch and version != c.BATCH_VERSION:
            raise HttpError(400, InvalidRequest(f"Invalid Request: batches are not allowed in protocol {version}."))
        channel = self._channels.session(
            caller=posted.caller,
            principal=posted.principal,
            identity=posted.identity,
            address=posted.address,
            protocol_version=version,
            session=session,
            holder=holder,
        )
        first = parsed.messages[0]
        if opening and isinstance(first, RpcRequest):
            return await self._initialize(first, channel)
        if not parsed.batch and isinstance(first, Notification):
            return await self._notification(first, channel)
        logs = None
        if session is not None and version >= c.RESUMABLE_VERSION:
            logs = StreamLogs(self._store, session.id, limits, self.senders, session.trust)
        return SessionAnswer(
            dispatcher=self._dispatcher,
            parsed=parsed,
            channel=channel,
            accepts=posted.accepts,
            logs=logs,
            keep_alive=self.keep_alive,
            max_open_s=config.max_stream_seconds,
            max_batch_answer_bytes=limits.max_batch_answer_bytes,
            budget=self._budget,
            step_up=config.step_up,
        )

    async def _post_stateless(self, request: Request, posted: Posted, holder: Holder) -> Response:
        """A 2026-07-28 POST: exactly one request (or a notification, acknowledged and dropped)."""
        parsed, accepts = posted.parsed, posted.accepts
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
        channel = self._channels.stateless(
            caller=posted.caller,
            principal=posted.principal,
            identity=posted.identity,
            address=posted.address,
            envelope=envelope,
            holder=holder,
        )
        if entry.method == SUBSCRIBE:
            if not accepts.sse:
                refusal = InvalidRequest("Not Acceptable: a subscription is a text/event-stream.")
                raise HttpError(406, refusal, request_id=entry.id)
            limits = self._config.limits

            async def accept(request: RpcRequest, channel: StatelessChannel) -> ListenFilter:
                return await listen_filter(
                    self._dispatcher, request, channel, limits.max_subscriptions, limits.max_uri_chars
                )

            listener = self._dispatcher.recorder.listener()  # its span covers the acceptance
            try:
                wanted = await (accept(entry, channel) if listener is None else listener.serve(accept, entry, channel))
            except InsufficientScope as refused:  # a resource's route: the step-up, as its subscribe gets
                challenge = self._config.step_up.headers(refused, request.scope)
                headers = {name.decode(): value.decode() for name, value in challenge}
                raise HttpError(FORBIDDEN, refused, headers, request_id=entry.id) from None
            except McpError as error:
                raise HttpError(status_for(error), error, request_id=entry.id) from None
            slots = await self._slots.take(channel.holder, self.keep_alive.interval_s, request_id=entry.id)
            return subscription(self._dispatcher, entry, wanted, slots, self.keep_alive)
        return StatelessAnswer(
            dispatcher=self._dispatcher,
            request=entry,
            channel=channel,
            sse=accepts.sse,
            json=accepts.json,
            keep_alive=self.keep_alive,
            step_up=self._config.step_up,
            budget=self._budget,
        )

    async def _notification(self, notification: Notification, channel: SessionChannel) -> Response:
        """A POST of one notification: taken, then 202; 400 when this process cannot take it."""
        try:
            await self._dispatcher.notification(notification.method, notification.params, channel)
        except NeedsSharedStore as refusal:
            raise HttpError(400, refusal) from None
        except Exception:  # a notification gets no answer, so a failure is only logged
            logger.exception("taking notification %s failed", truncate(notification.method))
        return Response(status_code=202)

    async def _initialize(self, initialize: RpcRequest, channel: SessionChannel) -> Response:
        try:
            result = await self._dispatcher.request(initialize, channel)
        except Exception as exc:
            return Response(error_answer(initialize.id, exc), media_type=c.MEDIA_JSON)
        headers = {}
        if self._sessions is not None:
            params = initialize.params
            version = negotiate_version(str(params["protocolVersion"]))
            try:
                _, session_id = await self._sessions.open(
                    channel.identity,
                    version,
                    params.get("clientInfo"),
                    params.get("capabilities"),
                    holder=channel.holder,
                )
            except StoreFull:
                raise HttpError(
                    503,
                    InvalidRequest(
                        "Service Unavailable: the server holds as many sessions as it may "
                        "(Sessions.max_sessions), all of callers it trusts more; try again later."
                    ),
                    {"retry-after": str(RETRY_AFTER_S)},
                    request_id=initialize.id,
                ) from None
            headers[c.HEADER_SESSION_ID] = session_id
        return Response(encode_result(initialize.id, result), media_type=c.MEDIA_JSON, headers=headers)

    async def _delete(self, request: Request, headers: Headers, sessions: SessionManager) -> Response:
        identity = caller_identity(request, self._config.credential_headers)
        session = await self._require_session(headers, sessions, identity, await self._holder(request, identity))
        _protocol_version(headers, session.protocol_version, opening=False)
        await sessions.close(session)
        age_s = sessions.age_s(headers.get(c.HEADER_SESSION_ID) or "", identity)
        if age_s is not None:
            self._dispatcher.recorder.session_ended(age_s, session.protocol_version)
        return Response(status_code=204)

    async def _listen(self, request: Request, headers: Headers, sessions: SessionManager) -> Response:
        """Open the session's GET stream for notifications not tied to a request, or resume
        a POST stream after `Last-Event-ID`."""
        if not accepts_sse(headers):
            raise HttpError(406, InvalidRequest("Not Acceptable: the GET stream is text/event-stream."))
        identity = caller_identity(request, self._config.credential_headers)
        holder = await self._holder(request, identity)
        session = await self._require_session(headers, sessions, identity, holder)
        _protocol_version(headers, session.protocol_version, opening=False)  # an invalid header is refused here too
        # Renewed often enough to keep the session alive (it lasts idle_s) and its claim held.
        renew_s = min(self.keep_alive.interval_s, sessions.idle_s / 2)
        last_event_id = headers.get(c.HEADER_LAST_EVENT_ID)
        if last_event_id is not None:
            logs, stream, seen = await self._resumable(session, last_event_id, sessions)
            slots = await self._slots.take(holder, renew_s, session_id=session.id)
            return resume_stream(logs, stream, seen, SessionLease(sessions, session, slots), self.keep_alive)
        # The claim lapses as the stream's slots do, after missed renewals: a process that died
        # holding it (or lost Redis as the stream ended) keeps no session from its GET stream.
        claim_s = SLOT_TTL_RENEWALS * renew_s
        claim = Claim(self._store, f"listen/{session.id}", secrets.token_urlsafe(16), claim_s)
        if not await claim.take():
            raise HttpError(409, InvalidRequest("Conflict: this session already has a GET stream open."))
        try:
            slots = await self._slots.take(holder, renew_s)
        except HttpError:
            await claim.release()
            raise
        lease = SessionLease(sessions, session, slots, claim)
        return session_stream(self._dispatcher, lease, self.keep_alive)

    async def _resumable(
        self, session: SessionRecord, last_event_id: str, sessions: SessionManager
    ) -> tuple[StreamLogs, int, int]:
        """The session's stream that `Last-Event-ID` names, and how much of it the client saw."""
        logs = StreamLogs(self._store, session.id, self._config.limits, self.senders)
        found = await logs.find(last_event_id) if session.protocol_version >= c.RESUMABLE_VERSION else None
        if found is None:
            # The general GET stream would never carry the answer the client waits for.
            message = "Bad Request: Last-Event-ID names no stream that can be resumed."
            if sessions.deployment.state_per_process:
                message += " " + sessions.deployment.refusal("resuming a stream another process sent")
            raise HttpError(400, InvalidRequest(message))
        return logs, *found

    async def _holder(self, request: Request, identity: bytes) -> Holder:
        """Whom what the request holds counts against (`holder_of`)."""
        principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
        account = await self._account(request, identity, principal)
        return holder_of(identity, client_address(request), principal, account)

    async def _account(self, request: Request, identity: bytes, principal: object) -> bytes | None:
        """The account `Limits.verify_credentials` finds for credentials no principal stands for."""
        if self._credentials is None or not identity or principal is not None:
            return None
        return await self._credentials.account(request.scope["headers"], identity)

    async def _require_session(
        self, headers: Headers, sessions: SessionManager, identity: bytes, holder: Holder
    ) -> SessionRecord:
        """The caller's live session named by the request: 400 without an id, 404 for any other.
        A session another process opened is counted against `holder` where it is adopted."""
        session_id = headers.get(c.HEADER_SESSION_ID)
        if not session_id:
            raise HttpError(400, InvalidRequest("Bad Request: the Mcp-Session-Id header is required."))
        session = await sessions.find(session_id, identity, holder)
        if session is None:
            logger.info("refused unknown, expired or foreign session %s", truncate(session_id))
            raise HttpError(404, InvalidRequest("Session not found."))
        return session


def _refusal(refusal: HttpError) -> Response:
    return Response(
        encode_error(refusal.request_id, refusal.error),
        status_code=refusal.status,
        media_type=c.MEDIA_JSON,
        headers=refusal.headers,
    )


def _protocol_version(headers: Headers, session_version: str | None, opening: bool) -> str:
    """The version a request is handled under: its session's, else its header's, else the
    spec's fallback. An unsupported header is refused; a supported one that differs from the
    session's is tolerated (clients only SHOULD send the negotiated version)."""
    value = headers.get(c.HEADER_PROTOCOL_VERSION)
    if value is None or opening:
        return session_version or c.FALLBACK_VERSION
    if value not in c.SESSION_ERA_VERSIONS:
        raise HttpError(
            400,
            InvalidRequest(
                f"Bad Request: unsupported MCP-Protocol-Version {truncate(value)!r}; "
                f"supported: {', '.join(c.SESSION_ERA_VERSIONS)}."
            ),
        )
    return session_version or value
