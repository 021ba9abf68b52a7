"""The client of one request, as the server layer sees it, whichever protocol era it speaks.

The session era (2025-03-26 to 2025-11-25) remembers the client in a session: its
capabilities and log level come from `initialize` and `logging/setLevel`, a question is a
server-to-client request on the call's stream, and `notifications/cancelled` names a running
call. The stateless revision (2026-07-28) carries all of that in each request: capabilities
and log level in `params._meta`, answers in `inputResponses` and a sealed `requestState`, and
a question ends the call `input_required`. `SessionChannel` and `StatelessChannel` are those
two answers to the same questions, so nothing above this module branches on the era.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

import anyio

from fastapi_mcp_routes.server.call import (
    QUESTION_KEY,
    SEVERITY,
    STATE_KEY,
    Emit,
    InputRequest,
    InputRequired,
    ToolCall,
    declares,
    is_reserved,
    lacking,
)
from fastapi_mcp_routes.server.call_slots import CallSlots
from fastapi_mcp_routes.server.envelope import Envelope, ResultShaper, check_param_headers
from fastapi_mcp_routes.server.sealing.request_state import RequestStateSealer
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.store.base import Holder, SessionRecord
from fastapi_mcp_routes.store.policy import address_key, holder_of
from fastapi_mcp_routes.telemetry.current import note_route
from fastapi_mcp_routes.tools.invoke import Caller
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.wire.constants import (
    ECHOED_TEXT_MAX,
    ELICITATION_SINCE,
    INVALID_PARAMS,
    JSONRPC_VERSION,
    RESOURCE_NOT_FOUND,
    TASKS_EXTENSION,
)
from fastapi_mcp_routes.wire.errors import InvalidRequest, ToolContextError
from fastapi_mcp_routes.wire.json import RawJSON
from fastapi_mcp_routes.wire.jsonrpc import Request, RequestId, is_request_id, truncate

Result = Mapping[str, Any] | RawJSON
# The two eras a channel speaks, and a method is declared for (server/features.py).
SESSION_ERA: Final = "session"  # 2025-03-26 to 2025-11-25: initialize, Mcp-Session-Id
STATELESS_ERA: Final = "stateless"  # 2026-07-28: every request carries what it needs
CANCELLED: Final = "notifications/cancelled"
NO_SESSION_TO_SUBSCRIBE: Final = "Invalid Request: a subscription needs a session (the server runs without them)."
# How long a route waits for the client to answer a server-to-client request.
CLIENT_REQUEST_TIMEOUT_S: Final = 300.0


@dataclass(frozen=True, slots=True)
class CallInput:
    """What a `tools/call` brings besides its tool and arguments, from earlier rounds."""

    answers: Mapping[str, Any]  # the client's answers to the route's questions so far
    confirmation_state: object = None  # the sealed state of a confirmation question
    confirmation_answer: object = None  # this round's answer to the confirmation question


NO_EARLIER_ROUND: Final = CallInput({})


class Registration:
    """While inside, the call is one `notifications/cancelled` (or a closed stream) can stop,
    and it holds a running call's slot (server/call_slots.py); on entry, `InvalidRequest` when a
    request with its id is running already, `ServerBusy` past a bound on running calls.
    Separate from running the call: a tool call that becomes a task runs on after its request
    ended, when a cancellation of that request must no longer reach it, and keeps its slot
    until its route ends (`ToolCall.outlives_request`)."""

    # A class rather than a generator-based context manager: it is entered on every call.
    __slots__ = ("_call", "_channel", "_slots")

    def __init__(self, channel: ClientChannel, call: ToolCall) -> None:
        self._channel = channel
        self._call = call
        self._slots: CallSlots | None = None  # where the call's slot is held, while it is

    def __enter__(self) -> None:
        call, channel = self._call, self._channel
        running = channel.running()
        if call.request_id in running:
            # Ids of requests in flight must be unique, or a cancellation could not name one.
            raise InvalidRequest(f"Invalid Request: a request with id {truncate(call.request_id)!r} is still running.")
        slots = channel.call_slots
        if slots is not None:
            slots.take(channel.holder, len(running))  # the session's calls are those it can cancel
            self._slots = slots
            call.slot = self
        running[call.request_id] = call.cancel_scope

    def __exit__(self, *exc_info: object) -> None:
        call = self._call
        self._channel.call_ended(call.request_id)
        if not call.outlives_request:
            self.give_back()

    def give_back(self) -> None:
        """The call's route ended: its slot goes back, once."""
        slots = self._slots
        if slots is not None:
            self._slots = None
            self._call.slot = None  # the call and this refer to each other until now
            slots.give_back(self._channel.holder)


