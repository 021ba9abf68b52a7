"""The contract every `Store` keeps, as pytest tests a backend's own test suite runs.

Writing a store backend: implement `Store` (store/__init__.py says what each concern holds),
execute the eviction policy of store/policy.py as it is handed to you, then subclass
`StoreContract` in your tests and give it a `make_store` fixture: a callable that returns a new
store, reading time from `clock` when one is passed (a fake clock the tests move; seconds, as
`time.monotonic`). Each store the kit asks for must start empty (under a prefix of its own on
a shared server); the kit closes each store it made at the test's end.

    import secrets, pytest
    from fastapi_mcp_routes.store.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def make_store(self):
            prefix = secrets.token_hex(6)
            return lambda clock=None: MyStore("my://server", prefix=prefix, clock=clock)

The tests are async and run with anyio's pytest plugin (installed with anyio) on asyncio;
override the `anyio_backend` fixture for another. This module imports pytest, a test
dependency: nothing in the package imports it, so an app never needs pytest.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, Protocol

import anyio
import pytest

from fastapi_mcp_routes.store.base import (
    INBOX_SIZE,
    USED,
    Holder,
    LogBounds,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    Store,
    StoreFull,
    StreamEvents,
    TaskBounds,
    TaskRecord,
    Trust,
)

__all__ = ["Clock", "MakeStore", "StoreContract"]

# The bound on every wait for a message or for concurrent steps.
WAIT_S: Final = 20.0
BOUNDS: Final = SessionBounds(idle_s=60.0, max_sessions=3, max_per_owner=2)
ROOMY_SESSIONS: Final = SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10)
TTL_MS: Final = 60_000
ROOMY_TASKS: Final = TaskBounds(max_per_owner=10, max_tasks=10)
MANY_TASKS: Final = TaskBounds(max_per_owner=100, max_tasks=100)
# Bytes of kept results: an owner 100, in all 1,000 (anonymous callers 500, unverified 750, a floor of 100).
RESULTS: Final = ResultBounds(max_per_owner=100, max_total=1000)
ALICE: Final = Holder(b"alice", Trust.ANONYMOUS)


class Clock:
    """A clock the tests move by hand: `now` seconds."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class MakeStore(Protocol):
    """Makes a new store; with `clock`, one that reads the time from it."""

    def __call__(self, clock: Callable[[], float] | None = None) -> Store: ...


def _record(
    session_id: str, owner: bytes = b"alice", trust: Trust = Trust.ANONYMOUS, client_info: dict[str, str] | None = None
) -> SessionRecord:
    return SessionRecord(session_id, owner, "2025-11-25", client_info=client_info, trust=trust)


def _task(task_id: str, owner: bytes = b"alice", trust: Trust = Trust.ANONYMOUS, **fields: Any) -> TaskRecord:
    made = TaskRecord(task_id, owner, trust, "notes_create", "9f2c", "working", 1_000_000, 1_000_000, TTL_MS)
    return dataclasses.replace(made, **fields)


async def _with_sessions(store: Store, *sessions: SessionRecord) -> Store:
    """The store with these sessions open: streams are kept only for a live session."""
    for session in sessions:
        await store.open_session(session, ROOMY_SESSIONS)
    return store


async def _finish(store: Store, task_id: str, status: str = "completed") -> TaskRecord:
    """Save the task as ended, as its route does once it returns."""
    read = await store.find_task(task_id)
    assert read is not None
    ended = dataclasses.replace(read, status=status, outcome={"content": [], "isError": False})
    assert await store.save_task(ended, read) is True
    return ended


async def _end(store: Store, task_id: str, size: int, bounds: ResultBounds = RESULTS) -> bool | str:
    """End the task `completed` with a result of `size` bytes, as its route's end does."""
    read = await store.find_task(task_id)
    assert read is not None
    ended = dataclasses.replace(read, status="completed", outcome={"content": [], "size": size})
    return await store.end_task(ended, read, size, bounds)


async def _results(store: Store, *task_ids: str) -> list[int | str | None]:
    """Each task's kept result by its size, or the bound that let it go."""
    found = []
    for task_id in task_ids:
        record = await store.find_task(task_id)
        assert record is not None
        assert record.status == "completed"
        found.append(record.released if record.outcome is None else record.outcome["size"])
    return found


async def _ended_tasks(
    store: Store, *tasks: tuple[str, bytes, Trust, int], bounds: ResultBounds = RESULTS
) -> list[bool | str]:
    """Put each task `(id, owner, trust, size)` and end it with a result of its size."""
    ends = []
    for task_id, owner, trust, size in tasks:
        assert await store.put_task(_task(task_id, owner, trust), MANY_TASKS) is None
        ends.append(await _end(store, task_id, size, bounds))
    return ends


