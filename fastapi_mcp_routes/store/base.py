"""The state boundary: everything that outlives one request lives behind `Store`.

Sessions, the events of resumable streams, single-use confirmation tokens and the replies to
server-to-client requests, tasks and subscriptions are kept here and nowhere else.
Each method is one step a Redis server can take in one round trip (a command, a pipeline or a
script): records with a time to live, atomic compare-and-use of a token, lists trimmed to a
bound, and publish/subscribe for a message that reaches a call or a stream waiting in another
process (a client's reply, a session's end, a resumable stream's next event).

The `Store` is made of one protocol per concern (`SessionStore`, `ClaimStore`, `SlotStore`,
`StreamLogStore`, `TokenLedger`, `TaskStore`, `MessageBus`), so code that needs one concern
names only it; one object implements them all. Who is pushed out at a bound is decided in
store/policy.py, the same for every store.

Values are bytes or small frozen records of plain values, so an implementation can keep them
anywhere. `MemoryStore` (store/memory.py) is the default, for one process; `RedisStore`
(store/redis/store.py) is shared by every process. A store that cannot take a step now (a Redis
outage) raises `StoreUnavailable` (wire/errors.py): the endpoint answers 503 with Retry-After.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Final, Literal, Protocol

# Which bound refused a newcomer: its owner's, or a total (or a share of one).
Refusal = Literal["owner", "total"]
# What a used token's value becomes: a second use can then be told from one never issued.
USED: Final = b"\x00used"
# Handed to a listener in place of a message it could not hear when published and that its store
# could not keep for it (a shared store's connection that dropped meanwhile; a message too large
# to keep): it learns at once that it missed one.
MISSED: Final = b"\x00missed"
# Messages a listener has not read yet, by default: a reply topic gets one message, a stream's
# wake-up topic needs one waiting message to read everything kept since.
INBOX_SIZE: Final = 16


class Trust(IntEnum):
    """How far the server can vouch for who a caller is. At a total bound, a record is only
    ever pushed out by one of equal or higher trust, so a flood of anonymous callers cannot
    push out a signed-in user's session or token (the lowest trust goes first)."""

    ANONYMOUS = 0  # no credential at all: told apart by client address only
    CLAIMED = 1  # credential headers the endpoint has not checked (no `auth=`)
    VERIFIED = 2  # a principal the endpoint's `auth` dependency returned


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a record: whom it counts against for per-caller bounds (a hash, never a
    credential), and how far the server trusts them."""

    owner: bytes
    trust: Trust


class StoreFull(Exception):
    """A total bound is reached and nothing this caller may push out is left; `gone` names
    the sessions pushed out on the way (expired ones, the caller's own oldest)."""

    def __init__(self, gone: tuple[str, ...] = ()) -> None:
        super().__init__("a total bound is reached")
        self.gone = gone


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """What the protocol remembers of one session-era session."""

    id: str
    owner: bytes  # who counts toward the per-caller bound: a keyed hash, never a credential
    protocol_version: str
    client_info: Mapping[str, Any] | None = None
    client_capabilities: Mapping[str, Any] | None = None
    log_level: str | None = None  # set by logging/setLevel; None sends every level
    trust: Trust = Trust.ANONYMOUS
    # Digests of the resources the session subscribed to (`resources/subscribe`), at most
    # `Limits.max_subscriptions`; their updates go out on its GET stream.
    subscriptions: tuple[str, ...] = ()


# The statuses of a task that never change again (tasks extension, SEP-2663).
TASK_ENDS: Final = frozenset({"completed", "failed", "cancelled"})
# Every status a task may have (tasks extension): no other is ever sent to a client.
TASK_STATUSES: Final = TASK_ENDS | {"working", "input_required"}


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """What the store keeps of one task (a `tools/call` the client polls, 2026-07-28 tasks
    extension): everything `tasks/get` shows, and the answers on their way to its route."""

    id: str
    owner: bytes  # whom it counts against for the per-caller bound (a keyed hash of its `Holder`)
    trust: Trust
    tool: str
    runner: str  # the process running its route (hex), which a cancellation or an answer reaches
    status: str  # working, input_required, completed, failed or cancelled
    created_ms: int  # wall-clock milliseconds
    updated_ms: int
    ttl_ms: int  # kept this long after its creation, then dropped with its result
    message: str | None = None  # `statusMessage`: the route's latest progress message, or why it ended
    questions: Mapping[str, Any] | None = None  # `inputRequests` still unanswered, while input_required
    answers: Mapping[str, Any] | None = None  # answers `tasks/update` brought that the route has not taken
    outcome: Mapping[str, Any] | None = None  # the tool result once completed, the JSON-RPC error once failed
    # Who may see it: a keyed hash of the caller's credentials, else its address; empty, the owner.
    # It differs from `owner` for credentials the endpoint cannot check, which may be made up.
    caller: bytes = b""
    # Which bound let go of its result to make room for newer ones ("owner" or "total"): its
    # `outcome` is then gone, and the task answers with a failure naming the bound.
    released: str | None = None

    @property
    def seen_by(self) -> bytes:
        return self.caller or self.owner

    @property
    def ended(self) -> bool:
        return self.status in TASK_ENDS


@dataclass(frozen=True, slots=True)
class TaskBounds:
    """Tasks kept (running or finished, until their time to live ends), per owner and in all;
    of all, callers trusted less may hold only their share (store/policy.py, `trust_shares`), so a flood of
    anonymous tasks that never end leaves room for callers the server trusts more."""

    max_per_owner: int
    max_tasks: int


@dataclass(frozen=True, slots=True)
class ResultBounds:
    """Bytes of finished tasks' results kept, per owner and in all; of all, callers trusted less
    may hold only their share (store/policy.py, `trust_bounds`). Room for a new result is made
    by letting go of finished results, never by touching a running task."""

    max_per_owner: int
    max_total: int


@dataclass(frozen=True, slots=True)
class SessionBounds:
    idle_s: float
    max_sessions: int
    max_per_owner: int


@dataclass(frozen=True, slots=True)
class LogBounds:
    """What is kept of resumable streams: events per stream, bytes per session and in all."""

    max_events: int
    max_session_bytes: int
    max_total_bytes: int


@dataclass(frozen=True, slots=True)
class StreamEvents:
    """Events a resumable stream sent after a point, and whether its answer is among them."""

    events: tuple[bytes, ...]
    complete: bool


class Inbox(Protocol):
    """Messages published to one topic, from when it was opened."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    def receive_nowait(self) -> bytes:
        """The next message, already here; `anyio.WouldBlock` when none is."""
        ...


class Shared(Protocol):
    """What every concern of a store says of itself: whether every process serving the endpoint
    sees it (Redis), or only this one (memory). Then what another process did (a session it
    opened, a token it issued) is not here, and a message published here reaches this process
    only."""

    shared: bool


class SessionStore(Shared, Protocol):
    """Sessions: bounded per owner and in all, forgotten once idle past their time."""

    async def open_session(self, record: SessionRecord, bounds: SessionBounds) -> tuple[str, ...]:
        """Keep a new session; returns the ids it pushed out (expired, the owner's oldest past
        `max_per_owner`, past `max_sessions` the least recently used of the lowest trust, never
        one trusted more than the new one: then `StoreFull`)."""
        ...

    async def adopt_session(self, record: SessionRecord, bounds: SessionBounds) -> bool:
        """Keep a session another process opened (its sealed id vouches for it), as
        `open_session` would, unless this store saw it end (closed or pushed out; an idle
        expiry is not an end here: the session may be busy in another process). A shared store
        has every session: one it lacks has ended, so it adopts nothing. `False` when not kept;
        `StoreFull` as for `open_session`."""
        ...

    async def find_session(self, session_id: str, idle_s: float) -> SessionRecord | None:
        """The live session with this id, its idle time restarted; `None` once expired."""
        ...

    async def save_session(self, record: SessionRecord, replacing: SessionRecord) -> bool:
        """Replace a live session's record (its log level or subscriptions changed) when it is
        still `replacing`, the record the change was made from: of two changes made at once
        (two requests of the session, in any processes), one is saved and the other gets
        `False`, to read the record again, never lost. A gone session stays gone (`False`)."""
        ...

    async def close_session(self, session_id: str) -> bool:
        """Forget a session; `False` when it was not there."""
        ...


class ClaimStore(Shared, Protocol):
    """Claims: at most one holder of a name (one GET stream per session, one sender per stream),
    and names claimed once only (a DPoP proof's `jti`)."""

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take `name` for `holder` if nobody else holds it, or renew the holder's own claim;
        it lapses after `ttl_s` unless renewed, so a holder that died frees it."""
        ...

    async def release(self, name: str, holder: str) -> None:
        """Give `name` up, if `holder` still holds it."""
        ...

    async def claim_once(
        self, name: str, ttl_s: float, max_kept: int, *, owner: str | None = None, max_per_owner: int = 0
    ) -> bool | None:
        """Keep `name` for `ttl_s` unless it is kept already: `True` the first time, `False`
        while it is kept, `None` when `max_kept` live names are kept, or `max_per_owner` of
        `owner`'s where an owner is named: a newcomer is refused, never a kept name let go
        (that would let its name be used again)."""
        ...


class SlotStore(Shared, Protocol):
    """Slots: bounded counts of things held open (streams, questions), per caller and in all."""

    async def take_slots(self, pools: Sequence[tuple[str, int]], holder: str, ttl_s: float) -> str | None:
        """Take a slot for `holder` in every pool `(name, limit)`, all or none; a holder that
        has its slots renews them. Returns `None` when taken, else the name of the first pool
        that is full. A slot lapses after `ttl_s` unless renewed, so a holder that died frees it."""
        ...

    async def free_slots(self, pools: Sequence[str], holder: str) -> None:
        """Give the holder's slots in these pools back."""
        ...

    async def holds_slot(self, pool: str, holder: str) -> bool:
        """Whether `holder` has a slot in `pool` now: taken, neither given back nor lapsed."""
        ...


class StreamLogStore(Shared, Protocol):
    """The events of resumable streams (2025-11-25), kept with their session and bounded."""

    async def start_stream(self, session_id: str, max_kept: int, trust: Trust = Trust.ANONYMOUS) -> int | None:
        """A new stream number for the session (whose caller has `trust`); past `max_kept`, the
        oldest finished stream (else the oldest) is forgotten. `None` when the session is gone
        (closed, pushed out, expired): a stream nobody can resume is not kept, and a session's
        streams are forgotten with it, so a call answered after its session ended (the end
        cancelled it) streams without a log."""
        ...

    async def append_event(self, session_id: str, stream: int, event: bytes, bounds: LogBounds) -> None:
        """Keep one more event of a stream. To make room past the byte bounds, finished
        streams go first: the session's own, oldest first, then anyone's, the oldest of the
        lowest trust and never one trusted more than this session's. Past `max_events`, or
        with no room left, the stream can no longer be resumed (it is marked overflowed and its
        events dropped, never silently cut)."""
        ...

    async def complete_stream(self, session_id: str, stream: int) -> None:
        """Mark a stream finished: its answer is among its events, and past a bound it may go."""
        ...

    async def read_stream(self, session_id: str, stream: int, after: int) -> StreamEvents | None:
        """The events after the first `after`; `None` for a stream that cannot be resumed."""
        ...

    async def forget_stream(self, session_id: str, stream: int) -> None:
        """Forget a stream and its events (it can no longer be resumed)."""
        ...


class TokenLedger(Shared, Protocol):
    """Single-use tokens: each used at most once, bounded per owner and in all."""

    async def put_token(self, key: str, value: bytes, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> None:
        """Keep a token; `bounds` = (per owner, in all). Past the owner's bound its own oldest
        goes; past the total, the oldest of the lowest trust, never one trusted more than the
        new one: then `StoreFull`."""
        ...

    async def use_token(self, key: str, expected: bytes) -> bytes | None:
        """Atomically: when the value is `expected`, mark it `USED` (keeping its expiry).
        Returns the value that was there, so the caller can say why a token did not fit."""
        ...

    async def adopt_token(self, key: str, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> bool:
        """Keep a token another process issued as `USED` (its sealed form vouches for it),
        bounded as `put_token`; `True` when it was not here before: its first use here."""
        ...

    async def revoke_token(self, key: str) -> None:
        """Mark a token used without using it (a declined question)."""
        ...


class TaskStore(Shared, Protocol):
    """Tasks (2026-07-28 tasks extension): kept for their time to live, bounded per owner and in
    all, saved by compare-and-set."""

    async def put_task(self, record: TaskRecord, bounds: TaskBounds) -> str | None:
        """Keep a new task for its `ttl_ms`. Past the owner's bound the owner's oldest finished
        task goes, past the total the oldest finished task of the lowest trust, never one
        trusted more; a running task is never pushed out. Returns `None` when kept, else which
        bound left no room: `"owner"` or `"total"`."""
        ...

    async def find_task(self, task_id: str) -> TaskRecord | None:
        """The task with this id, until its time to live ends."""
        ...

    async def save_task(self, record: TaskRecord, replacing: TaskRecord) -> bool:
        """Replace a task's record when it is still `replacing` (compare-and-set, as
        `save_session`); its time to live runs on. `False` when it changed or is gone."""
        ...

    async def end_task(
        self, record: TaskRecord, replacing: TaskRecord, size: int, bounds: ResultBounds
    ) -> bool | Refusal:
        """Save a task's end (`record` ended, `size` the bytes its result weighs) when it is
        still `replacing`, as `save_task`, keeping its result within `bounds`. Room is made by
        letting go of finished results (the record stays, its outcome dropped and `released`
        naming the bound): past the owner's bound its own oldest first, past the total (or the
        share of it the owner's trust may fill) the oldest of the most crowded trust, never one
        trusted more. `True` when saved; `False` when it changed or is gone; `"owner"` or
        `"total"` when no room could be made: nothing is saved (save a smaller end instead)."""
        ...

    async def running_tasks(self, owner: bytes | None, limit: int) -> tuple[str, ...]:
        """Ids of at most `limit` tasks not ended yet, the owner's (`None`: anyone's), oldest
        first: where a full bound looks for tasks whose process stopped."""
        ...


class MessageBus(Shared, Protocol):
    """Messages between requests (and processes): a client's reply, a session's end, a
    resumable stream's next event."""

    async def publish(self, topic: str, message: bytes) -> bool:
        """Hand a message to whoever listens on `topic`; `False` when nobody does."""
        ...

    def subscribe(self, topic: str, *, capacity: int = INBOX_SIZE) -> AbstractAsyncContextManager[Inbox]:
        """Listen on `topic` for as long as the context is open, keeping up to `capacity`
        messages not read yet (a listener that does not read loses the next ones)."""
        ...


class Store(SessionStore, ClaimStore, SlotStore, StreamLogStore, TokenLedger, TaskStore, MessageBus, Protocol):
    """The state that outlives a request: every concern above, in one object (what
    `mcp_routes(store=...)` takes). Every method is one round trip to a shared store."""

    async def aclose(self) -> None:
        """Let go of connections (at the app's shutdown)."""
        ...
