"""The eviction policy every store executes (store/policy.py), and what a store leaves behind
once its records are gone, on `MemoryStore` and on `RedisStore` (a real redis-server). What any
store behind the seam must do is the contract kit's (fastapi_mcp_routes/store/testing.py, run
by test_store_contract.py)."""

from __future__ import annotations

import pytest

from fastapi_mcp_routes.store.base import Holder, SessionBounds, SessionRecord, TaskBounds, TaskRecord, Trust
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.policy import (
    Admission,
    session_admission,
    shares,
    task_admission,
    token_admission,
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


def test_sessions_and_tokens_make_room_until_it_is_made_tasks_push_out_only_finished_ones() -> None:
    session = session_admission(record("a1", trust=Trust.CLAIMED), BOUNDS)
    assert session == Admission(2, ((Trust.VERIFIED, 3),), Trust.CLAIMED, finished_only=False, until_room=True)
    token = token_admission(Holder(b"alice", Trust.VERIFIED), (5, 100))
    assert token == Admission(5, ((Trust.VERIFIED, 100),), Trust.VERIFIED, finished_only=False, until_room=True)
    made = TaskRecord("t1", b"alice", Trust.ANONYMOUS, "notes_create", "9f2c", "working", 0, 0, 60_000)
    task = task_admission(made, TaskBounds(max_per_owner=3, max_tasks=8))
    assert task.shares == ((Trust.VERIFIED, 8), (Trust.CLAIMED, 6), (Trust.ANONYMOUS, 4))
    assert (task.finished_only, task.until_room) == (True, False)


def test_an_admission_reaches_the_lua_as_integers_in_the_order_it_reads_them() -> None:
    admission = Admission(
        2, ((Trust.VERIFIED, 8), (Trust.CLAIMED, 6)), Trust.CLAIMED, finished_only=True, until_room=False
    )
    assert admission.terms() == (2, 1, 1, 0, 2, 2, 8, 1, 6)


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
        assert list(held) == ["sessions"]
        assert held["sessions"] is not None
        assert held["sessions"].keys() <= {"seq", "bytes", "life"}
        assert held["sessions"].get("bytes", "0") == "0"
