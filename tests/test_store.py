"""The `Store` contract: what any store behind the seam must do, each test run on `MemoryStore`
and on `RedisStore` (a real redis-server). Where time passes, a fake clock moves it for both."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from fastapi_mcp_routes.store.base import (
    USED,
    Holder,
    LogBounds,
    SessionBounds,
    SessionRecord,
    Store,
    StoreFull,
    StreamEvents,
    Trust,
    shares,
)
from fastapi_mcp_routes.store.memory import MemoryStore
from tests.support.stores import Stores

BOUNDS = SessionBounds(idle_s=60.0, max_sessions=3, max_per_owner=2)
pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def record(
    session_id: str, owner: bytes = b"alice", trust: Trust = Trust.ANONYMOUS, client_info: dict[str, str] | None = None
) -> SessionRecord:
    return SessionRecord(session_id, owner, "2025-11-25", client_info=client_info, trust=trust)


async def store_with(stores: Stores, *sessions: SessionRecord) -> Store:
    """A store with these sessions open: streams are kept only for a live session."""
    store = stores.make()
    for session in sessions:
        await store.open_session(session, SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10))
    return store


async def test_opening_past_the_bounds_pushes_out_the_owners_oldest_then_the_least_recently_used(
    stores: Stores,
) -> None:
    store = stores.make()
    assert await store.open_session(record("a1"), BOUNDS) == ()
    assert await store.open_session(record("a2"), BOUNDS) == ()
    assert await store.open_session(record("a3"), BOUNDS) == ("a1",)  # alice's own oldest
    assert await store.open_session(record("b1", b"bob"), BOUNDS) == ()
    assert await store.find_session("a2", BOUNDS.idle_s) is not None  # a3 is now the least recent
    assert await store.open_session(record("c1", b"carol"), BOUNDS) == ("a3",)


async def test_at_the_total_bound_a_session_pushes_out_only_sessions_trusted_no_more_than_itself(
    stores: Stores,
) -> None:
    store = stores.make()
    bounds = SessionBounds(idle_s=60.0, max_sessions=3, max_per_owner=3)
    await store.open_session(record("v1", b"vera", Trust.VERIFIED), bounds)
    await store.open_session(record("c1", b"carl", Trust.CLAIMED), bounds)
    await store.open_session(record("n1", b"10.0.0.1"), bounds)
    # An anonymous newcomer pushes out the anonymous one, even though v1 is older.
    assert await store.open_session(record("n2", b"10.0.0.2"), bounds) == ("n1",)
    assert await store.open_session(record("c2", b"cora", Trust.CLAIMED), bounds) == ("n2",)
    with pytest.raises(StoreFull):  # only claimed and verified are left: nothing it may push out
        await store.open_session(record("n3", b"10.0.0.3"), bounds)
    assert await store.open_session(record("v2", b"vic", Trust.VERIFIED), bounds) == ("c1",)
    assert await store.open_session(record("c3", b"cleo", Trust.CLAIMED), bounds) == ("c2",)
    assert await store.find_session("v1", 60.0) is not None


async def test_a_session_unused_for_its_idle_time_is_gone(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.open_session(record("a1"), BOUNDS)
    clock.now += 59
    assert await store.find_session("a1", BOUNDS.idle_s) is not None  # and its idle time restarts
    clock.now += 59
    assert await store.find_session("a1", BOUNDS.idle_s) is not None
    clock.now += 61
    assert await store.find_session("a1", BOUNDS.idle_s) is None


async def test_a_saved_record_replaces_a_live_one_and_never_brings_back_a_closed_one(stores: Stores) -> None:
    store = stores.make()
    await store.open_session(record("a1"), BOUNDS)
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


async def test_of_two_changes_made_from_one_record_the_second_is_told_to_read_it_again(stores: Stores) -> None:
    store = stores.make()
    await store.open_session(record("a1", client_info={"name": "Zoë's client", "version": "1.0"}), BOUNDS)
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


async def test_a_claim_has_one_holder_until_released_or_lapsed(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    assert await store.claim("listen/a1", "first", 10) is True
    assert await store.claim("listen/a1", "second", 10) is False
    await store.release("listen/a1", "second")  # not its claim: nothing changes
    assert await store.claim("listen/a1", "second", 10) is False
    await store.release("listen/a1", "first")
    assert await store.claim("listen/a1", "second", 10) is True
    clock.now += 11
    assert await store.claim("listen/a1", "third", 10) is True


async def test_a_holder_that_renews_its_claim_keeps_it(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    assert await store.claim("listen/a1", "first", 10) is True
    for _ in range(3):
        clock.now += 8
        assert await store.claim("listen/a1", "first", 10) is True
        assert await store.claim("listen/a1", "second", 10) is False


async def test_slots_are_taken_in_every_pool_or_none_and_lapse_unless_renewed(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
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


def test_callers_trusted_less_take_a_share_of_a_total_too() -> None:
    assert shares("q", 8, Trust.VERIFIED) == [("q", 8)]
    assert shares("q", 8, Trust.CLAIMED) == [("q", 8), ("q/unverified", 6)]
    assert shares("q", 8, Trust.ANONYMOUS) == [("q", 8), ("q/unverified", 6), ("q/anonymous", 4)]
    assert shares("q", 1, Trust.ANONYMOUS) == [("q", 1), ("q/unverified", 1), ("q/anonymous", 1)]


async def test_a_stream_is_read_after_a_point_and_cannot_be_resumed_once_it_overflowed(stores: Stores) -> None:
    store = stores.make()
    await store.open_session(record("a1"), BOUNDS)
    stream = await store.start_stream("a1", max_kept=8)
    for event in (b"e1", b"e2", b"e3"):
        await store.append_event("a1", stream, event, LogBounds(3, 10_000, 100_000))
    read = await store.read_stream("a1", stream, after=1)
    assert read is not None
    assert (read.events, read.complete) == ((b"e2", b"e3"), False)
    await store.append_event("a1", stream, b"e4", LogBounds(3, 10_000, 100_000))
    assert await store.read_stream("a1", stream, after=0) is None


async def test_past_a_sessions_replay_bytes_its_finished_streams_go_first_then_the_stream_overflows(
    stores: Stores,
) -> None:
    store = stores.make()
    await store.open_session(record("a1"), BOUNDS)
    bounds = LogBounds(max_events=100, max_session_bytes=10, max_total_bytes=1000)
    done = await store.start_stream("a1", 8)
    await store.append_event("a1", done, b"12345", bounds)
    await store.complete_stream("a1", done)
    running = await store.start_stream("a1", 8)
    await store.append_event("a1", running, b"1234", bounds)
    await store.append_event("a1", running, b"1234", bounds)  # 13 bytes: the finished one goes
    assert await store.read_stream("a1", done, 0) is None
    assert await store.read_stream("a1", running, 0) == StreamEvents((b"1234", b"1234"), False)
    await store.append_event("a1", running, b"1234", bounds)  # nothing finished left to push out
    assert await store.read_stream("a1", running, 0) is None
    again = await store.start_stream("a1", 8)  # the overflowed stream holds no bytes any more
    await store.append_event("a1", again, b"1234567890", bounds)
    assert await store.read_stream("a1", again, 0) == StreamEvents((b"1234567890",), False)


async def test_past_the_total_replay_bytes_anyones_oldest_finished_stream_goes_first(stores: Stores) -> None:
    store = await store_with(stores, record("a1"), record("b1", b"bob"), record("c1", b"carol"))
    bounds = LogBounds(max_events=100, max_session_bytes=100, max_total_bytes=10)
    bobs = await store.start_stream("b1", 8)
    await store.append_event("b1", bobs, b"123456", bounds)
    await store.complete_stream("b1", bobs)
    alices = await store.start_stream("a1", 8)
    await store.append_event("a1", alices, b"123456", bounds)
    assert await store.read_stream("b1", bobs, 0) is None
    carols = await store.start_stream("c1", 8)
    await store.append_event("c1", carols, b"123456", bounds)  # alice's still runs: carol's overflows
    assert await store.read_stream("c1", carols, 0) is None
    assert await store.read_stream("a1", alices, 0) == StreamEvents((b"123456",), False)


async def test_past_the_total_replay_bytes_a_session_pushes_out_no_stream_trusted_more_than_itself(
    stores: Stores,
) -> None:
    store = await store_with(
        stores, record("v1", b"vera", Trust.VERIFIED), record("n1", b"10.0.0.1"), record("v2", b"vic", Trust.VERIFIED)
    )
    bounds = LogBounds(max_events=100, max_session_bytes=100, max_total_bytes=10)
    verified = await store.start_stream("v1", 8, Trust.VERIFIED)
    await store.append_event("v1", verified, b"123456", bounds)
    await store.complete_stream("v1", verified)
    anonymous = await store.start_stream("n1", 8)
    await store.append_event("n1", anonymous, b"123456", bounds)  # overflows: the older one is trusted more
    assert await store.read_stream("n1", anonymous, 0) is None
    assert await store.read_stream("v1", verified, 0) == StreamEvents((b"123456",), True)
    again = await store.start_stream("v2", 8, Trust.VERIFIED)
    await store.append_event("v2", again, b"123456", bounds)  # an equal may push it out
    assert await store.read_stream("v1", verified, 0) is None


async def test_past_the_kept_streams_the_oldest_finished_one_goes_first(stores: Stores) -> None:
    store = stores.make()
    await store.open_session(record("a1"), BOUNDS)
    first, second = await store.start_stream("a1", 2), await store.start_stream("a1", 2)
    await store.complete_stream("a1", second)
    third = await store.start_stream("a1", 2)
    assert await store.read_stream("a1", second, 0) is None
    assert await store.read_stream("a1", first, 0) is not None
    assert await store.read_stream("a1", third, 0) is not None


async def test_closing_a_session_forgets_its_streams(stores: Stores) -> None:
    store = stores.make()
    await store.open_session(record("a1"), BOUNDS)
    stream = await store.start_stream("a1", 8)
    assert stream is not None
    await store.close_session("a1")
    assert await store.read_stream("a1", stream, 0) is None


async def test_a_stream_is_started_only_for_a_live_session(stores: Stores) -> None:
    store = stores.make()
    assert await store.start_stream("never-opened", 8) is None
    await store.open_session(record("a1"), BOUNDS)
    assert await store.start_stream("a1", 8) is not None
    await store.close_session("a1")
    # A call the session's end cancelled, answered after it: its stream is not kept.
    assert await store.start_stream("a1", 8) is None


async def test_an_ended_session_leaves_no_stream_behind(stores: Stores) -> None:
    store = stores.make()
    for cycle in range(3):
        session_id = f"a{cycle}"
        await store.open_session(record(session_id), BOUNDS)
        running = await store.start_stream(session_id, 8)
        assert running is not None
        await store.close_session(session_id)
        late = await store.start_stream(session_id, 8)  # the cancelled call's answer, after the end
        await store.complete_stream(session_id, late if late is not None else running)
    if isinstance(store, MemoryStore):
        assert repr(store) == "MemoryStore(sessions=0, streams=0, tokens=0, tasks=0)"
    else:  # only the counters of the bookkeeping are left: no session, stream or byte counted
        held = await stores.redis_keys()
        assert list(held) == ["sessions"]
        assert held["sessions"] is not None
        assert held["sessions"].keys() <= {"seq", "bytes", "life"}
        assert held["sessions"].get("bytes", "0") == "0"


async def test_a_token_is_used_once_only_with_the_value_it_was_kept_with(stores: Stores) -> None:
    store = stores.make()
    await store.put_token("t1", b"value", 60, Holder(b"alice", Trust.ANONYMOUS), (10, 100))
    assert await store.use_token("t1", b"other") == b"value"  # refused, and still good
    assert await store.use_token("t1", b"value") == b"value"
    assert await store.use_token("t1", b"value") == USED
    assert await store.use_token("never", b"value") is None


async def test_tokens_past_their_bounds_push_out_the_owners_oldest_then_anyones(stores: Stores) -> None:
    store = stores.make()
    for key in ("a1", "a2", "a3"):
        await store.put_token(key, b"v", 60, Holder(b"alice", Trust.ANONYMOUS), (2, 3))
    assert await store.use_token("a1", b"v") is None
    await store.put_token("b1", b"v", 60, Holder(b"bob", Trust.ANONYMOUS), (2, 3))
    await store.put_token("b2", b"v", 60, Holder(b"bob", Trust.ANONYMOUS), (2, 3))
    assert await store.use_token("a2", b"v") is None  # the oldest of all
    assert await store.use_token("b2", b"v") == b"v"


async def test_at_the_total_bound_a_token_pushes_out_only_tokens_trusted_no_more_than_itself(stores: Stores) -> None:
    store = stores.make()
    await store.put_token("v", b"v", 60, Holder(b"vera", Trust.VERIFIED), (5, 2))
    await store.put_token("n1", b"v", 60, Holder(b"10.0.0.1", Trust.ANONYMOUS), (5, 2))
    await store.put_token("n2", b"v", 60, Holder(b"10.0.0.2", Trust.ANONYMOUS), (5, 2))  # pushes out n1
    assert await store.use_token("n1", b"v") is None
    await store.put_token("v2", b"v", 60, Holder(b"vic", Trust.VERIFIED), (5, 2))  # pushes out n2
    with pytest.raises(StoreFull):
        await store.put_token("n3", b"v", 60, Holder(b"10.0.0.3", Trust.ANONYMOUS), (5, 2))
    assert await store.use_token("v", b"v") == b"v"


async def test_an_expired_token_is_gone_and_a_revoked_one_is_used(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.put_token("t1", b"v", 60, Holder(b"alice", Trust.ANONYMOUS), (10, 100))
    await store.put_token("t2", b"v", 60, Holder(b"alice", Trust.ANONYMOUS), (10, 100))
    await store.revoke_token("t2")
    assert await store.use_token("t2", b"v") == USED
    clock.now += 61
    assert await store.use_token("t1", b"v") is None


async def test_a_message_reaches_whoever_listens_and_nobody_else(stores: Stores) -> None:
    store = stores.make()
    assert await store.publish("reply/a1/1", b"nobody") is False
    async with store.subscribe("reply/a1/1") as inbox:
        assert await store.publish("reply/a1/2", b"elsewhere") is False
        assert await store.publish("reply/a1/1", b"answer") is True
        with anyio.fail_after(5):
            assert await anext(aiter(inbox)) == b"answer"
    assert await store.publish("reply/a1/1", b"late") is False


async def test_sessions_idle_past_their_time_are_pushed_out_first(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.open_session(record("a1"), BOUNDS)
    await store.open_session(record("b1", b"bob"), BOUNDS)
    clock.now += 61
    assert await store.open_session(record("c1", b"carol"), BOUNDS) == ("a1", "b1")
    assert await store.find_session("a1", BOUNDS.idle_s) is None


async def test_stream_numbers_count_from_one_in_each_session(stores: Stores) -> None:
    store = await store_with(stores, record("a1"), record("b1", b"bob"))
    assert [await store.start_stream("a1", 8) for _ in range(3)] == [1, 2, 3]
    assert await store.start_stream("b1", 8) == 1


async def test_a_session_is_adopted_only_by_a_store_that_is_not_shared_and_not_after_its_end(
    stores: Stores,
) -> None:
    store = stores.make()
    if store.shared:  # it has every session: one it lacks has ended
        assert await store.adopt_session(record("a1"), BOUNDS) is False
        assert await store.find_session("a1", BOUNDS.idle_s) is None
        return
    assert await store.adopt_session(record("a1"), BOUNDS) is True
    assert await store.find_session("a1", BOUNDS.idle_s) is not None
    assert await store.adopt_session(record("a1"), BOUNDS) is True  # already here: kept as it is
    await store.close_session("a1")
    assert await store.adopt_session(record("a1"), BOUNDS) is False


async def test_an_adopted_token_is_kept_used_unless_it_was_here_already(stores: Stores) -> None:
    store = stores.make()
    alice = Holder(b"alice", Trust.ANONYMOUS)
    assert await store.adopt_token("t1", 60, alice, (10, 100)) is True  # its first use here
    assert await store.use_token("t1", b"v") == USED
    assert await store.adopt_token("t1", 60, alice, (10, 100)) is False  # used again: refused
    await store.put_token("t2", b"v", 60, alice, (10, 100))
    assert await store.adopt_token("t2", 60, alice, (10, 100)) is False
    assert await store.use_token("t2", b"v") == b"v"  # issued here: still good


async def test_adopted_tokens_count_toward_the_bounds(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.put_token("v", b"v", 60, Holder(b"vera", Trust.VERIFIED), (5, 2))
    await store.adopt_token("a1", 60, Holder(b"alice", Trust.VERIFIED), (5, 2))
    with pytest.raises(StoreFull):
        await store.adopt_token("n1", 60, Holder(b"10.0.0.1", Trust.ANONYMOUS), (5, 2))
    clock.now += 61  # an expired token is gone: its key can be adopted again
    assert await store.adopt_token("a1", 60, Holder(b"alice", Trust.VERIFIED), (5, 2)) is True