class WatchedStream(Protocol):
    """The stream of a request's answer, as far as its channel asks of it."""

    def watch_disconnect(self) -> None: ...


class ClientChannel(abc.ABC):
    """What every era answers alike: who calls, and where the call's messages go."""

    protocol_version: str
    # Which methods it may call: those the features declare for its era (server/features.py).
    era: str
    # The code of an unknown resource's error: the era's (wire/errors.py, ResourceNotFound).
    resource_not_found_code: int

    def __init__(
        self,
        *,
        caller: Caller,
        principal: Any,
        identity: bytes,
        address: str = "",
        holder: Holder | None = None,
        call_slots: CallSlots | None = None,
    ) -> None:
        self.caller = caller  # what the route's own request inherits
        self.principal = principal  # what the endpoint's `auth` dependency returned
        self.identity = identity  # the caller's credentials, canonical: what state binds to
        self.address = address  # the client's network address, as the server sees it
        # Whom what the caller holds counts against (store/policy.py): found once, read per bound.
        self.holder = holder if holder is not None else holder_of(identity, address, principal)
        self.call_slots = call_slots  # the process's running calls; None: not bounded
        self.emit: Emit | None = None  # the request's own SSE stream, when the client reads one
        self._own_calls: dict[RequestId, anyio.CancelScope] = {}
        self._left = False  # the client closed the request's connection before its answer
        self._hung_up: anyio.Event | None = None  # made when a call first waits for that
        # The answer's stream, which watches for the client leaving once a call waits for that.
        self.answer_stream: WatchedStream | None = None

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        return None

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return {}

    @property
    def owner(self) -> bytes:
        """Whom what the caller is given belongs to (a confirmation token): the credentials,
        else (anonymous) the client's address, so anonymous callers are not all one caller."""
        return self.identity or address_key(self.address)

    def start_call(
        self, request: Request, tool: Tool, arguments: Mapping[str, Any]
    ) -> tuple[CallInput, ToolCall, Registration]:
        """The call `request` makes of `tool`'s route: what it brings from earlier rounds, the
        running call, and its registration (`with registration:` while it runs)."""
        given = self.call_input(request.params, tool, arguments)
        note_route(tool.method, tool.path_format)
        call = ToolCall.of(request.id, request.params, self, tool.name, arguments, given.answers)
        return given, call, Registration(self, call)

    def running(self) -> dict[RequestId, anyio.CancelScope]:
        """The calls a cancellation can name: by default, this request's own."""
        return self._own_calls

    def call_ended(self, request_id: RequestId) -> None:
        self._own_calls.pop(request_id, None)

    def cancel_all(self) -> None:
        """The client went away: every call this request runs ends."""
        for scope in self._own_calls.values():
            scope.cancel()

    def client_left(self) -> None:
        """The client closed the request's connection before its answer. In the session era its
        calls run on (the spec keeps a call for a resume, and cancels only explicitly); a call
        that only samples (a streaming route's window) ends early with what it has."""
        self._left = True
        if self._hung_up is not None:
            self._hung_up.set()

    def hung_up(self) -> anyio.Event | None:
        """Set once the client that would read this request's answer has gone (`client_left`)."""
        if self._hung_up is None:
            # Made on first ask: only calls that sample wait for it, most calls never ask.
            self._hung_up = anyio.Event()
            if self._left:
                self._hung_up.set()
            elif self.answer_stream is not None:
                self.answer_stream.watch_disconnect()
        return self._hung_up

    @abc.abstractmethod
    def wants_log(self, level: str) -> bool:
        """Whether a log message at `level` goes to the client."""

    @abc.abstractmethod
    def cannot_ask(self, request: InputRequest) -> str | None:
        """Why the client cannot be asked `request`, or `None` if it can."""

    @abc.abstractmethod
    async def ask(
        self, call: ToolCall, requests: Mapping[str, InputRequest], carry: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any]]:
        """The client's answers to `requests`, by key; `carry` goes with the call's next round
        when the answers come in a later request."""

    def call_input(self, params: Mapping[str, Any], tool: Tool, arguments: Mapping[str, Any]) -> CallInput:
        """What the request carries from earlier rounds of this call: by default nothing."""
        return NO_EARLIER_ROUND

    @property
    def tasks_declared(self) -> bool | None:
        """Whether the request declared the tasks extension (2026-07-28); `None` in an era
        without it, where every call is answered directly."""
        return None

    async def start_task(self, ttl_s: float | None) -> bool:
        """`ToolContext.start_task`: only a call that may be a task becomes one (server/tasks/runs.py)."""
        return False

    async def set_log_level(self, level: str) -> None:  # noqa: B027 - most channels keep no level
        """`logging/setLevel`: remembered where there is somewhere to remember it (a session)."""

    async def subscribe(self, uri: str, limit: int) -> None:
        """`resources/subscribe`: only a session remembers subscriptions."""
        raise InvalidRequest(NO_SESSION_TO_SUBSCRIBE)

    async def unsubscribe(self, uri: str) -> None:
        raise InvalidRequest(NO_SESSION_TO_SUBSCRIBE)

    def shape(self, method: str, result: Result, private: bool) -> Result:
        """The result as this era sends it."""
        return result

    async def cancel(self, params: Mapping[str, Any]) -> None:
        """`notifications/cancelled`; a malformed or unknown id is ignored, as invalid
        cancellations should be (spec, basic/utilities/cancellation)."""
        request_id: Any = params.get("requestId")
        running = self.running().get(request_id) if is_request_id(request_id) else None
        if running is not None:
            running.cancel()

    async def deliver(self, request_id: RequestId, payload: Mapping[str, Any]) -> None:  # noqa: B027
        """A client's reply to a server-to-client request; by default nobody waits for one."""


