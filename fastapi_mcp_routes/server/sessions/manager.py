"""Session-era sessions: ids, binding to the caller that opened them, and their calls.

A session id is sealed with the endpoint's secret (server/sessions/ids.py) and bound to the caller's
credentials: it carries what any process needs to serve the session (its negotiated version,
the client's capabilities, its caller's trust, its end of life), and the same id presented with
other credentials fails its seal exactly like an unknown id, so a leaked id is useless to anyone
else, probing ids tells nothing, and neither costs a look in the store. The records live in the
`Store`, which says whether a session is still live (closed, pushed out and idle sessions are
gone); a store of this process's memory alone adopts a session another process sealed
(`Store.adopt_session`). What only this process can hold (the cancel scopes of the calls it
runs) stays here, by session id.

A session that ends (closed, or pushed out by the store's bounds) is announced on its own
topic of the Store, so a stream of it open in any process ends too. Expiry is not announced:
an open stream renews its session, and checks that it is still there, now and then.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final

import anyio

from fastapi_mcp_routes.options import Limits, Sessions
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.server.sessions.ids import SealedSession, SessionIds, sealed_capabilities, sealed_client_info
from fastapi_mcp_routes.store.base import (
    MISSED,
    Holder,
    Inbox,
    SessionBounds,
    SessionRecord,
    StoreFull,
    Trust,
)
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.policy import share_holders, shares
from fastapi_mcp_routes.wire.errors import InvalidParams, McpError, NeedsSharedStore, StoreUnavailable, ToolContextError
from fastapi_mcp_routes.wire.json import dumps, loads

# 16 random bytes name a session in the store; its sealed id adds the tag (spec: ids are
# "cryptographically secure", and a guess must also forge the tag).
SESSION_KEY_BYTES: Final = 16
# What a session keeps of the client's `initialize` (see `kept_capabilities`): names a client
# declares are few and short; everything past these bounds would only be held, never read.
CLIENT_INFO_KEPT: Final = frozenset({"name", "title", "version", "description", "websiteUrl"})
KEPT_TEXT: Final = 256
KEPT_NAMES: Final = 32
# Where processes sharing a store tell each other of a session's news: a call to cancel, the
# session's end, a change of its record (`forward_news`).
NEWS: Final = "sessions"
# How often a change to a session's record is made again when another change came first: each
# retry means another request of the session saved one, so only that many at once need it.
CHANGE_TRIES: Final = 16
# With a shared store, a live session found lately is not looked up again for this long: a tool
# call costs no Redis round trip while its session was checked within the last second. A
# session that ends, or changes, in another process is heard of at once (`NEWS`); this bounds
# how long it could be taken for live should that message be lost.
RECHECK_S: Final = 1.0
CHECKED_KEPT: Final = 4096
# A cancellation is sent to every process when its call does not run here: only for an id of
# at most this many characters (ids clients send are short; a megabyte one would go everywhere).
FORWARDED_ID_CHARS: Final = 256
# How long a question's first reply is remembered, so a second one is dropped: as long as the
# question's place may be held (its wait, and the minute after it).
REPLY_CLAIM_S: Final = 360.0
# Listening for other processes' news again after a store outage: first after this long, then
# twice as long each time, up to the last. The last is the pace at which the store's pub/sub
# connection is made again (store/redis/pubsub.py): a try while it is down fails at once, without
# a word to Redis, and a longer wait loses the news sent meanwhile.
FORWARD_RETRY_FIRST_S: Final = 1.0
FORWARD_RETRY_LAST_S: Final = 2.0

RequestKey = str | int
# Told a session's subscriptions (their `uri_digest`s) each time a change of them is saved.
SubscriptionsSaved = Callable[[str, tuple[str, ...]], Awaitable[None]]
logger = logging.getLogger("fastapi_mcp_routes")


class SessionManager:
    """Opens, finds and closes sessions, and carries replies to the calls waiting for them."""

    def __init__(
        self,
        *,
        options: Sessions,
        deployment: Deployment | None = None,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        subscriptions_saved: SubscriptionsSaved | None = None,
    ) -> None:
        """`subscriptions_saved`: told a session's subscriptions once a change of them is saved,
        before its request is answered (server/resources/updates.py)."""
        self._options = options
        self._subscriptions_saved = subscriptions_saved
        self._limits = limits if limits is not None else Limits()
        self._bounds = SessionBounds(options.idle_s, options.max_sessions, options.max_per_caller)
        deployment = deployment or Deployment(Secret.configure(None, {}), MemoryStore())
        self._deployment = deployment
        self._store = deployment.store
        self._secret = deployment.secret
        self._clock = clock
        self._running: dict[str, dict[RequestKey, anyio.CancelScope]] = {}
        self._ids = SessionIds(self._secret, clock)
        # Sessions of a shared store checked lately: key -> (record, when, on the monotonic clock).
        self._checked: OrderedDict[str, tuple[SessionRecord, float]] = OrderedDict()

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
        trust = holder.trust if holder is not None else Trust.ANONYMOUS
        sealed = SealedSession(
            key=secrets.token_urlsafe(SESSION_KEY_BYTES),
            instance=self._secret.instance,
            expires=int(self._clock() + self._options.max_life_s),
            protocol_version=protocol_version,
            trust=trust,
            client_info=sealed_client_info(client_info),
            client_capabilities=sealed_capabilities(kept_capabilities(client_capabilities)),
        )
        record = SessionRecord(
            sealed.key,
            self._owner(identity, holder),
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
        return record, self._ids.seal(sealed, identity)

    async def find(self, session_id: str, identity: bytes, holder: Holder | None = None) -> SessionRecord | None:
        """The caller's live session with this id; unknown, expired and foreign are all `None`.
        A session another process opened is adopted as `holder`'s (by default the same caller,
        anonymous), as `open` counts it."""
        sealed = self._ids.open(session_id, identity)
        if sealed is None:
            return None
        checked = self._checked.get(sealed.key)
        if checked is not None and time.monotonic() - checked[1] < RECHECK_S:
            return checked[0]
        record = await self._store.find_session(sealed.key, self._options.idle_s)
        if record is not None:
            self._check(record)
            return record
        self._retire(sealed.key)
        if self._store.shared or sealed.instance == self._secret.instance:
            return None  # it ended (or idled out) where it lives
        # Opened by another process that keeps its own memory: its seal vouches for it here.
        adopted = SessionRecord(
            sealed.key,
            self._owner(identity, holder),
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

    def _owner(self, identity: bytes, holder: Holder | None) -> bytes:
        """Whom a session counts against for the per-caller bound: `holder`, else the caller."""
        return self.binding(holder.owner if holder is not None else identity)

    def _check(self, record: SessionRecord) -> None:
        """Remember a session a shared store just found live (see `RECHECK_S`)."""
        if self._store.shared:
            self._checked[record.id] = (record, time.monotonic())
            self._checked.move_to_end(record.id)
            if len(self._checked) > CHECKED_KEPT:
                self._checked.popitem(last=False)

    async def live(self, record: SessionRecord) -> bool:
        """Whether a session found before is still there; its idle time restarts."""
        return await self.current(record) is not None

    async def current(self, record: SessionRecord) -> SessionRecord | None:
        """A session found before as it is now, `None` once it is gone; its idle time restarts."""
        return await self._store.find_session(record.id, self._options.idle_s)

    async def close(self, record: SessionRecord) -> None:
        """End a session: its record goes, and every call it still runs here is cancelled."""
        if self._deployment.state_per_process:
            self._deployment.needs_store("ending a session (DELETE) in every process")
        await self._store.close_session(record.id)
        await self._ended((record.id,))

    def age_s(self, session_id: str, identity: bytes) -> float | None:
        """How long ago the session was opened, as its sealed id says (to the second)."""
        sealed = self._ids.open(session_id, identity)
        return None if sealed is None else max(0.0, self._clock() - (sealed.expires - self._options.max_life_s))

    def ended(self, session_id: str) -> AbstractAsyncContextManager[Inbox]:
        """Listen for the session's end (open it, then check the session is still there)."""
        return self._store.subscribe(_ended_topic(session_id))

    async def set_log_level(self, record: SessionRecord, level: str) -> None:
        def set_level(current: SessionRecord) -> SessionRecord:
            return dataclasses.replace(current, log_level=level)

        await self._change(record, set_level, "log level (logging/setLevel)")

    async def subscribe(self, record: SessionRecord, uri: str, limit: int) -> None:
        """Add `uri` to the session's subscriptions; `InvalidParams` past `limit` of them.
        Where processes share no store, `NeedsSharedStore`: another process may hold the
        session's GET stream, which would never hear of the subscription."""
        if self._deployment.state_per_process:
            raise NeedsSharedStore(
                self._deployment.refusal("a resources/subscribe, whose updates may go out on any process,")
            )
        uri = uri_digest(uri)

        def add(current: SessionRecord) -> SessionRecord:
            if uri in current.subscriptions:
                return current
            if len(current.subscriptions) >= limit:
                raise InvalidParams(
                    f"Invalid params: this session is subscribed to {limit} resources, as many as it may "
                    "(Limits.max_subscriptions); unsubscribe from one first."
                )
            return dataclasses.replace(current, subscriptions=(*current.subscriptions, uri))

        await self._change_subscriptions(record, add)

    async def unsubscribe(self, record: SessionRecord, uri: str) -> None:
        uri = uri_digest(uri)

        def remove(current: SessionRecord) -> SessionRecord:
            kept = tuple(each for each in current.subscriptions if each != uri)
            return dataclasses.replace(current, subscriptions=kept)

        await self._change_subscriptions(record, remove)

    async def _change_subscriptions(
        self, record: SessionRecord, change: Callable[[SessionRecord], SessionRecord]
    ) -> None:
        saved = await self._change(record, change, "subscriptions")
        if saved is not None and self._subscriptions_saved is not None:
            await self._subscriptions_saved(saved.id, saved.subscriptions)

    async def subscriptions(self, record: SessionRecord) -> frozenset[str]:
        """The digests (`uri_digest`) of the resources the session is subscribed to now, read
        afresh: another process may have changed them."""
        current = await self._store.find_session(record.id, self._options.idle_s)
        return frozenset(current.subscriptions) if current is not None else frozenset()

    async def _change(
        self, record: SessionRecord, change: Callable[[SessionRecord], SessionRecord], what: str
    ) -> SessionRecord | None:
        """Make `change` to the session's record as it is now, and return what was saved
        (`None` when nothing needed to be). Another request of the session (in any process)
        may change it at the same time: then the record is read and the change made again, so
        neither is lost (two subscriptions sent at once). A session gone meanwhile has nothing
        to change."""
        for _ in range(CHANGE_TRIES):
            current = await self._store.find_session(record.id, self._options.idle_s)
            if current is None:
                return None
            changed = change(current)
            if changed == current:
                return None
            if await self._save(changed, current, what):
                return changed
        raise McpError(f"Internal error: the session's {what} changed under each of {CHANGE_TRIES} tries; try again.")

    async def _save(self, changed: SessionRecord, replacing: SessionRecord, what: str) -> bool:
        if self._deployment.state_per_process:
            self._deployment.needs_store(f"a session's {what}, which every process of the session applies")
        if not await self._store.save_session(changed, replacing):
            return False
        self._checked.pop(changed.id, None)
        if self._store.shared:
            await self._store.publish(NEWS, dumps({"session": changed.id, "changed": True}))
        return True

    async def cancel(self, session_id: str, request_id: RequestKey) -> None:
        """`notifications/cancelled` for a call of the session: cancelled here when it runs
        here, else in whichever process runs it (through the store's messages). Where
        processes share no store, `NeedsSharedStore`: another process may run it."""
        running = self._running.get(session_id, {}).get(request_id)
        if running is not None:
            running.cancel()
        elif isinstance(request_id, str) and len(request_id) > FORWARDED_ID_CHARS:
            return  # not sent to every process: a call elsewhere with such an id stays uncancelled
        elif self._store.shared:
            await self._store.publish(NEWS, dumps({"session": session_id, "cancel": request_id}))
        elif self._deployment.state_per_process:
            raise NeedsSharedStore(
                self._deployment.refusal("a notifications/cancelled for a call this process does not run")
            )

    async def forward_news(self) -> None:
        """Take other processes' news of the sessions this process serves: cancel a call a
        cancellation sent to another process names, the calls of a session that ended there,
        forget a session checked lately that ended or changed there (run for the app's
        lifetime when the store is shared). While the store cannot be reached it tries again,
        less and less often."""
        wait_s = FORWARD_RETRY_FIRST_S
        while True:
            try:
                async with self._store.subscribe(NEWS) as inbox:
                    wait_s = FORWARD_RETRY_FIRST_S
                    async for message in inbox:
                        self._take_news(message)
            except StoreUnavailable as down:
                if wait_s == FORWARD_RETRY_FIRST_S:  # once an outage, not every try
                    logger.warning(
                        "news of sessions from other processes cannot be heard (%s); listening again every %g s",
                        down.reason,
                        FORWARD_RETRY_LAST_S,
                    )
            await anyio.sleep(wait_s)
            wait_s = min(wait_s * 2, FORWARD_RETRY_LAST_S)

    def _take_news(self, message: bytes) -> None:
        try:
            news = loads(message)
        except McpError:
            return
        session_id = news.get("session") if isinstance(news, dict) else None
        if not isinstance(session_id, str):
            return
        self._checked.pop(session_id, None)
        if news.get("ended") is True:
            self._retire(session_id)
        request_id = news.get("cancel")
        if isinstance(request_id, (str, int)) and (running := self._running.get(session_id, {}).get(request_id)):
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
        and, with a shared store, in every process (`forward_news`)."""
        for session_id in session_ids:
            self._retire(session_id)
            await self._store.publish(_ended_topic(session_id), b"")
            if self._store.shared:
                await self._store.publish(NEWS, dumps({"session": session_id, "ended": True}))

    def _retire(self, session_id: str) -> None:
        self._checked.pop(session_id, None)
        for scope in self._running.pop(session_id, {}).values():
            scope.cancel()

    # -- server-to-client requests ---------------------------------------------------------

    def new_request_id(self) -> str:
        # Our ids stand apart from any id the client uses by their prefix.
        return "s" + secrets.token_urlsafe(9)

    async def deliver(self, session_id: str, request_id: RequestKey, payload: Mapping[str, Any]) -> None:
        """Hand a client's reply to the call waiting for it; a reply nobody waits for is dropped.

        Only a question that waits now (its place held, `question`) is handed a reply, and only
        the first: what the store passes on (and, shared, keeps a minute for a process whose
        connection dropped) is bounded by the questions waiting, not by what a client sends."""
        if not isinstance(request_id, str):
            return  # our questions' ids are strings (`new_request_id`)
        if not await self._store.holds_slot(_question_pool(session_id), request_id):
            return
        answered = f"answered/{session_id}/{request_id}"
        if not await self._store.claim(answered, secrets.token_hex(8), REPLY_CLAIM_S):
            return  # answered already
        await self._store.publish(_reply_topic(session_id, request_id), dumps(dict(payload)))

    @asynccontextmanager
    async def question(self, session_id: str, holder: Holder, request_id: str, wait_s: float) -> AsyncIterator[None]:
        """Hold one question's place while it waits up to `wait_s` for the client's answer;
        `ToolContextError` names the bound when the session, the caller or the server has as
        many questions waiting as it may (callers it trusts less, only their share of it)."""
        limits = self._limits
        caller = self.binding(holder.owner).hex()
        bounds = {  # pool -> (limit, the bound its refusal names)
            _question_pool(session_id): (limits.max_questions_per_session, "Limits.max_questions_per_session"),
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
        return self._store.subscribe(_reply_topic(session_id, request_id))

    def decode_reply(self, message: bytes) -> Mapping[str, Any]:
        if message == MISSED:
            raise ToolContextError(
                "the client's answer reached another process while this one was reconnecting to the "
                "store, and was too large to keep for it; ask again"
            )
        reply = loads(message)
        return reply if isinstance(reply, dict) else {}


def _question_pool(session_id: str) -> str:
    """The pool of a session's questions waiting for their answer, each held by its id."""
    return f"questions/session/{session_id}"


def _ended_topic(session_id: str) -> str:
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


def _reply_topic(session_id: str, request_id: RequestKey) -> str:
    return f"reply/{session_id}/{request_id!r}"


def uri_digest(uri: str) -> str:
    """What a session keeps of a subscribed URI: a digest of a fixed, small size, so a session's
    subscriptions weigh the same however long the URIs are (32 characters each)."""
    return hashlib.blake2b(uri.encode(), digest_size=16).hexdigest()
