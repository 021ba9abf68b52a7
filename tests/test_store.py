"""The eviction policy every store executes (store/policy.py), and what a store leaves behind
once its records are gone, on `MemoryStore` and on `RedisStore` (a real redis-server). What any
store behind the seam must do is the contract kit's (fastapi_mcp_routes/store/testing.py, run
by test_store_contract.py)."""

from __future__ import annotations

import pytest

from fastapi_mcp_routes.store.base import (
    Holder,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    TaskBounds,
    TaskRecord,
    Trust,
)
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.policy import (
    Admission,
    credentialed_share,
    crowded_first,
    holder_of,
    result_admission,
    session_admission,
    share_holders,
    shares,
    task_admission,
    token_admission,
    trust_bounds,
    trust_shares,
)
from tests.support.stores import Stores

BOUNDS = SessionBounds(idle_s=60.0, max_sessions=3, max_per_owner=2)


def record(
    session_id: str, owner: bytes = b"alice", trust: Trust = Trust.ANONYMOUS, client_info: dict[str, str] | None = None
) -> SessionRecord:
    return SessionRecord(session_id, owner, "2025-11-25", client_info=client_info, trust=trust)


def test_callers_trusted_less_take_a_share_of_a_total_too() -> None:
    assert trust_shares(8, Trust.VERIFIED) == [(Trust.VERIFIED, 8)]
    assert trust_shares(8, Trust.CLAIMED) == [(Trust.VERIFIED, 8), (Trust.CLAIMED, 6)]
    assert trust_shares(8, Trust.ANONYMOUS) == [(Trust.VERIFIED, 8), (Trust.CLAIMED, 6), (Trust.ANONYMOUS, 4)]
    assert shares("q", 8, Trust.VERIFIED) == [("q", 8)]
    assert shares("q", 8, Trust.CLAIMED) == [("q", 8), ("q/unverified", 6)]
    assert shares("q", 8, Trust.ANONYMOUS) == [("q", 8), ("q/unverified", 6), ("q/anonymous", 4)]
    assert shares("q", 1, Trust.ANONYMOUS) == [("q", 1), ("q/unverified", 1), ("q/anonymous", 1)]


def test_callers_with_credentials_leave_a_tenth_of_a_total_to_anonymous_callers() -> None:
    assert credentialed_share(1000) == 900
    assert trust_bounds(1000, Trust.VERIFIED) == [
        (Trust.ANONYMOUS, Trust.VERIFIED, 1000),
        (Trust.CLAIMED, Trust.VERIFIED, 900),
    ]
    assert trust_bounds(1000, Trust.ANONYMOUS) == [
        (Trust.ANONYMOUS, Trust.VERIFIED, 1000),
        (Trust.ANONYMOUS, Trust.CLAIMED, 750),
        (Trust.ANONYMOUS, Trust.ANONYMOUS, 500),
    ]
    claimed = [("q", 20), ("q/unverified", 15), ("q/credentialed", 18), ("q/unverified/credentialed", 13)]
    assert shares("q", 20, Trust.CLAIMED) == claimed
    assert share_holders("q/credentialed") == "callers with credentials"
    assert share_holders("q/unverified/credentialed") == "callers with credentials but no verified principal"
    assert shares("q", 8, Trust.VERIFIED) == [("q", 8)]  # too small a total to keep a floor


def test_credentials_nobody_checked_rank_as_none() -> None:
    assert holder_of(b"x-api-key=made-up", "10.0.0.1", None) == Holder(b"address\x0010.0.0.1", Trust.ANONYMOUS)
    assert holder_of(b"x-api-key=demo", "10.0.0.1", None, b"demo") == Holder(b"account\x00demo", Trust.CLAIMED)
    assert holder_of(b"principal\x00ann", "10.0.0.1", "ann", b"demo") == Holder(b"principal\x00ann", Trust.VERIFIED)


def test_the_most_crowded_trust_for_its_quota_goes_first_the_lower_on_a_tie() -> None:
    counts = {Trust.ANONYMOUS: 10, Trust.CLAIMED: 0, Trust.VERIFIED: 80}
    assert crowded_first(counts, (100, 90, 90), Trust) == Trust.VERIFIED
    assert crowded_first(counts, (100, 90, 90), [Trust.ANONYMOUS]) == Trust.ANONYMOUS
    assert crowded_first({**counts, Trust.ANONYMOUS: 50}, (50, 90, 90), Trust) == Trust.ANONYMOUS
    assert crowded_first({Trust.ANONYMOUS: 9, Trust.CLAIMED: 0, Trust.VERIFIED: 9}, (9, 9, 9), Trust) == Trust.ANONYMOUS
    assert crowded_first(counts, (100, 90, 90), []) is None


def test_sessions_and_tokens_make_room_until_it_is_made_tasks_push_out_only_finished_ones() -> None:
    session = session_admission(record("a1", trust=Trust.CLAIMED), BOUNDS)
    everyone = (Trust.ANONYMOUS, Trust.VERIFIED, 3)
    assert session == Admission(2, (everyone,), (3, 3, 3), Trust.CLAIMED, finished_only=False, until_room=True)
    token = token_admission(Holder(b"alice", Trust.VERIFIED), (5, 100))
    credentialed = (Trust.CLAIMED, Trust.VERIFIED, 90)
    assert token.bounds == ((Trust.ANONYMOUS, Trust.VERIFIED, 100), credentialed)
    assert (token.quotas, token.until_room) == ((100, 90, 90), True)
    made = TaskRecord("t1", b"alice", Trust.ANONYMOUS, "notes_create", "9f2c", "working", 0, 0, 60_000)
    task = task_admission(made, TaskBounds(max_per_owner=3, max_tasks=8))
    assert task.bounds == (
        (Trust.ANONYMOUS, Trust.VERIFIED, 8),
        (Trust.ANONYMOUS, Trust.CLAIMED, 6),
        (Trust.ANONYMOUS, Trust.ANONYMOUS, 4),
    )
    assert task.quotas == (4, 6, 8)
    assert (task.finished_only, task.until_room) == (True, False)


def test_an_admission_reaches_the_lua_as_integers_in_the_order_it_reads_them() -> None:
    bounds = ((Trust.ANONYMOUS, Trust.VERIFIED, 8), (Trust.ANONYMOUS, Trust.CLAIMED, 6))
    admission = Admission(2, bounds, (4, 6, 8), Trust.CLAIMED, finished_only=True, until_room=False)
    assert admission.terms() == (2, 1, 1, 0, 1, 4, 6, 8, 2, 0, 2, 8, 0, 1, 6)


def test_a_result_is_admitted_by_its_bytes_under_the_shares_tasks_have() -> None:
    made = TaskRecord("t1", b"alice", Trust.ANONYMOUS, "notes_create", "9f2c", "completed", 0, 0, 60_000)
    result = result_admission(made, 300, ResultBounds(max_per_owner=500, max_total=1000))
    assert result.bounds == (
        (Trust.ANONYMOUS, Trust.VERIFIED, 1000),
        (Trust.ANONYMOUS, Trust.CLAIMED, 750),
        (Trust.ANONYMOUS, Trust.ANONYMOUS, 500),
    )
    assert (result.per_owner, result.weight, result.finished_only, result.until_room) == (500, 300, False, True)
    assert result.terms()[:5] == (500, 0, 0, 1, 300)


@pytest.mark.anyio
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
        assert list(held) == ["{sessions}"]
        assert held["{sessions}"] is not None
        assert held["{sessions}"].keys() <= {"seq", "bytes", "life"}
        assert held["{sessions}"].get("bytes", "0") == "0"