class SessionChannel(ClientChannel):
    """A session-era client: in a session, or, with sessions off, one request at a time."""

    era = SESSION_ERA
    resource_not_found_code = RESOURCE_NOT_FOUND

    def __init__(
        self,
        *,
        caller: Caller,
        principal: Any,
        identity: bytes,
        protocol_version: str,
        session: SessionRecord | None = None,
        sessions: SessionManager | None = None,
        address: str = "",
        holder: Holder | None = None,
        call_slots: CallSlots | None = None,
    ) -> None:
        super().__init__(
            caller=caller,
            principal=principal,
            identity=identity,
            address=address,
            holder=holder,
            call_slots=call_slots,
        )
        self.protocol_version = protocol_version
        self.session = session
        self._sessions = sessions if session is not None else None

    @property
    def session_id(self) -> str | None:
        return self.session.id if self.session is not None else None

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        return self.session.client_info if self.session is not None else None

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return (self.session.client_capabilities or {}) if self.session is not None else {}

    def running(self) -> dict[RequestId, anyio.CancelScope]:
        if self.session is None or self._sessions is None:
            return super().running()
        return self._sessions.running(self.session.id)

    def call_ended(self, request_id: RequestId) -> None:
        if self.session is None or self._sessions is None:
            super().call_ended(request_id)
        else:
            self._sessions.call_ended(self.session.id, request_id)

    def wants_log(self, level: str) -> bool:
        threshold = self.session.log_level if self.session is not None else None
        return threshold is None or SEVERITY[level] >= SEVERITY[threshold]

    async def set_log_level(self, level: str) -> None:
        if self.session is not None and self._sessions is not None:
            await self._sessions.set_log_level(self.session, level)

    async def subscribe(self, uri: str, limit: int) -> None:
        """`resources/subscribe`: the session hears the resource's updates on its GET stream."""
        sessions, session = self._subscriber()
        await sessions.subscribe(session, uri, limit)

    async def unsubscribe(self, uri: str) -> None:
        sessions, session = self._subscriber()
        await sessions.unsubscribe(session, uri)

    def _subscriber(self) -> tuple[SessionManager, SessionRecord]:
        if self.session is None or self._sessions is None:
            raise InvalidRequest(NO_SESSION_TO_SUBSCRIBE)
        return self._sessions, self.session

    def cannot_ask(self, request: InputRequest) -> str | None:
        if self.session is None or self.emit is None or self._sessions is None:
            return f"{request.method} needs a session and a response stream the client reads as SSE"
        unheard = self._sessions.cannot_hear_answers()
        if unheard is not None:
            return unheard
        if request.capability == "elicitation" and self.protocol_version < ELICITATION_SINCE:
            return f"elicitation/create is not part of protocol {self.protocol_version}"
        if not declares(self.client_capabilities, request):
            wanted = f"{request.capability!r} capability" + (f" with {request.mode!r} mode" if request.mode else "")
            return f"the client did not declare the {wanted}, so it cannot answer {request.method}"
        return None

    async def ask(
        self, call: ToolCall, requests: Mapping[str, InputRequest], carry: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any]]:
        """One server-to-client request after the other, on the call's own stream."""
        return {key: await self._ask_one(call, request) for key, request in requests.items()}

    async def _ask_one(self, call: ToolCall, request: InputRequest) -> Mapping[str, Any]:
        reason = self.cannot_ask(request)
        emit, session, sessions = self.emit, self.session, self._sessions
        if reason is not None or emit is None or session is None or sessions is None:
            raise ToolContextError(reason or f"{request.method} needs a session")
        request_id = sessions.new_request_id()
        message = {"jsonrpc": JSONRPC_VERSION, "id": request_id, **request.as_wire()}
        try:
            async with (
                sessions.question(session.id, self.holder, request_id, CLIENT_REQUEST_TIMEOUT_S),
                sessions.replies(session.id, request_id) as replies,
            ):
                await emit(message)
                with anyio.fail_after(CLIENT_REQUEST_TIMEOUT_S):
                    reply = sessions.decode_reply(await anext(aiter(replies)))
        except (TimeoutError, anyio.get_cancelled_exc_class()) as stopped:
            # Tell the client to stop asking its user (spec, basic/lifecycle "Timeouts").
            with anyio.CancelScope(shield=True):
                await call.notify(CANCELLED, {"requestId": request_id, "reason": "the tool call ended"})
            if isinstance(stopped, TimeoutError):
                timeout = f"{CLIENT_REQUEST_TIMEOUT_S:.0f} s"
                raise ToolContextError(f"the client did not answer {request.method} within {timeout}") from None
            raise
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], Mapping) else {}
            reason = truncate(error.get("message", "no reason given"), ECHOED_TEXT_MAX)
            raise ToolContextError(f"the client refused {request.method}: {reason}")
        result = reply.get("result")
        return result if isinstance(result, Mapping) else {}

    async def cancel(self, params: Mapping[str, Any]) -> None:
        if self.session is None or self._sessions is None:
            await super().cancel(params)
            return
        request_id: Any = params.get("requestId")
        if is_request_id(request_id):
            await self._sessions.cancel(self.session.id, request_id)

    async def deliver(self, request_id: RequestId, payload: Mapping[str, Any]) -> None:
        if self.session is not None and self._sessions is not None:
            await self._sessions.deliver(self.session.id, request_id, payload)


