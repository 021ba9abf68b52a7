"""`MemoryStore`: the `Store` of one process, with no setup: the default until several processes serve.

Ordered dicts give least-recently-used order for free, so every bound is enforced by popping
from the front. Expiry is checked when a record is read and swept when one is added, so
nothing needs a timer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import itertools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from fastapi_mcp_routes.store.base import (
    INBOX_SIZE,
    USED,
    Holder,
    Inbox,
    LogBounds,
    Refusal,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    StoreFull,
    StreamEvents,
    TaskBounds,
    TaskRecord,
    Trust,
)
from fastapi_mcp_routes.store.policy import (
    Admission,
    crowded_first,
    result_admission,
    session_admission,
    task_admission,
    token_admission,
)

_Key = TypeVar("_Key", bound=Hashable)

# Ids of sessions that ended here (closed, pushed out), so a sealed id another process issued is
# not adopted again after its end here: the most recent ones, about 100 bytes each.
ENDED_KEPT: Final = 100_000


@dataclass(slots=True)
class _Live:
    record: SessionRecord
    last_seen: float


@dataclass(slots=True)
class _Stream:
    events: list[bytes] = field(default_factory=list)
    size: int = 0  # bytes of its events
    complete: bool = False
    overflowed: bool = False


@dataclass(slots=True)
class _Streams:
    trust: Trust = Trust.ANONYMOUS
    next: int = 1
    kept: OrderedDict[int, _Stream] = field(default_factory=OrderedDict)
    size: int = 0  # bytes of all its streams' events


@dataclass(slots=True)
class _Token:
    value: bytes
    expires: float
    owner: bytes
    trust: Trust


@dataclass(slots=True)
class _Task:
    record: TaskRecord
    expires: float


def _lowest(ranked: Mapping[Trust, OrderedDict[_Key, None]], ceiling: Trust) -> _Key | None:
    """The key to push out for a newcomer of trust `ceiling`: the first of the lowest trust,
    never one trusted more than the newcomer; `None` when there is none."""
    for trust in Trust:
        if trust > ceiling:
            break
        keys = ranked.get(trust)
        if keys:
            return next(iter(keys))
    return None


class Ranks(Generic[_Key]):
    """What the bounds of one record family read (sessions, tokens, tasks, kept results), and
    the one routine that executes an `Admission` (store/policy.py) on it: each owner's records
    in the order they were made, with their weights (1 each, or a result's bytes), the records
    a total bound may push out by trust in the order of their rank, and what the records of
    each trust and of each owner weigh."""

    __slots__ = ("by_owner", "counts", "held", "ranked")

    def __init__(self) -> None:
        self.by_owner: dict[bytes, OrderedDict[_Key, int]] = {}
        self.held: dict[bytes, int] = {}  # by owner, what its records weigh
        self.ranked: dict[Trust, OrderedDict[_Key, None]] = {trust: OrderedDict() for trust in Trust}
        self.counts: dict[Trust, int] = dict.fromkeys(Trust, 0)

    def add(self, key: _Key, owner: bytes, trust: Trust, *, ranked: bool, weight: int = 1) -> None:
        """Count a new record; `ranked`: it may be pushed out at once (last in its rank)."""
        self.by_owner.setdefault(owner, OrderedDict())[key] = weight
        self.held[owner] = self.held.get(owner, 0) + weight
        self.counts[trust] += weight
        if ranked:
            self.ranked[trust][key] = None

    def rank(self, key: _Key, trust: Trust) -> None:
        """Rank a record that was not, last (a task that ended); a ranked one keeps its place."""
        self.ranked[trust].setdefault(key)

    def rank_again(self, key: _Key, trust: Trust) -> None:
        """Put a ranked record last (a session used)."""
        self.ranked[trust].move_to_end(key)

    def remove(self, key: _Key, owner: bytes, trust: Trust) -> None:
        mine = self.by_owner[owner]
        weight = mine.pop(key)
        self.held[owner] -= weight
        if not mine:
            del self.by_owner[owner]
            del self.held[owner]
        self.counts[trust] -= weight
        self.ranked[trust].pop(key, None)

    def admit(self, owner: bytes, admission: Admission, drop: Callable[[_Key, Refusal], object]) -> Refusal | None:
        """Make room for one new record of `owner` as `admission` says, calling `drop` for each
        record to push out with the bound it goes for (`drop` must `remove` it); returns which
        bound left no room, if any."""
        weight = admission.weight
        if weight > admission.per_owner:
            return "owner"  # no room could be made: nothing is pushed out for it
        if any(weight > limit for _, _, limit in admission.bounds):
            return "total"
        while self.held.get(owner, 0) + weight > admission.per_owner:
            mine = self.by_owner.get(owner)
            if not mine:
                return "owner"
            if admission.finished_only:
                victim = next((key for key in mine if self._ranked(key)), None)
            else:
                victim = next(iter(mine))
            if victim is None:
                return "owner"
            drop(victim, "owner")
            if not admission.until_room:
                break
        for lowest, highest, limit in admission.bounds:
            while sum(self.counts[trust] for trust in Trust if lowest <= trust <= highest) + weight > limit:
                victim = self._victim(admission, lowest, min(highest, admission.trust))
                if victim is None:
                    return "total"
                drop(victim, "total")
                if not admission.until_room:
                    break
        return None

    def _victim(self, admission: Admission, lowest: Trust, highest: Trust) -> _Key | None:
        """The oldest record of the most crowded trust from `lowest` to `highest` that has one."""
        ranked = self.ranked
        candidates = (trust for trust in Trust if lowest <= trust <= highest and ranked[trust])
        trust = crowded_first(self.counts, admission.quotas, candidates)
        return next(iter(ranked[trust])) if trust is not None else None

    def _ranked(self, key: _Key) -> bool:
        return any(key in keys for keys in self.ranked.values())


class MemoryStore:
    """Keeps every record in this process; see `Store` for what each method promises."""

    shared = False

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, first_stream: int = 1) -> None:
        """`first_stream`: where each session's stream numbers start. Processes that share a
        secret but not a store each number the streams of one session: from a random start,
        an event id of another process's stream names no stream here (so a resume that reaches
        the wrong process is refused, never answered with another stream's events)."""
        self._clock = clock
        self._first_stream = first_stream
        self._sessions: OrderedDict[str, _Live] = OrderedDict()
        self._session_ranks: Ranks[str] = Ranks()  # ranked by last use
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._claims: dict[str, tuple[str, float]] = {}
        self._once: dict[str, tuple[float, str | None]] = {}  # name -> expiry, owner
        self._once_owned: dict[str, int] = {}  # owner -> how many of the kept names are theirs
        self._once_ends: list[tuple[float, str]] = []  # a heap of (expiry, name), one per kept name
        self._streams: dict[str, _Streams] = {}
        self._log_size = 0  # bytes of every kept event
        # Finished streams by their session's trust, in the order they finished.
        self._finished: dict[Trust, OrderedDict[tuple[str, int], None]] = {trust: OrderedDict() for trust in Trust}
        self._tokens: OrderedDict[str, _Token] = OrderedDict()
        self._token_ranks: Ranks[str] = Ranks()  # ranked by keeping
        self._topics: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._tasks: dict[str, _Task] = {}
        # Only finished tasks are ranked, in the order they finished: a running task never goes.
        self._task_ranks: Ranks[str] = Ranks()
        # Finished tasks whose result is kept, weighed in bytes, in the order they finished.
        self._result_ranks: Ranks[str] = Ranks()
        # pool -> holder -> expiry, in the order of renewal: lapsed slots are at the front.
        self._slots: dict[str, OrderedDict[str, float]] = {}

    async def aclose(self) -> None:
        pass  # nothing held outside this object

    # -- sessions --------------------------------------------------------------------------

    async def open_session(self, record: SessionRecord, bounds: SessionBounds) -> tuple[str, ...]:
        now = self._clock()
        gone: list[str] = []
        while self._sessions:  # expired ones first, oldest in front
            oldest = next(iter(self._sessions.values()))
            if now - oldest.last_seen <= bounds.idle_s:
                break
            gone.append(self._drop_session(oldest.record.id, ended=False))
        admission = session_admission(record, bounds)
        if self._session_ranks.admit(record.owner, admission, lambda key, _: gone.append(self._drop_session(key))):
            raise StoreFull(tuple(gone))
        self._sessions[record.id] = _Live(record, now)
        self._session_ranks.add(record.id, record.owner, record.trust, ranked=True)
        return tuple(gone)

    async def find_session(self, session_id: str, idle_s: float) -> SessionRecord | None:
        live = self._sessions.get(session_id)
        if live is None:
            return None
        now = self._clock()
        if now - live.last_seen > idle_s:
            self._drop_session(session_id, ended=False)
            return None
        live.last_seen = now
        self._sessions.move_to_end(session_id)
        self._session_ranks.rank_again(session_id, live.record.trust)
        return live.record

    async def adopt_session(self, record: SessionRecord, bounds: SessionBounds) -> bool:
        if record.id in self._ended:
            return False
        if record.id not in self._sessions:
            await self.open_session(record, bounds)
        return True

    async def save_session(self, record: SessionRecord, replacing: SessionRecord) -> bool:
        live = self._sessions.get(record.id)
        if live is None or live.record != replacing:
            return False
        live.record = record
        return True

    async def close_session(self, session_id: str) -> bool:
        if session_id not in self._sessions:
            return False
        self._drop_session(session_id)
        return True

    def _drop_session(self, session_id: str, *, ended: bool = True) -> str:
        """Forget a session; `ended` (closed, pushed out, not just idle here) keeps its id, so
        its sealed id is not adopted again."""
        live = self._sessions.pop(session_id)
        if ended:
            self._ended[session_id] = None
            if len(self._ended) > ENDED_KEPT:
                self._ended.popitem(last=False)
        self._session_ranks.remove(session_id, live.record.owner, live.record.trust)
        streams = self._streams.get(session_id)
        for number in list(streams.kept) if streams is not None else ():
            self._discard(session_id, number)
        self._streams.pop(session_id, None)
        return session_id

    # -- claims ----------------------------------------------------------------------------

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        now = self._clock()
        held = self._claims.get(name)
        if held is not None and held[0] != holder and held[1] > now:
            return False
        self._claims[name] = (holder, now + ttl_s)
        return True

    async def release(self, name: str, holder: str) -> None:
        held = self._claims.get(name)
        if held is not None and held[0] == holder:
            del self._claims[name]

    async def claim_once(
        self, name: str, ttl_s: float, max_kept: int, *, owner: str | None = None, max_per_owner: int = 0
    ) -> bool | None:
        now = self._clock()
        once, ends, owned = self._once, self._once_ends, self._once_owned
        # Lapsed names leave soonest first whatever their time to live, so a full store refuses
        # a newcomer without looking at every live name (a flood of proofs keeps it full).
        while ends and ends[0][0] <= now:
            _, lapsed = heapq.heappop(ends)
            lapsed_owner = once.pop(lapsed)[1]
            if lapsed_owner is not None:
                owned[lapsed_owner] -= 1
                if not owned[lapsed_owner]:
                    del owned[lapsed_owner]
        if name in once:
            return False
        if len(once) >= max_kept or (owner is not None and owned.get(owner, 0) >= max_per_owner):
            return None
        expires = now + ttl_s
        once[name] = (expires, owner)
        if owner is not None:
            owned[owner] = owned.get(owner, 0) + 1
        heapq.heappush(ends, (expires, name))
        return True

    # -- slots -----------------------------------------------------------------------------

    async def take_slots(self, pools: Sequence[tuple[str, int]], holder: str, ttl_s: float) -> str | None:
        now = self._clock()
        for name, limit in pools:
            held = self._slots.get(name)
            if held is None:
                continue
            while held and next(iter(held.values())) <= now:
                held.popitem(last=False)
            if holder not in held and len(held) >= limit:
                return name
        for name, _ in pools:
            held = self._slots.setdefault(name, OrderedDict())
            held[holder] = now + ttl_s
            held.move_to_end(holder)
        return None

    async def free_slots(self, pools: Sequence[str], holder: str) -> None:
        for name in pools:
            held = self._slots.get(name)
            if held is not None:
                held.pop(holder, None)
                if not held:
                    del self._slots[name]

    async def holds_slot(self, pool: str, holder: str) -> bool:
        held = self._slots.get(pool)
        ends = held.get(holder) if held is not None else None
        return ends is not None and ends > self._clock()

    # -- resumable streams -----------------------------------------------------------------

    async def start_stream(self, session_id: str, max_kept: int, trust: Trust = Trust.ANONYMOUS) -> int | None:
        if session_id not in self._sessions:
            # Kept, it would outlive its session (`_drop_session` already ran) and never go.
            return None
        streams = self._streams.get(session_id)
        if streams is None:
            streams = self._streams[session_id] = _Streams(trust, self._first_stream)
        number = streams.next
        streams.next += 1
        streams.kept[number] = _Stream()
        if len(streams.kept) > max_kept:
            # Push out the oldest finished stream; only if every one still runs, the oldest.
            done = next((n for n, kept in streams.kept.items() if kept.complete), None)
            self._discard(session_id, done if done is not None else next(iter(streams.kept)))
        return number

    async def append_event(self, session_id: str, stream: int, event: bytes, bounds: LogBounds) -> None:
        kept = self._stream(session_id, stream)
        if kept is None or kept.overflowed:
            return
        streams = self._streams[session_id]
        size = len(event)
        # Room in the session's bound: its own finished streams go first, oldest first.
        while streams.size + size > bounds.max_session_bytes:
            done = next((n for n, other in streams.kept.items() if other.complete), None)
            if done is None:
                break
            self._discard(session_id, done)
        # Room in the total: anyone's finished streams, the lowest trust first.
        while self._log_size + size > bounds.max_total_bytes:
            finished = _lowest(self._finished, streams.trust)
            if finished is None:
                break
            self._discard(*finished)
        fits = streams.size + size <= bounds.max_session_bytes and self._log_size + size <= bounds.max_total_bytes
        if not fits or len(kept.events) >= bounds.max_events:
            self._overflow(streams, kept)
            return
        kept.events.append(event)
        kept.size += size
        streams.size += size
        self._log_size += size

    async def complete_stream(self, session_id: str, stream: int) -> None:
        kept = self._stream(session_id, stream)
        if kept is not None and not kept.complete:
            kept.complete = True
            self._finished[self._streams[session_id].trust][(session_id, stream)] = None

    async def read_stream(self, session_id: str, stream: int, after: int) -> StreamEvents | None:
        kept = self._stream(session_id, stream)
        if kept is None or kept.overflowed or after > len(kept.events):
            return None
        return StreamEvents(tuple(kept.events[after:]), kept.complete)

    async def forget_stream(self, session_id: str, stream: int) -> None:
        if self._stream(session_id, stream) is not None:
            self._discard(session_id, stream)

    def _overflow(self, streams: _Streams, kept: _Stream) -> None:
        """The stream can no longer be resumed: hold none of it."""
        kept.overflowed = True
        streams.size -= kept.size
        self._log_size -= kept.size
        kept.events.clear()
        kept.size = 0

    def _discard(self, session_id: str, number: int) -> None:
        streams = self._streams[session_id]
        kept = streams.kept.pop(number)
        streams.size -= kept.size
        self._log_size -= kept.size
        self._finished[streams.trust].pop((session_id, number), None)

    def _stream(self, session_id: str, stream: int) -> _Stream | None:
        streams = self._streams.get(session_id)
        return streams.kept.get(stream) if streams is not None else None

    # -- tokens ----------------------------------------------------------------------------

    async def put_token(self, key: str, value: bytes, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> None:
        owner, trust = holder.owner, holder.trust
        now = self._clock()
        while self._tokens:  # expired ones first; a later expiry behind an earlier is harmless
            oldest_key, oldest = next(iter(self._tokens.items()))
            if oldest.expires > now:
                break
            self._drop_token(oldest_key)
        if self._token_ranks.admit(owner, token_admission(holder, bounds), lambda key, _: self._drop_token(key)):
            raise StoreFull
        self._tokens[key] = _Token(value, now + ttl_s, owner, trust)
        self._token_ranks.add(key, owner, trust, ranked=True)

    async def use_token(self, key: str, expected: bytes) -> bytes | None:
        token = self._live_token(key)
        if token is None:
            return None
        found = token.value
        if found == expected:
            token.value = USED
        return found

    async def adopt_token(self, key: str, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> bool:
        if self._live_token(key) is not None:
            return False
        await self.put_token(key, USED, ttl_s, holder, bounds)
        return True

    async def revoke_token(self, key: str) -> None:
        token = self._live_token(key)
        if token is not None:
            token.value = USED

    def _live_token(self, key: str) -> _Token | None:
        token = self._tokens.get(key)
        if token is not None and token.expires <= self._clock():
            self._drop_token(key)
            return None
        return token

    def _drop_token(self, key: str) -> None:
        token = self._tokens.pop(key)
        self._token_ranks.remove(key, token.owner, token.trust)

    # -- tasks -----------------------------------------------------------------------------

    async def put_task(self, record: TaskRecord, bounds: TaskBounds) -> str | None:
        now = self._clock()
        self._sweep_tasks(now)
        refused = self._task_ranks.admit(
            record.owner, task_admission(record, bounds), lambda key, _: self._drop_task(key)
        )
        if refused is not None:
            return refused
        self._tasks[record.id] = _Task(record, now + record.ttl_ms / 1000)
        self._task_ranks.add(record.id, record.owner, record.trust, ranked=record.ended)
        return None

    async def find_task(self, task_id: str) -> TaskRecord | None:
        task = self._tasks.get(task_id)
        if task is None:
            return None
        if task.expires <= self._clock():
            self._drop_task(task_id)
            return None
        return task.record

    async def save_task(self, record: TaskRecord, replacing: TaskRecord) -> bool:
        if await self.find_task(record.id) is None:
            return False
        task = self._tasks[record.id]
        if task.record != replacing:
            return False
        task.record = record
        if record.ended:
            self._task_ranks.rank(record.id, record.trust)
        return True

    async def end_task(
        self, record: TaskRecord, replacing: TaskRecord, size: int, bounds: ResultBounds
    ) -> bool | Refusal:
        if await self.find_task(record.id) is None or self._tasks[record.id].record != replacing:
            return False
        self._sweep_tasks(self._clock())  # results whose time is up hold no room
        if size:
            refused = self._result_ranks.admit(record.owner, result_admission(record, size, bounds), self._let_go)
            if refused is not None:
                return refused
        task = self._tasks[record.id]
        task.record = record
        if record.ended:
            self._task_ranks.rank(record.id, record.trust)
        if size:
            self._result_ranks.add(record.id, record.owner, record.trust, ranked=True, weight=size)
        return True

    def _let_go(self, task_id: str, bound: Refusal) -> None:
        """Drop a finished task's result to make room; the task stays, saying which bound."""
        task = self._tasks[task_id]
        self._result_ranks.remove(task_id, task.record.owner, task.record.trust)
        task.record = dataclasses.replace(task.record, outcome=None, released=bound)

    def _sweep_tasks(self, now: float) -> None:
        for task_id in [key for key, task in self._tasks.items() if task.expires <= now]:
            self._drop_task(task_id)  # bounded by `max_tasks`; tasks live for different times

    async def running_tasks(self, owner: bytes | None, limit: int) -> tuple[str, ...]:
        now = self._clock()
        ids = self._task_ranks.by_owner.get(owner, {}) if owner is not None else self._tasks
        running = (task_id for task_id in ids if self._tasks[task_id].expires > now)
        return tuple(itertools.islice((i for i in running if not self._tasks[i].record.ended), limit))

    def _drop_task(self, task_id: str) -> None:
        record = self._tasks.pop(task_id).record
        self._task_ranks.remove(task_id, record.owner, record.trust)
        if task_id in self._result_ranks.by_owner.get(record.owner, {}):
            self._result_ranks.remove(task_id, record.owner, record.trust)

    # -- messages --------------------------------------------------------------------------

    async def publish(self, topic: str, message: bytes) -> bool:
        listeners = self._topics.get(topic)
        if not listeners:
            return False
        for send in list(listeners):
            # A listener that does not read loses the message; it never blocks the sender.
            with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                send.send_nowait(message)
        return True

    @asynccontextmanager
    async def subscribe(self, topic: str, *, capacity: int = INBOX_SIZE) -> AsyncIterator[Inbox]:
        send, receive = anyio.create_memory_object_stream[bytes](capacity)
        listeners = self._topics.setdefault(topic, set())
        listeners.add(send)
        try:
            with send, receive:
                yield receive  # a memory stream is itself an async iterator of messages
        finally:
            listeners.discard(send)
            if not listeners:
                del self._topics[topic]

    def __repr__(self) -> str:
        streams = sum(len(kept.kept) for kept in self._streams.values())
        return (
            f"MemoryStore(sessions={len(self._sessions)}, streams={streams}, tokens={len(self._tokens)}, "
            f"tasks={len(self._tasks)})"
        )
