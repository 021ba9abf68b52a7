"""Session-era sessions: ids, binding to the caller that opened them, and their calls.

A session is bound to a keyed hash of the credentials that opened it. The same id presented
with other credentials is answered exactly like an unknown id, so a leaked id is useless to
anyone else and probing ids tells nothing. The records live in the `Store`; what only this
process can hold (the cancel scopes of the calls it runs) stays here, by session id.

A session that ends (closed, or pushed out by the store's bounds) is announced on its own
channel of the Store, so a stream of it open in any process ends too. Expiry is not announced:
an open stream renews its session, and checks that it is still there, now and then.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import anyio

from fastapi_mcp_routes.options import Limits, Sessions
from fastapi_mcp_routes.store.base import (
    Holder,
    Inbox,
    SessionBounds,
    SessionRecord,
    Store,
    StoreFull,
    Trust,
    share_holders,
    shares,
)
from fastapi_mcp_routes.wire.errors import ToolContextError
from fastapi_mcp_routes.wire.json import dumps, loads

# 32 random bytes: session ids are bearer secrets (spec: "cryptographically secure").
SESSION_ID_BYTES: Final = 32
# What a session keeps of the client's `initialize` (see `kept_capabilities`): names a client
# declares are few and short; everything past these bounds would only be held, never read.
CLIENT_INFO_KEPT: Final = frozenset({"name", "title", "version", "description", "websiteUrl"})
KEPT_TEXT: Final = 256
KEPT_NAMES: Final = 32

RequestKey = str | int


class SessionManager:
    """Opens, finds and closes sessions, and carries replies to the calls waiting for them."""

    def __init__(
        self, *, options: Sessions, store: Store, limits: Limits | None = None, key: bytes | None = None
    ) -> None:
        self._options = options
        self._limits = limits if limits is not None else Limits()
        self._bounds = SessionBounds(options.idle_s, options.max_sessions, options.max_per_caller)
        self._store = store
        self._key = key or secrets.token_bytes(32)
        self._running: dict[str, dict[RequestKey, anyio.CancelScope]] = {}

    @property
    def idle_s(self) -> float:
        return self._options.idle_s

    def binding(self, identity: bytes) -> bytes:
        """A keyed hash of the caller's credentials; never stored in the clear."""
        return hmac.digest(self._key, identity, "sha256")

    async def open(
        self,
        identity: bytes,
        protocol_version: str,
        client_info: Mapping[str, Any] | None = None,
        client_capabilities: Mapping[str, Any] | None = None,
        *,
        holder: Holder | None = None,
    ) -> SessionRecord:
        """Start a session bound to `identity`, counted against `holder` (by default the same
        caller, anonymous) for the per-caller bound; the store pushes out what its bounds do not
        hold, and raises `StoreFull` when the total is reached by sessions trusted more."""
        binding = self.binding(identity)
        counted = self.binding(holder.owner) if holder is not None else binding
        trust = holder.trust if holder is not None else Trust.ANONYMOUS
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        record = SessionRecord(
            session_id,
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
        return record

    async def find(self, session_id: str, identity: bytes) -> SessionRecord | None:
        """The caller's live session with this id; unknown, expired and foreign are all `None`."""
        record = await self._store.find_session(session_id, self._options.idle_s)
        if record is None:
            self._retire(session_id)
            return None
        if not hmac.compare_digest(record.binding, self.binding(identity)):
            return None
        return record

    async def close(self, record: SessionRecord) -> None:
        """End a session: its record goes, and every call it still runs here is cancelled."""
        await self._store.close_session(record.id)
        await self._ended((record.id,))

    def ended(self, session_id: str) -> AbstractAsyncContextManager[Inbox]:
        """Listen for the session's end (open it, then check the session is still there)."""
        return self._store.subscribe(_ended_channel(session_id))

    async def set_log_level(self, record: SessionRecord, level: str) -> None:
        await self._store.save_session(dataclasses.replace(record, log_level=level))

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
        for session_id in session_ids:
            self._retire(session_id)
            await self._store.publish(_ended_channel(session_id), b"")

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