class StatelessChannel(ClientChannel):
    """A 2026-07-28 client: everything it is and has answered travels in the request."""

    era = STATELESS_ERA
    resource_not_found_code = INVALID_PARAMS  # SEP-2164

    def __init__(
        self,
        *,
        caller: Caller,
        principal: Any,
        identity: bytes,
        envelope: Envelope,
        sealer: RequestStateSealer,
        shaper: ResultShaper,
        address: str = "",
        holder: Holder | None = None,
        call_slots: CallSlots | None = None,
    ) -> None:
        super().__init__(
            caller=caller,
            principal=principal,
            identity=identity,
            address=address,
            holder=holder,
            call_slots=call_slots,
        )
        self.protocol_version = envelope.version
        self._envelope = envelope
        self._sealer = sealer
        self._shaper = shaper

    def client_left(self) -> None:
        """The client closed the request's stream: in this era that cancels its calls."""
        self.cancel_all()

    @property
    def client_info(self) -> Mapping[str, Any] | None:
        return self._envelope.client_info

    @property
    def client_capabilities(self) -> Mapping[str, Any]:
        return self._envelope.capabilities

    def wants_log(self, level: str) -> bool:
        # A request that named no log level gets no log messages at all.
        threshold = self._envelope.log_level
        return threshold is not None and SEVERITY[level] >= SEVERITY[threshold]

    @property
    def tasks_declared(self) -> bool:
        extensions = self._envelope.capabilities.get("extensions")
        return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)

    def cannot_ask(self, request: InputRequest) -> str | None:
        if declares(self._envelope.capabilities, request):
            return None
        return f"the client did not declare the {request.capability!r} capability"

    async def ask(
        self, call: ToolCall, requests: Mapping[str, InputRequest], carry: Mapping[str, Any]
    ) -> dict[str, Mapping[str, Any]]:
        """The answers, when the client gave them all; else the call ends `input_required`
        with every unanswered question and a sealed state for the retry."""
        for request in requests.values():
            if not declares(self._envelope.capabilities, request):
                await call.stop(lacking(request))
        answered = call.answers
        missing = {key: request.as_wire() for key, request in requests.items() if not _answer(answered.get(key))}
        if missing:
            carried = await call.carried() if call.carried is not None else {}
            sealed = self._sealer.seal(self._binding(call.tool, call.arguments), {**answered, **carry, **carried})
            result = {"resultType": "input_required", "inputRequests": missing, "requestState": sealed}
            await call.stop(InputRequired(result))
        return {key: answered[key] for key in requests}

    def call_input(self, params: Mapping[str, Any], tool: Tool, arguments: Mapping[str, Any]) -> CallInput:
        """The client's answers so far: those sealed in requestState (which nothing the client
        sends can replace), plus this request's `inputResponses`.

        Answers without a state are taken as the spec allows (a client may answer up front,
        and stateless servers need no state); keys the route never asks are simply unused.
        Keys the confirmation gate owns are never taken from the client, so an answer sent
        before the question was asked cannot be sealed as if the user had given it."""
        check_param_headers(tool.header_params, arguments, self._envelope.param_headers)
        sealed: dict[str, Any] = {}
        if "requestState" in params:  # the binding (a digest and an HMAC) only when there is one
            sealed = self._sealer.open(params["requestState"], self._binding(tool.name, arguments))
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        answers = {key: value for key, value in sealed.items() if not is_reserved(key)}
        for key, response in responses.items():
            if not is_reserved(key):
                answers.setdefault(key, response)
        return CallInput(answers, sealed.get(STATE_KEY), responses.get(QUESTION_KEY))

    def shape(self, method: str, result: Result, private: bool) -> Result:
        return self._shaper.shape(method, result, "private" if private else "public")

    def _binding(self, tool: str, arguments: Mapping[str, Any]) -> bytes:
        """What a requestState is bound to: the caller's credentials, the tool, the arguments."""
        return self._sealer.binding(self.identity, tool, arguments)


