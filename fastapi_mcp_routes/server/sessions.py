"""Session-era sessions: ids, binding to the caller that opened them, and their calls.

A session id is sealed with the endpoint's secret (server/seal.py) and bound to the caller's
credentials: it carries what any process needs to serve the session (its negotiated version,
the client's capabilities, its caller's trust, its end of life), and the same id presented with
other credentials fails its seal exactly like an unknown id, so a leaked id is useless to anyone
else, probing ids tells nothing, and neither costs a look in the store. The records live in the
`Store`, which says whether a session is still live (closed, pushed out and idle sessions are
gone); a store of this process's memory alone adopts a session another process sealed
(`Store.adopt_session`). What only this process can hold (the cancel scopes of the calls it
runs) stays here, by session id.

A session that ends (closed, or pushed out by the store's bounds) is announced on its own
channel of the Store, so a stream of it open in any process ends too. Expiry is not announced:
an open stream renews its session, and checks that it is still there, now and then.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import anyio

from fastapi_mcp_routes.options import Limits, Sessions
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.seal import INSTANCE_BYTES, Secret
from fastapi_mcp_routes.store.base import (
    Holder,
    Inbox,
    SessionBounds,
    SessionRecord,
    StoreFull,
    Trust,
    share_holders,
    shares,
)
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.wire.errors import McpError, NeedsSharedStore, StoreUnavailable, ToolContextError
from fastapi_mcp_routes.wire.json import dumps, loads

# 16 random bytes name a session in the store; its sealed id adds the tag (spec: ids are
# "cryptographically secure", and a guess must also forge the tag).
SESSION_KEY_BYTES: Final = 16
# What a session keeps of the client's `initialize` (see `kept_capabilities`): names a client
# declares are few and short; everything past these bounds would only be held, never read.
CLIENT_INFO_KEPT: Final = frozenset({"name", "title", "version", "description", "websiteUrl"})
KEPT_TEXT: Final = 256
KEPT_NAMES: Final = 32
# What a sealed id carries of the client (it travels in a header on every request): the
# capability names and their modes `declares` reads, and the client's name and version.
SEALED_NAMES: Final = 8
SEALED_TEXT: Final = 64
CANCELS: Final = "cancels"
# Sealed ids opened lately, by id and credentials: a live session's requests skip the decoding
# (opening one costs 7.7 µs, about 3% of a tool call's server CPU; a kept one 0.2 µs).
OPENED_KEPT: Final = 4096
# Listening for cancellations sent to other processes again after a store outage: first after
# this long, then twice as long each time, up to the last. The last is the pace at which the
# store's pub/sub connection is made again (store/redis_pubsub.py): a try while it is down fails
# at once, without a word to Redis, and a longer wait loses the cancellations sent meanwhile.
FORWARD_RETRY_FIRST_S: Final = 1.0
FORWARD_RETRY_LAST_S: Final = 2.0
_PURPOSE: Final = "session id"

RequestKey = str | int
logger = logging.getLogger("fastapi_mcp_routes")


@dataclasses.dataclass(frozen=True, slots=True)
class _Sealed:
    """What a sealed session id says."""

    key: str  # the session's name in the store
    instance: bytes  # the process that opened it
    expires: float
    protocol_version: str
    trust: Trust
    client_info: dict[str, str] | None
    client_capabilities: dict[str, Any] | None


class SessionManager:
    """Opens, finds and closes sessions, and carries replies to the calls waiting for them."""

    def __init__(
        self,
        *,
        options: Sessions,
        deployment: Deployment | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._options = options
        self._limits = limits if limits is not None else Limits()
        self._bounds = SessionBounds(options.idle_s, options.max_sessions, options.max_per_caller)
        deployment = deployment or Deployment(Secret.configure(None, {}, None), MemoryStore())
        self._deployment = deployment
        self._store = deployment.store
        self._secret = deployment.secret
        self._clock = clock
        self._running: dict[str, dict[RequestKey, anyio.CancelScope]] = {}
        self._opened: OrderedDict[tuple[str, bytes], _Sealed] = OrderedDict()

    @property
    def idle_s(self) -> float:
        return self._options.idle_s

    @property
    def deployment(self) -> Deployment:
        return self._deployment

    def binding(self, identity: bytes) -> bytes:
        """A keyed hash of the caller's credentials; never stored in the clear."""
        return self._secret.mac("session binding", identity)

    async def open(
        self,
        identity: bytes,
        protocol_version: str,
        client_info: Mapping[str, Any] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        *,
        holder: Holder | None = None,
    ) -> tuple[SessionRecord, str]:
        """Start a session bound to `identity`, counted against `holder` (by default the same
        caller, anonymous) for the per-caller bound; returns its record and its sealed id. The
        store pushes out what its bounds do not hold, and raises `StoreFull` when the total is
        reached by sessions trusted more."""
        binding = self.binding(identity)
        counted = self.binding(holder.owner) if holder is not None else binding
        trust = holder.trust if holder is not None else Trust.ANONYMOUS
        sealed = _Sealed(
            key=secrets.token_urlsafe(SESSION_KEY_BYTES),
            instance=self._secret.instance,
            expires=self._clock() + self._options.max_life_s,
            protocol_version=protocol_version,
            trust=trust,
            client_info=_sealed_client_info(client_info),
            client_capabilities=_sealed_capabilities(client_capabilities),
        )
        record = SessionRecord(
            sealed.key,
            binding,
            counted,
            protocol_version,
            kept_client_info(client_info),
            kept_capabilities(client_capabilities),
            trust=trust,
        )
        try:
            gone = await self._store.open_session(record, self._bounds)
        except StoreFull as full:
            await self._ended(full.gone)
            raise
        await self._ended(gone)
        return record, self._seal(sealed, identity)

    async def find(self, session_id: str, identity: bytes, holder: Holder | None = None) -> SessionRecord | None:
        """The caller's live session with this id; unknown, expired and foreign are all `None`.
        A session another process opened is adopted as `holder`'s (by default the same caller,
        anonymous), as `open` counts it."""
        sealed = self._open(session_id, identity)
        if sealed is None:
            return None
        record = await self._store.find_session(sealed.key, self._options.idle_s)
        if record is not None:
            return record
        self._retire(sealed.key)
        if self._store.shared or sealed.instance == self._secret.instance:
            return None  # it ended (or idled out) where it lives
        # Opened by another process that keeps its own memory: its seal vouches for it here.
        binding = self.binding(identity)
        counted = self.binding(holder.owner) if holder is not None else binding
        adopted = SessionRecord(
            sealed.key,
            binding,
            counted,
            sealed.protocol_version,
            sealed.client_info,
            sealed.client_capabilities,
            trust=sealed.trust,
        )
        try:
            kept = await self._store.adopt_session(adopted, self._bounds)
        except StoreFull as full:
            await self._ended(full.gone)
            return None
        return adopted if kept else None

    async def live(self, record: SessionRecord) -> bool:
        """Whether a session found before is still there; its idle time restarts."""
        return await self._store.find_session(record.id, self._options.idle_s) is not None

    def _seal(self, sealed: _Sealed, identity: bytes) -> str:
        payload = dumps(
            [
                sealed.key,
                base64.urlsafe_b64encode(sealed.instance).decode(),
                int(sealed.expires),
                sealed.protocol_version,
                int(sealed.trust),
                sealed.client_info,
                sealed.client_capabilities,
            ]
        )
        return self._secret.seal(_PURPOSE, payload, identity)

    def _open(self, session_id: str, identity: bytes) -> _Sealed | None:
        seen = self._opened.get((session_id, identity))
        if seen is None:
            seen = self._decode(session_id, identity)
            if seen is None:
                return None
            self._opened[session_id, identity] = seen
            if len(self._opened) > OPENED_KEPT:
                self._opened.popitem(last=False)
        return seen if seen.expires > self._clock() else None

    def _decode(self, session_id: str, identity: bytes) -> _Sealed | None:
        payload = self._secret.open(_PURPOSE, session_id, identity)
        if payload is None:
            return None
        try:
            key, instance, expires, version, trust, info, capabilities = loads(payload)
            sealed = _Sealed(
                key, base64.urlsafe_b64decode(instance), expires, version, Trust(trust), info, capabilities
            )
        except (McpError, ValueError, TypeError, binascii.Error):
            return None  # sealed by this secret, so never in practice: a seal the code can no longer read
        if not isinstance(sealed.key, str) or len(sealed.instance) != INSTANCE_BYTES or not isinstance(expires, int):
            return None
        return sealed

    async def close(self, record: SessionRecord) -> None:
        """End a session: its record goes, and every call it still runs here is cancelled."""
        if self._deployment.state_per_process:
            self._deployment.needs_store("ending a session (DELETE) in every process")
        await self._store.close_session(record.id)
        await self._ended((record.id,))

    def ended(self, session_id: str) -> AbstractAsyncContextManager[Inbox]:
        """Listen for the session's end (open it, then check the session is still there)."""
        return self._store.subscribe(_ended_channel(session_id))

    async def set_log_level(self, record: SessionRecord, level: str) -> None:
        if self._deployment.state_per_process:
            self._deployment.needs_store("a log level (logging/setLevel) every process of a session applies")
        await self._store.save_session(dataclasses.replace(record, log_level=level))

    async def cancel(self, session_id: str, request_id: RequestKey) -> None:
        """`notifications/cancelled` for a call of the session: cancelled here when it runs
        here, else in whichever process runs it (through the store's messages). Where
        processes share no store, `NeedsSharedStore`: another process may run it."""
        running = self._running.get(session_id, {}).get(request_id)
        if running is not None:
            running.cancel()
        elif self._store.shared:
            await self._store.publish(CANCELS, dumps([session_id, request_id]))
        elif self._deployment.state_per_process:
            raise NeedsSharedStore(
                self._deployment.needs_store("a notifications/cancelled for a call this process does not run")
            )

    async def forward_cancels(self) -> None:
        """Cancel the calls of this process that a cancellation sent to another one names, or
        all calls of a session that ended in another one (run for the app's lifetime when the
        store is shared). While the store cannot be reached it tries again, less and less often."""
        wait_s = FORWARD_RETRY_FIRST_S
        while True:
            try:
                async with self._store.subscribe(CANCELS) as inbox:
                    wait_s = FORWARD_RETRY_FIRST_S
                    async for message in inbox:
                        self._take_cancel(message)
            except StoreUnavailable as down:
                if wait_s == FORWARD_RETRY_FIRST_S:  # once an outage, not every try
                    logger.warning(
                        "cancellations from other processes cannot be heard (%s); listening again every %g s",
                        down.reason,
                        FORWARD_RETRY_LAST_S,
                    )
            await anyio.sleep(wait_s)
            wait_s = min(wait_s * 2, FORWARD_RETRY_LAST_S)

    def _take_cancel(self, message: bytes) -> None:
        try:
            session_id, request_id = loads(message)
        except (McpError, ValueError, TypeError):
            return
        if not isinstance(session_id, str):
            return
        if request_id is None:  # the session ended in another process
            self._retire(session_id)
        elif isinstance(request_id, (str, int)) and (running := self._running.get(session_id, {}).get(request_id)):
            running.cancel()

    def cannot_hear_answers(self) -> str | None:
        """Why a question to the client cannot be asked here: its answer may reach another
        process, and only a shared store brings it back; `None` when it can."""
        if self._deployment.state_per_process:
            return self._deployment.needs_store("asking the client (elicitation, sampling, roots) in a session")
        return None

    def running(self, session_id: str) -> dict[RequestKey, anyio.CancelScope]:
        """The calls of a session that run in this process, so `notifications/cancelled` can
        name them. The map is dropped when its last call ends."""
        return self._running.setdefault(session_id, {})

    def call_ended(self, session_id: str, request_id: RequestKey) -> None:
        calls = self._running.get(session_id)
        if calls is not None:
            calls.pop(request_id, None)
            if not calls:
                del self._running[session_id]

    async def _ended(self, session_ids: tuple[str, ...]) -> None:
        """Announce the end of sessions: their streams end, and their calls are cancelled here
        and, with a shared store, in every process (`forward_cancels`, with no request id)."""
        for session_id in session_ids:
            self._retire(session_id)
            await self._store.publish(_ended_channel(session_id), b"")
            if self._store.shared:
                await self._store.publish(CANCELS, dumps([session_id, None]))

    def _retire(self, session_id: str) -> None:
        for scope in self._running.pop(session_id, {}).values():
            scope.cancel()

    # -- server-to-client requests ---------------------------------------------------------

    def new_request_id(self) -> str:
        # Our ids stand apart from any id the client uses by their prefix.
        return "s" + secrets.token_urlsafe(9)

    async def deliver(self, session_id: str, request_id: RequestKey, payload: Mapping[str, Any]) -> None:
        """Hand a client's reply to the call waiting for it; a reply nobody waits for is dropped."""
        await self._store.publish(_reply_channel(session_id, request_id), dumps(dict(payload)))

    @asynccontextmanager
    async def question(self, session_id: str, holder: Holder, request_id: str, wait_s: float) -> AsyncIterator[None]:
        """Hold one question's place while it waits up to `wait_s` for the client's answer;
        `ToolContextError` names the bound when the session, the caller or the server has as
        many questions waiting as it may (callers it trusts less, only their share of it)."""
        limits = self._limits
        caller = self.binding(holder.owner).hex()
        bounds = {  # pool -> (limit, the bound its refusal names)
            f"questions/session/{session_id}": (limits.max_questions_per_session, "Limits.max_questions_per_session"),
            f"questions/caller/{caller}": (limits.max_questions_per_caller, "Limits.max_questions_per_caller"),
        }
        for name, limit in shares("questions/all", limits.max_questions, holder.trust):
            holders = share_holders(name)
            bounds[name] = (
                limit,
                f"the share of Limits.max_questions {holders} may hold" if holders else "Limits.max_questions",
            )
        pools = [(name, limit) for name, (limit, _) in bounds.items()]
        # The slot outlives the wait a little, so it lapses only once the question surely ended.
        full = await self._store.take_slots(pools, request_id, wait_s + 60)
        if full is not None:
            limit, bound = bounds[full]
            raise ToolContextError(
                f"{limit} questions already wait for the client's answer ({bound}); "
                "answer or cancel one, then try again"
            )
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await self._store.free_slots(list(bounds), request_id)

    def replies(self, session_id: str, request_id: RequestKey) -> AbstractAsyncContextManager[Inbox]:
        """Listen for the reply to one request (open it before the request goes out)."""
        return self._store.subscribe(_reply_channel(session_id, request_id))

    def decode_reply(self, message: bytes) -> Mapping[str, Any]:
        reply = loads(message)
        return reply if isinstance(reply, dict) else {}