@pytest.mark.anyio
class StoreContract:
    """What any store behind the seam must do. Subclass it and define `make_store`."""

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    def make_store(self) -> MakeStore:
        raise NotImplementedError(
            f"{type(self).__name__} needs a make_store fixture that returns a callable making a new store"
        )

    @pytest.fixture
    async def new_store(self, make_store: MakeStore) -> AsyncIterator[MakeStore]:
        """`make_store`, each store it made closed at the test's end."""
        made: list[Store] = []

        def make(clock: Callable[[], float] | None = None) -> Store:
            store = make_store(clock)
            made.append(store)
            return store

        try:
            yield make
        finally:
            for store in made:
                await store.aclose()

    # -- sessions ----------------------------------------------------------------------------

    async def test_opening_past_the_bounds_pushes_out_the_owners_oldest_then_the_least_recently_used(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        assert await store.open_session(_record("a1"), BOUNDS) == ()
        assert await store.open_session(_record("a2"), BOUNDS) == ()
        assert await store.open_session(_record("a3"), BOUNDS) == ("a1",)  # alice's own oldest
        assert await store.open_session(_record("b1", b"bob"), BOUNDS) == ()
        assert await store.find_session("a2", BOUNDS.idle_s) is not None  # a3 is now the least recent
        assert await store.open_session(_record("c1", b"carol"), BOUNDS) == ("a3",)

    async def test_at_the_total_bound_a_session_pushes_out_only_sessions_trusted_no_more_than_itself(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = SessionBounds(idle_s=60.0, max_sessions=3, max_per_owner=3)
        await store.open_session(_record("v1", b"vera", Trust.VERIFIED), bounds)
        await store.open_session(_record("c1", b"carl", Trust.CLAIMED), bounds)
        await store.open_session(_record("n1", b"10.0.0.1"), bounds)
        # An anonymous newcomer pushes out the anonymous one, even though v1 is older.
        assert await store.open_session(_record("n2", b"10.0.0.2"), bounds) == ("n1",)
        assert await store.open_session(_record("c2", b"cora", Trust.CLAIMED), bounds) == ("n2",)
        with pytest.raises(StoreFull):  # only claimed and verified are left: nothing it may push out
            await store.open_session(_record("n3", b"10.0.0.3"), bounds)
        assert await store.open_session(_record("v2", b"vic", Trust.VERIFIED), bounds) == ("c1",)
        assert await store.open_session(_record("c3", b"cleo", Trust.CLAIMED), bounds) == ("c2",)
        assert await store.find_session("v1", 60.0) is not None

    async def test_at_the_total_bound_the_least_recently_used_session_of_the_most_crowded_trust_goes(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = SessionBounds(idle_s=60.0, max_sessions=4, max_per_owner=4)
        await store.open_session(_record("n1", b"10.0.0.1"), bounds)
        for index in range(3):
            await store.open_session(_record(f"v{index}", f"v{index}".encode(), Trust.VERIFIED), bounds)
        assert await store.find_session("v0", 60.0) is not None  # v1 is now the least recent
        # Verified sessions fill three quarters of what they may, anonymous ones a quarter.
        assert await store.open_session(_record("v3", b"v3", Trust.VERIFIED), bounds) == ("v1",)
        assert await store.open_session(_record("n2", b"10.0.0.2"), bounds) == ("n1",)

    async def test_sessions_with_credentials_leave_a_floor_of_the_total_to_anonymous_callers(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10)  # a floor of one
        for index in range(9):
            trust = Trust.CLAIMED if index % 2 else Trust.VERIFIED
            assert await store.open_session(_record(f"c{index}", f"c{index}".encode(), trust), bounds) == ()
        # The tenth with credentials pushes out one with credentials: of the five verified
        # and four claimed sessions, the verified are the most crowded.
        assert await store.open_session(_record("v9", b"v9", Trust.VERIFIED), bounds) == ("c0",)
        assert await store.open_session(_record("n1", b"10.0.0.1"), bounds) == ()
        assert await store.open_session(_record("n2", b"10.0.0.2"), bounds) == ("n1",)
        assert await store.open_session(_record("v10", b"v10", Trust.VERIFIED), bounds) == ("c2",)
        assert await store.find_session("n2", 60.0) is not None

    async def test_a_session_refused_at_the_total_names_the_sessions_it_pushed_out_on_the_way(
        self, new_store: MakeStore
    ) -> None:
        clock = Clock()
        store = new_store(clock)
        bounds = SessionBounds(idle_s=60.0, max_sessions=2, max_per_owner=1)
        await store.open_session(_record("n1", b"10.0.0.1"), bounds)
        clock.now += 30
        await store.open_session(_record("v1", b"vera", Trust.VERIFIED), bounds)
        await store.open_session(_record("v2", b"vic", Trust.VERIFIED), ROOMY_SESSIONS)
        clock.now += 31  # n1 is idle past its time; the verified ones are not
        with pytest.raises(StoreFull) as refused:
            await store.open_session(_record("n2", b"10.0.0.2"), bounds)
        assert refused.value.gone == ("n1",)

    async def test_a_session_unused_for_its_idle_time_is_gone(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.open_session(_record("a1"), BOUNDS)
        clock.now += 59
        assert await store.find_session("a1", BOUNDS.idle_s) is not None  # and its idle time restarts
        clock.now += 59
        assert await store.find_session("a1", BOUNDS.idle_s) is not None
        clock.now += 61
        assert await store.find_session("a1", BOUNDS.idle_s) is None

    async def test_sessions_idle_past_their_time_are_pushed_out_first(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.open_session(_record("a1"), BOUNDS)
        await store.open_session(_record("b1", b"bob"), BOUNDS)
        clock.now += 61
        assert await store.open_session(_record("c1", b"carol"), BOUNDS) == ("a1", "b1")
        assert await store.find_session("a1", BOUNDS.idle_s) is None

    async def test_a_saved_record_replaces_a_live_one_and_never_brings_back_a_closed_one(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        await store.open_session(_record("a1"), BOUNDS)
        read = await store.find_session("a1", BOUNDS.idle_s)
        assert read is not None
        assert await store.save_session(dataclasses.replace(read, log_level="error"), read) is True
        found = await store.find_session("a1", BOUNDS.idle_s)
        assert found is not None
        assert found.log_level == "error"
        assert await store.close_session("a1") is True
        assert await store.save_session(found, found) is False
        assert await store.find_session("a1", BOUNDS.idle_s) is None
        assert await store.close_session("a1") is False

    async def test_of_two_changes_made_from_one_record_the_second_is_told_to_read_it_again(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        await store.open_session(_record("a1", client_info={"name": "Zoë's client", "version": "1.0"}), BOUNDS)
        read = await store.find_session("a1", BOUNDS.idle_s)
        assert read is not None
        first = dataclasses.replace(read, subscriptions=("notes://1",))
        second = dataclasses.replace(read, subscriptions=("notes://2",))
        assert await store.save_session(first, read) is True
        assert await store.save_session(second, read) is False  # it would lose the first
        again = await store.find_session("a1", BOUNDS.idle_s)
        assert again is not None
        assert again == first
        both = dataclasses.replace(again, subscriptions=(*again.subscriptions, "notes://2"))
        assert await store.save_session(both, again) is True
        assert await store.find_session("a1", BOUNDS.idle_s) == both

    async def test_a_session_is_adopted_only_by_a_store_that_is_not_shared_and_not_after_its_end(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        if store.shared:  # it has every session: one it lacks has ended
            assert await store.adopt_session(_record("a1"), BOUNDS) is False
            assert await store.find_session("a1", BOUNDS.idle_s) is None
            return
        assert await store.adopt_session(_record("a1"), BOUNDS) is True
        assert await store.find_session("a1", BOUNDS.idle_s) is not None
        assert await store.adopt_session(_record("a1"), BOUNDS) is True  # already here: kept as it is
        await store.close_session("a1")
        assert await store.adopt_session(_record("a1"), BOUNDS) is False

    # -- claims and slots --------------------------------------------------------------------

    async def test_a_claim_has_one_holder_until_released_or_lapsed(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim("listen/a1", "first", 10) is True
        assert await store.claim("listen/a1", "second", 10) is False
        await store.release("listen/a1", "second")  # not its claim: nothing changes
        assert await store.claim("listen/a1", "second", 10) is False
        await store.release("listen/a1", "first")
        assert await store.claim("listen/a1", "second", 10) is True
        clock.now += 11
        assert await store.claim("listen/a1", "third", 10) is True

    async def test_a_holder_that_renews_its_claim_keeps_it(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim("listen/a1", "first", 10) is True
        for _ in range(3):
            clock.now += 8
            assert await store.claim("listen/a1", "first", 10) is True
            assert await store.claim("listen/a1", "second", 10) is False

    async def test_a_name_claimed_once_is_refused_again_until_it_lapses(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim_once("jti/a", 10, 5) is True
        assert await store.claim_once("jti/a", 10, 5) is False
        assert await store.claim_once("jti/b", 10, 5) is True
        clock.now += 11
        assert await store.claim_once("jti/a", 10, 5) is True

    async def test_past_the_bound_a_new_name_is_refused_and_no_kept_name_is_let_go(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim_once("jti/a", 10, 2) is True
        clock.now += 5
        assert await store.claim_once("jti/b", 10, 2) is True
        assert await store.claim_once("jti/c", 10, 2) is None
        assert await store.claim_once("jti/a", 10, 2) is False  # still kept: still refused
        clock.now += 6  # the first has lapsed: room for one
        assert await store.claim_once("jti/c", 10, 2) is True
        assert await store.claim_once("jti/b", 10, 2) is False

    async def test_past_an_owners_bound_its_new_names_are_refused_while_others_are_kept(
        self, new_store: MakeStore
    ) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim_once("jti/a1", 10, 100, owner="a", max_per_owner=2) is True
        clock.now += 5
        assert await store.claim_once("jti/a2", 10, 100, owner="a", max_per_owner=2) is True
        assert await store.claim_once("jti/a3", 10, 100, owner="a", max_per_owner=2) is None
        assert await store.claim_once("jti/a1", 10, 100, owner="a", max_per_owner=2) is False  # still kept
        assert await store.claim_once("jti/b1", 10, 100, owner="b", max_per_owner=2) is True
        assert await store.claim_once("jti/c1", 10, 100) is True  # no owner named: the total alone
        clock.now += 6  # a's first has lapsed: room for one of a's
        assert await store.claim_once("jti/a3", 10, 100, owner="a", max_per_owner=2) is True
        assert await store.claim_once("jti/a4", 10, 100, owner="a", max_per_owner=2) is None
        # Past the total, an owner with room is refused too.
        assert await store.claim_once("jti/b2", 10, 4, owner="b", max_per_owner=2) is None

    async def test_a_name_kept_longer_does_not_hold_back_those_that_lapsed_after_it(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.claim_once("jti/long", 100, 2) is True
        assert await store.claim_once("jti/short", 5, 2) is True
        clock.now += 6  # the short one lapsed behind the long one: room for one
        assert await store.claim_once("jti/new", 10, 2) is True
        assert await store.claim_once("jti/short", 10, 2) is None
        assert await store.claim_once("jti/long", 10, 2) is False

    async def test_of_concurrent_claims_of_one_name_exactly_one_is_first(self, new_store: MakeStore) -> None:
        store = new_store()
        firsts: list[bool | None] = []

        async def claim() -> None:
            firsts.append(await store.claim_once("jti/same", 10, 100))

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(claim)
        assert firsts.count(True) == 1
        assert firsts.count(False) == 7

    async def test_slots_are_taken_in_every_pool_or_none_and_lapse_unless_renewed(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        pools = [("caller/alice", 2), ("all", 3)]
        assert await store.take_slots(pools, "s1", 10) is None
        assert await store.take_slots(pools, "s2", 10) is None
        assert await store.take_slots(pools, "s3", 10) == "caller/alice"
        assert await store.take_slots([("caller/bob", 2), ("all", 3)], "b1", 10) is None
        assert await store.take_slots([("caller/carol", 2), ("all", 3)], "c1", 10) == "all"
        assert await store.take_slots([("caller/carol", 2)], "c1", 10) is None  # the failed take held nothing
        assert await store.take_slots(pools, "s1", 10) is None  # a holder renews its own
        await store.free_slots(["caller/alice", "all"], "s2")
        assert await store.take_slots(pools, "s3", 10) is None
        clock.now += 11  # nobody renewed: every slot lapsed
        assert await store.take_slots([("caller/dave", 1), ("all", 1)], "d1", 10) is None

    async def test_a_slot_is_held_until_it_is_given_back_or_lapses(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        assert await store.holds_slot("questions/a1", "q1") is False
        assert await store.take_slots([("questions/a1", 2)], "q1", 10) is None
        assert await store.take_slots([("questions/a1", 2)], "q2", 10) is None
        assert await store.holds_slot("questions/a1", "q1") is True
        assert await store.holds_slot("questions/a2", "q1") is False  # another pool
        await store.free_slots(["questions/a1"], "q1")
        assert await store.holds_slot("questions/a1", "q1") is False
        clock.now += 11
        assert await store.holds_slot("questions/a1", "q2") is False  # lapsed

    # -- resumable streams -------------------------------------------------------------------

    async def test_a_stream_is_read_after_a_point_and_cannot_be_resumed_once_it_overflowed(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        await store.open_session(_record("a1"), BOUNDS)
        stream = await store.start_stream("a1", max_kept=8)
        assert stream is not None
        for event in (b"e1", b"e2", b"e3"):
            await store.append_event("a1", stream, event, LogBounds(3, 10_000, 100_000))
        read = await store.read_stream("a1", stream, after=1)
        assert read is not None
        assert (read.events, read.complete) == ((b"e2", b"e3"), False)
        await store.append_event("a1", stream, b"e4", LogBounds(3, 10_000, 100_000))
        assert await store.read_stream("a1", stream, after=0) is None

    async def test_a_completed_stream_says_so_and_a_read_past_its_end_is_refused(self, new_store: MakeStore) -> None:
        store = await _with_sessions(new_store(), _record("a1"))
        stream = await store.start_stream("a1", 8)
        assert stream is not None
        await store.append_event("a1", stream, b"answer", LogBounds(10, 1000, 10_000))
        await store.complete_stream("a1", stream)
        assert await store.read_stream("a1", stream, 0) == StreamEvents((b"answer",), True)
        assert await store.read_stream("a1", stream, 1) == StreamEvents((), True)
        assert await store.read_stream("a1", stream, 2) is None

    async def test_a_forgotten_stream_cannot_be_resumed_and_its_bytes_are_free(self, new_store: MakeStore) -> None:
        store = await _with_sessions(new_store(), _record("a1"))
        bounds = LogBounds(max_events=100, max_session_bytes=10, max_total_bytes=1000)
        first = await store.start_stream("a1", 8)
        assert first is not None
        await store.append_event("a1", first, b"1234567890", bounds)
        await store.forget_stream("a1", first)
        assert await store.read_stream("a1", first, 0) is None
        second = await store.start_stream("a1", 8)
        assert second is not None
        await store.append_event("a1", second, b"1234567890", bounds)  # a running stream: it fits only if freed
        assert await store.read_stream("a1", second, 0) == StreamEvents((b"1234567890",), False)

    async def test_past_a_sessions_replay_bytes_its_finished_streams_go_first_then_the_stream_overflows(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        await store.open_session(_record("a1"), BOUNDS)
        bounds = LogBounds(max_events=100, max_session_bytes=10, max_total_bytes=1000)
        done = await store.start_stream("a1", 8)
        assert done is not None
        await store.append_event("a1", done, b"12345", bounds)
        await store.complete_stream("a1", done)
        running = await store.start_stream("a1", 8)
        assert running is not None
        await store.append_event("a1", running, b"1234", bounds)
        await store.append_event("a1", running, b"1234", bounds)  # 13 bytes: the finished one goes
        assert await store.read_stream("a1", done, 0) is None
        assert await store.read_stream("a1", running, 0) == StreamEvents((b"1234", b"1234"), False)
        await store.append_event("a1", running, b"1234", bounds)  # nothing finished left to push out
        assert await store.read_stream("a1", running, 0) is None
        again = await store.start_stream("a1", 8)  # the overflowed stream holds no bytes any more
        assert again is not None
        await store.append_event("a1", again, b"1234567890", bounds)
        assert await store.read_stream("a1", again, 0) == StreamEvents((b"1234567890",), False)

    async def test_past_the_total_replay_bytes_anyones_oldest_finished_stream_goes_first(
        self, new_store: MakeStore
    ) -> None:
        store = await _with_sessions(new_store(), _record("a1"), _record("b1", b"bob"), _record("c1", b"carol"))
        bounds = LogBounds(max_events=100, max_session_bytes=100, max_total_bytes=10)
        bobs = await store.start_stream("b1", 8)
        assert bobs is not None
        await store.append_event("b1", bobs, b"123456", bounds)
        await store.complete_stream("b1", bobs)
        alices = await store.start_stream("a1", 8)
        assert alices is not None
        await store.append_event("a1", alices, b"123456", bounds)
        assert await store.read_stream("b1", bobs, 0) is None
        carols = await store.start_stream("c1", 8)
        assert carols is not None
        await store.append_event("c1", carols, b"123456", bounds)  # alice's still runs: carol's overflows
        assert await store.read_stream("c1", carols, 0) is None
        assert await store.read_stream("a1", alices, 0) == StreamEvents((b"123456",), False)

    async def test_past_the_total_replay_bytes_a_session_pushes_out_no_stream_trusted_more_than_itself(
        self, new_store: MakeStore
    ) -> None:
        store = await _with_sessions(
            new_store(),
            _record("v1", b"vera", Trust.VERIFIED),
            _record("n1", b"10.0.0.1"),
            _record("v2", b"vic", Trust.VERIFIED),
        )
        bounds = LogBounds(max_events=100, max_session_bytes=100, max_total_bytes=10)
        verified = await store.start_stream("v1", 8, Trust.VERIFIED)
        assert verified is not None
        await store.append_event("v1", verified, b"123456", bounds)
        await store.complete_stream("v1", verified)
        anonymous = await store.start_stream("n1", 8)
        assert anonymous is not None
        await store.append_event("n1", anonymous, b"123456", bounds)  # overflows: the older one is trusted more
        assert await store.read_stream("n1", anonymous, 0) is None
        assert await store.read_stream("v1", verified, 0) == StreamEvents((b"123456",), True)
        again = await store.start_stream("v2", 8, Trust.VERIFIED)
        assert again is not None
        await store.append_event("v2", again, b"123456", bounds)  # an equal may push it out
        assert await store.read_stream("v1", verified, 0) is None

    async def test_past_the_kept_streams_the_oldest_finished_one_goes_first(self, new_store: MakeStore) -> None:
        store = new_store()
        await store.open_session(_record("a1"), BOUNDS)
        first, second = await store.start_stream("a1", 2), await store.start_stream("a1", 2)
        assert first is not None
        assert second is not None
        await store.complete_stream("a1", second)
        third = await store.start_stream("a1", 2)
        assert third is not None
        assert await store.read_stream("a1", second, 0) is None
        assert await store.read_stream("a1", first, 0) is not None
        assert await store.read_stream("a1", third, 0) is not None

    async def test_closing_a_session_forgets_its_streams(self, new_store: MakeStore) -> None:
        store = new_store()
        await store.open_session(_record("a1"), BOUNDS)
        stream = await store.start_stream("a1", 8)
        assert stream is not None
        await store.close_session("a1")
        assert await store.read_stream("a1", stream, 0) is None

    async def test_a_stream_is_started_only_for_a_live_session(self, new_store: MakeStore) -> None:
        store = new_store()
        assert await store.start_stream("never-opened", 8) is None
        await store.open_session(_record("a1"), BOUNDS)
        assert await store.start_stream("a1", 8) is not None
        await store.close_session("a1")
        # A call the session's end cancelled, answered after it: its stream is not kept.
        assert await store.start_stream("a1", 8) is None

    async def test_stream_numbers_count_from_one_in_each_session(self, new_store: MakeStore) -> None:
        store = await _with_sessions(new_store(), _record("a1"), _record("b1", b"bob"))
        assert [await store.start_stream("a1", 8) for _ in range(3)] == [1, 2, 3]
        assert await store.start_stream("b1", 8) == 1

    # -- single-use tokens -------------------------------------------------------------------

    async def test_a_token_is_used_once_only_with_the_value_it_was_kept_with(self, new_store: MakeStore) -> None:
        store = new_store()
        await store.put_token("t1", b"value", 60, ALICE, (10, 100))
        assert await store.use_token("t1", b"other") == b"value"  # refused, and still good
        assert await store.use_token("t1", b"value") == b"value"
        assert await store.use_token("t1", b"value") == USED
        assert await store.use_token("never", b"value") is None

    async def test_tokens_past_their_bounds_push_out_the_owners_oldest_then_anyones(self, new_store: MakeStore) -> None:
        store = new_store()
        for key in ("a1", "a2", "a3"):
            await store.put_token(key, b"v", 60, ALICE, (2, 3))
        assert await store.use_token("a1", b"v") is None
        await store.put_token("b1", b"v", 60, Holder(b"bob", Trust.ANONYMOUS), (2, 3))
        await store.put_token("b2", b"v", 60, Holder(b"bob", Trust.ANONYMOUS), (2, 3))
        assert await store.use_token("a2", b"v") is None  # the oldest of all
        assert await store.use_token("b2", b"v") == b"v"

    async def test_at_the_total_bound_a_token_pushes_out_only_tokens_trusted_no_more_than_itself(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        await store.put_token("v", b"v", 60, Holder(b"vera", Trust.VERIFIED), (5, 2))
        await store.put_token("n1", b"v", 60, Holder(b"10.0.0.1", Trust.ANONYMOUS), (5, 2))
        await store.put_token("n2", b"v", 60, Holder(b"10.0.0.2", Trust.ANONYMOUS), (5, 2))  # pushes out n1
        assert await store.use_token("n1", b"v") is None
        await store.put_token("v2", b"v", 60, Holder(b"vic", Trust.VERIFIED), (5, 2))  # pushes out n2
        with pytest.raises(StoreFull):
            await store.put_token("n3", b"v", 60, Holder(b"10.0.0.3", Trust.ANONYMOUS), (5, 2))
        assert await store.use_token("v", b"v") == b"v"

    async def test_tokens_with_credentials_leave_a_floor_of_the_total_to_anonymous_callers(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        for index in range(10):
            await store.put_token(f"v{index}", b"v", 60, Holder(f"v{index}".encode(), Trust.VERIFIED), (5, 10))
        assert await store.use_token("v0", b"v") is None  # the floor of one pushed it out
        await store.put_token("n1", b"v", 60, Holder(b"10.0.0.1", Trust.ANONYMOUS), (5, 10))
        assert await store.use_token("n1", b"v") == b"v"
        assert await store.use_token("v1", b"v") == b"v"

    async def test_an_expired_token_is_gone_and_a_revoked_one_is_used(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.put_token("t1", b"v", 60, ALICE, (10, 100))
        await store.put_token("t2", b"v", 60, ALICE, (10, 100))
        await store.revoke_token("t2")
        assert await store.use_token("t2", b"v") == USED
        clock.now += 61
        assert await store.use_token("t1", b"v") is None

    async def test_an_adopted_token_is_kept_used_unless_it_was_here_already(self, new_store: MakeStore) -> None:
        store = new_store()
        assert await store.adopt_token("t1", 60, ALICE, (10, 100)) is True  # its first use here
        assert await store.use_token("t1", b"v") == USED
        assert await store.adopt_token("t1", 60, ALICE, (10, 100)) is False  # used again: refused
        await store.put_token("t2", b"v", 60, ALICE, (10, 100))
        assert await store.adopt_token("t2", 60, ALICE, (10, 100)) is False
        assert await store.use_token("t2", b"v") == b"v"  # issued here: still good

    async def test_adopted_tokens_count_toward_the_bounds(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.put_token("v", b"v", 60, Holder(b"vera", Trust.VERIFIED), (5, 2))
        await store.adopt_token("a1", 60, Holder(b"alice", Trust.VERIFIED), (5, 2))
        with pytest.raises(StoreFull):
            await store.adopt_token("n1", 60, Holder(b"10.0.0.1", Trust.ANONYMOUS), (5, 2))
        clock.now += 61  # an expired token is gone: its key can be adopted again
        assert await store.adopt_token("a1", 60, Holder(b"alice", Trust.VERIFIED), (5, 2)) is True

    # -- tasks -------------------------------------------------------------------------------

    async def test_a_kept_task_is_found_as_it_was_put_with_its_nested_mappings(self, new_store: MakeStore) -> None:
        store = new_store()
        kept = _task(
            "t1",
            trust=Trust.VERIFIED,
            status="input_required",
            message="Which notebook, Zoë?",
            questions={"q1": {"method": "elicitation/create", "params": {"requestedSchema": {"type": "object"}}}},
            answers={"q0": {"action": "accept", "content": {"notebook": "work", "tags": ["a", "b"], "n": 1.5}}},
            outcome={"content": [{"type": "text", "text": "ok"}], "structuredContent": {"ids": [1, 2]}, "x": None},
        )
        assert await store.put_task(kept, ROOMY_TASKS) is None
        assert await store.find_task("t1") == kept

    async def test_an_unknown_task_is_not_found(self, new_store: MakeStore) -> None:
        store = new_store()
        assert await store.find_task("nobody-made-this") is None
        await store.put_task(_task("t1"), ROOMY_TASKS)
        assert await store.find_task("t2") is None

    async def test_a_task_is_found_until_its_time_to_live_ends(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.put_task(_task("t1"), ROOMY_TASKS)
        clock.now += TTL_MS / 1000 - 1
        assert await store.find_task("t1") is not None
        clock.now += 1
        assert await store.find_task("t1") is None

    async def test_saving_a_task_does_not_restart_its_time_to_live(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        await store.put_task(_task("t1"), ROOMY_TASKS)
        clock.now += 50
        await _finish(store, "t1")
        clock.now += TTL_MS / 1000 - 50
        assert await store.find_task("t1") is None

    async def test_a_save_from_a_stale_record_is_refused_and_keeps_the_newer_one(self, new_store: MakeStore) -> None:
        store = new_store()
        await store.put_task(_task("t1"), ROOMY_TASKS)
        read = await store.find_task("t1")
        assert read is not None
        progressed = dataclasses.replace(read, message="halfway", updated_ms=1_000_500)
        assert await store.save_task(progressed, read) is True
        assert await store.save_task(dataclasses.replace(read, status="cancelled"), read) is False
        assert await store.find_task("t1") == progressed

    async def test_a_task_that_is_gone_is_never_saved_back(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        never = _task("never")
        assert await store.save_task(dataclasses.replace(never, status="completed"), never) is False
        assert await store.find_task("never") is None
        await store.put_task(_task("t1"), ROOMY_TASKS)
        read = await store.find_task("t1")
        assert read is not None
        clock.now += TTL_MS / 1000
        assert await store.save_task(dataclasses.replace(read, status="completed"), read) is False
        assert await store.find_task("t1") is None

    async def test_of_concurrent_saves_from_one_record_exactly_one_is_kept(self, new_store: MakeStore) -> None:
        store = new_store()
        await store.put_task(_task("t1"), ROOMY_TASKS)
        read = await store.find_task("t1")
        assert read is not None
        saved: dict[int, bool] = {}

        async def save(index: int) -> None:
            saved[index] = await store.save_task(dataclasses.replace(read, message=f"from {index}"), read)

        with anyio.fail_after(WAIT_S):
            async with anyio.create_task_group() as group:
                for index in range(10):
                    group.start_soon(save, index)
        winners = [index for index, ok in saved.items() if ok]
        assert len(saved) == 10
        assert len(winners) == 1
        found = await store.find_task("t1")
        assert found is not None
        assert found.message == f"from {winners[0]}"

    async def test_an_owner_at_its_bound_of_running_tasks_is_refused_until_one_finishes(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=2, max_tasks=10)
        assert await store.put_task(_task("t1"), bounds) is None
        assert await store.put_task(_task("t2"), bounds) is None
        assert await store.put_task(_task("t3"), bounds) == "owner"
        assert await store.find_task("t3") is None
        await _finish(store, "t2")
        assert await store.put_task(_task("t3"), bounds) is None
        assert await store.find_task("t2") is None  # the finished one made room
        assert await store.find_task("t1") is not None  # a running one never goes
        assert await store.find_task("t3") is not None

    async def test_a_task_put_already_finished_counts_as_finished(self, new_store: MakeStore) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=2, max_tasks=10)
        assert await store.put_task(_task("t1", status="failed"), bounds) is None
        assert await store.put_task(_task("t2"), bounds) is None
        assert await store.put_task(_task("t3"), bounds) is None
        assert await store.find_task("t1") is None
        assert await store.put_task(_task("t4"), bounds) == "owner"

    async def test_one_owners_tasks_never_count_against_another_owners_bound(self, new_store: MakeStore) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=2, max_tasks=10)
        for task_id in ("a1", "a2"):
            await store.put_task(_task(task_id), bounds)
        await _finish(store, "a1")
        assert await store.put_task(_task("b1", b"bob"), bounds) is None
        assert await store.put_task(_task("b2", b"bob"), bounds) is None
        assert await store.put_task(_task("b3", b"bob"), bounds) == "owner"  # alice's finished a1 is not bob's
        assert await store.find_task("a1") is not None
        assert await store.put_task(_task("a3"), bounds) is None
        assert await store.find_task("a1") is None
        assert await store.find_task("b1") is not None

    async def test_at_the_total_bound_running_tasks_leave_no_room(self, new_store: MakeStore) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=10, max_tasks=2)
        await store.put_task(_task("a1", b"alice", Trust.VERIFIED), bounds)
        await store.put_task(_task("b1", b"bob", Trust.VERIFIED), bounds)
        assert await store.put_task(_task("v1", b"vera", Trust.VERIFIED), bounds) == "total"
        assert await store.find_task("v1") is None
        assert await store.find_task("a1") is not None
        assert await store.find_task("b1") is not None

    async def test_callers_trusted_less_fill_only_their_share_of_the_tasks(self, new_store: MakeStore) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=10, max_tasks=8)  # anonymous callers 4, unverified 6
        for index in range(4):
            assert await store.put_task(_task(f"n{index}", f"10.0.0.{index}".encode()), bounds) is None
        assert await store.put_task(_task("n4", b"10.0.0.4"), bounds) == "total"
        assert await store.put_task(_task("c1", b"carl", Trust.CLAIMED), bounds) is None
        assert await store.put_task(_task("c2", b"cora", Trust.CLAIMED), bounds) is None
        assert await store.put_task(_task("c3", b"cleo", Trust.CLAIMED), bounds) == "total"
        assert await store.put_task(_task("v1", b"vera", Trust.VERIFIED), bounds) is None
        await _finish(store, "n0")
        assert await store.put_task(_task("c3", b"cleo", Trust.CLAIMED), bounds) is None  # n0 made room
        assert await store.find_task("n0") is None

    async def test_running_tasks_with_credentials_leave_a_floor_of_the_total_to_anonymous_callers(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=10, max_tasks=10)  # a floor of one
        for index in range(9):
            assert await store.put_task(_task(f"v{index}", f"v{index}".encode(), Trust.VERIFIED), bounds) is None
        assert await store.put_task(_task("c1", b"carl", Trust.CLAIMED), bounds) == "total"
        assert await store.put_task(_task("n1", b"10.0.0.1"), bounds) is None

    async def test_at_the_total_bound_a_task_pushes_out_finished_ones_of_the_lowest_trust_up_to_its_own(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=10, max_tasks=3)
        await store.put_task(_task("v1", b"vera", Trust.VERIFIED), bounds)
        await store.put_task(_task("c1", b"carl", Trust.CLAIMED), bounds)
        await store.put_task(_task("n1", b"10.0.0.1", Trust.ANONYMOUS), bounds)
        for task_id in ("v1", "c1", "n1"):  # v1 finished first, but is trusted most
            await _finish(store, task_id)
        assert await store.put_task(_task("c2", b"cora", Trust.CLAIMED), bounds) is None
        assert await store.find_task("n1") is None  # of lower trust
        assert await store.put_task(_task("c3", b"cleo", Trust.CLAIMED), bounds) is None
        assert await store.find_task("c1") is None  # of equal trust
        assert await store.find_task("v1") is not None

    async def test_a_finished_task_trusted_more_is_never_pushed_out_by_a_newcomer_trusted_less(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        bounds = TaskBounds(max_per_owner=10, max_tasks=2)
        await store.put_task(_task("v1", b"vera", Trust.VERIFIED), bounds)
        await store.put_task(_task("c1", b"carl", Trust.CLAIMED, status="completed"), bounds)
        await _finish(store, "v1")
        assert await store.put_task(_task("n1", b"10.0.0.1", Trust.ANONYMOUS), bounds) == "total"
        assert await store.find_task("v1") is not None
        assert await store.find_task("c1") is not None
        assert await store.put_task(_task("v2", b"vic", Trust.VERIFIED), bounds) is None
        assert await store.find_task("c1") is None  # the lowest trust goes first, though v1 is older

    async def test_a_task_past_its_time_to_live_no_longer_counts_against_the_bounds(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        bounds = TaskBounds(max_per_owner=1, max_tasks=1)
        await store.put_task(_task("t1"), bounds)
        assert await store.put_task(_task("b1", b"bob"), bounds) == "total"
        clock.now += TTL_MS / 1000
        assert await store.put_task(_task("b1", b"bob"), bounds) is None
        assert await store.put_task(_task("t2"), bounds) == "total"

    async def test_running_tasks_are_listed_oldest_first_per_owner_or_for_anyone(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        for task_id, owner in (("a1", b"alice"), ("b1", b"bob"), ("a2", b"alice"), ("a3", b"alice")):
            assert await store.put_task(_task(task_id, owner), ROOMY_TASKS) is None
            clock.now += 1
        await _finish(store, "a2")
        assert await store.running_tasks(b"alice", 10) == ("a1", "a3")
        assert await store.running_tasks(b"alice", 1) == ("a1",)
        assert await store.running_tasks(None, 10) == ("a1", "b1", "a3")
        assert await store.running_tasks(b"carol", 10) == ()
        clock.now += TTL_MS / 1000  # every one's time is up
        assert await store.running_tasks(None, 10) == ()

    # -- kept task results, in bytes ----------------------------------------------------------

    async def test_past_its_owners_bytes_a_result_lets_go_of_the_owners_oldest_and_the_task_says_so(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        when = 1_760_000_000_123  # wall-clock milliseconds survive a let-go's rewrite
        for task_id in ("t1", "t2", "t3"):
            await store.put_task(_task(task_id, created_ms=when, updated_ms=when), ROOMY_TASKS)
        assert await _end(store, "t1", 60) is True
        assert await _end(store, "t2", 30) is True
        assert await _end(store, "t3", 50) is True  # 140 bytes: t1 goes, 80 stay
        assert await _results(store, "t1", "t2", "t3") == ["owner", 30, 50]
        released = await store.find_task("t1")
        assert released is not None
        assert (released.created_ms, released.outcome, released.released) == (when, None, "owner")

    async def test_a_result_larger_than_a_bound_is_refused_and_nothing_is_let_go_for_it(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        assert await _ended_tasks(store, ("t1", b"alice", Trust.ANONYMOUS, 60)) == [True]
        await store.put_task(_task("t2"), ROOMY_TASKS)
        assert await _end(store, "t2", 101) == "owner"
        read = await store.find_task("t2")
        assert read is not None
        assert read.status == "working"  # nothing saved: the caller ends it otherwise
        assert await _end(store, "t2", 501, ResultBounds(max_per_owner=1000, max_total=1000)) == "total"  # past 500
        assert await _results(store, "t1") == [60]

    async def test_past_the_total_the_oldest_result_of_the_most_crowded_trust_goes_never_one_trusted_more(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        roomy_owners = dataclasses.replace(RESULTS, max_per_owner=1000)
        ends = await _ended_tasks(
            store,
            ("v1", b"vera", Trust.VERIFIED, 300),
            ("n1", b"10.0.0.1", Trust.ANONYMOUS, 100),
            ("n2", b"10.0.0.2", Trust.ANONYMOUS, 100),
            ("n3", b"10.0.0.3", Trust.ANONYMOUS, 100),
            ("n4", b"10.0.0.4", Trust.ANONYMOUS, 100),
            ("n5", b"10.0.0.5", Trust.ANONYMOUS, 100),  # anonymous callers at their 500
            ("n6", b"10.0.0.6", Trust.ANONYMOUS, 100),  # past it: n1 goes
            bounds=roomy_owners,
        )
        assert ends == [True] * 7
        assert await _results(store, "n1", "n2") == ["total", 100]
        ends = await _ended_tasks(
            store,
            ("c0", b"c0", Trust.CLAIMED, 100),
            ("c1", b"c1", Trust.CLAIMED, 100),  # 1,000 in all
            ("c2", b"c2", Trust.CLAIMED, 100),  # past it: anonymous callers are the most crowded
            bounds=roomy_owners,
        )
        assert ends == [True] * 3
        assert await _results(store, "n2", "n3", "c0", "v1") == ["total", 100, 100, 300]

    async def test_a_result_trusted_less_is_refused_where_only_results_trusted_more_could_make_room(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        verified = [(f"v{index}", f"v{index}".encode(), Trust.VERIFIED, 100) for index in range(9)]
        assert await _ended_tasks(store, *verified) == [True] * 9  # all but the floor of 100
        assert await _ended_tasks(store, ("c1", b"carl", Trust.CLAIMED, 50)) == ["total"]
        assert await _ended_tasks(store, ("n1", b"10.0.0.1", Trust.ANONYMOUS, 100)) == [True]  # the floor
        assert await _ended_tasks(store, ("n2", b"10.0.0.2", Trust.ANONYMOUS, 100)) == [True]  # n1 made room
        assert await _results(store, "v0", "v8", "n1", "n2") == [100, 100, "total", 100]

    async def test_a_dropped_or_expired_task_frees_the_bytes_of_its_result(self, new_store: MakeStore) -> None:
        clock = Clock()
        store = new_store(clock)
        two = TaskBounds(max_per_owner=2, max_tasks=10)
        await store.put_task(_task("t1"), two)
        assert await _end(store, "t1", 80) is True
        await store.put_task(_task("t2"), two)
        await store.put_task(_task("t3"), two)  # t1 goes, finished
        assert await store.find_task("t1") is None
        assert await _end(store, "t3", 80) is True  # with nothing to let go: t1's bytes are free
        clock.now += TTL_MS / 1000
        await store.put_task(_task("t4"), two)
        assert await _end(store, "t4", 80) is True  # t3's time is up, and its bytes with it
        assert await _results(store, "t4") == [80]

    async def test_a_stale_end_is_not_saved_and_lets_nothing_go(self, new_store: MakeStore) -> None:
        store = new_store()
        assert await _ended_tasks(store, ("t1", b"alice", Trust.ANONYMOUS, 90)) == [True]
        await store.put_task(_task("t2"), ROOMY_TASKS)
        read = await store.find_task("t2")
        assert read is not None
        assert await store.save_task(dataclasses.replace(read, message="progress"), read) is True
        ended = dataclasses.replace(read, status="completed", outcome={"size": 50})
        assert await store.end_task(ended, read, 50, RESULTS) is False
        assert await _results(store, "t1") == [90]

    # -- publish/subscribe -------------------------------------------------------------------

    async def test_a_message_reaches_whoever_listens_and_nobody_else(self, new_store: MakeStore) -> None:
        store = new_store()
        assert await store.publish("reply/a1/1", b"nobody") is False
        async with store.subscribe("reply/a1/1") as inbox:
            assert await store.publish("reply/a1/2", b"elsewhere") is False
            assert await store.publish("reply/a1/1", b"answer") is True
            with anyio.fail_after(WAIT_S):
                assert await anext(aiter(inbox)) == b"answer"
        assert await store.publish("reply/a1/1", b"late") is False

    async def test_every_listener_of_a_topic_gets_each_message_in_order(self, new_store: MakeStore) -> None:
        store = new_store()
        async with store.subscribe("news") as first, store.subscribe("news") as second:
            for message in (b"one", b"two"):
                assert await store.publish("news", message) is True
            with anyio.fail_after(WAIT_S):
                for inbox in (first, second):
                    assert [await anext(aiter(inbox)) for _ in range(2)] == [b"one", b"two"]
            with pytest.raises(anyio.WouldBlock):
                first.receive_nowait()

    async def test_a_listener_that_asks_for_a_larger_inbox_keeps_every_message_it_has_not_read(
        self, new_store: MakeStore
    ) -> None:
        store = new_store()
        sent = [str(n).encode() for n in range(4 * INBOX_SIZE)]
        async with store.subscribe("burst") as small, store.subscribe("burst", capacity=len(sent)) as large:
            for message in sent:
                await store.publish("burst", message)
            with anyio.fail_after(WAIT_S):
                assert [await anext(aiter(large)) for _ in sent] == sent
            kept = []
            with contextlib.suppress(anyio.WouldBlock):
                while True:
                    kept.append(small.receive_nowait())
            assert kept == sent[:INBOX_SIZE]  # a listener that does not read loses the next ones