def _answer(value: object) -> bool:
    return isinstance(value, Mapping)


class Channels:
    """Makes the channel of each request, with what each era needs to serve it."""

    def __init__(
        self,
        *,
        sessions: SessionManager | None,
        sealer: RequestStateSealer,
        shaper: ResultShaper,
        call_slots: CallSlots | None = None,
    ) -> None:
        self._sessions = sessions
        self._sealer = sealer
        self._shaper = shaper
        self._call_slots = call_slots

    def session(
        self,
        *,
        caller: Caller,
        principal: Any,
        identity: bytes,
        address: str,
        protocol_version: str,
        session: SessionRecord | None,
        holder: Holder | None = None,
    ) -> SessionChannel:
        return SessionChannel(
            caller=caller,
            principal=principal,
            identity=identity,
            address=address,
            holder=holder,
            protocol_version=protocol_version,
            session=session,
            sessions=self._sessions,
            call_slots=self._call_slots,
        )

    def stateless(
        self,
        *,
        caller: Caller,
        principal: Any,
        identity: bytes,
        address: str,
        envelope: Envelope,
        holder: Holder | None = None,
    ) -> StatelessChannel:
        return StatelessChannel(
            caller=caller,
            principal=principal,
            identity=identity,
            address=address,
            holder=holder,
            envelope=envelope,
            sealer=self._sealer,
            shaper=self._shaper,
            call_slots=self._call_slots,
        )