def _ended_channel(session_id: str) -> str:
    return f"ended/{session_id}"


def _sealed_client_info(info: Mapping[str, Any] | None) -> dict[str, str] | None:
    if info is None:
        return None
    return {key: value[:SEALED_TEXT] for key in ("name", "version") if isinstance(value := info.get(key), str)}


def _sealed_capabilities(capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The capabilities a sealed id carries: names and modes (what `declares` reads), short."""
    kept = kept_capabilities(capabilities)
    if kept is None:
        return None
    return {
        name[:SEALED_TEXT]: (
            {key[:SEALED_TEXT]: {} for key in list(value)[:SEALED_NAMES]} if isinstance(value, Mapping) else value
        )
        for name, value in list(kept.items())[:SEALED_NAMES]
    }


def kept_client_info(info: Mapping[str, Any] | None) -> dict[str, str] | None:
    """What a session keeps of `clientInfo`: its short text fields, cut to `KEPT_TEXT` each.
    A session lives for minutes and `initialize` may carry megabytes: only this much stays."""
    if info is None:
        return None
    return {key: value[:KEPT_TEXT] for key, value in info.items() if key in CLIENT_INFO_KEPT and isinstance(value, str)}


def kept_capabilities(capabilities: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What a session keeps of the client's `capabilities`: two levels of names (a capability
    and its modes or flags, which is all `declares` reads), at most `KEPT_NAMES` of each, with
    flag values only when they are plain scalars."""
    if capabilities is None:
        return None
    kept: dict[str, Any] = {}
    for name, value in list(capabilities.items())[:KEPT_NAMES]:
        if isinstance(value, Mapping):
            kept[name[:KEPT_TEXT]] = {
                key[:KEPT_TEXT]: ({} if isinstance(inner, Mapping) else inner if _scalar(inner) else None)
                for key, inner in list(value.items())[:KEPT_NAMES]
            }
        elif _scalar(value):
            kept[name[:KEPT_TEXT]] = value
    return kept


def _scalar(value: object) -> bool:
    return (
        value is None or isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) <= KEPT_TEXT)
    )


def _reply_channel(session_id: str, request_id: RequestKey) -> str:
    return f"reply/{session_id}/{request_id!r}"
