"""The `Store` contract for tasks (2026-07-28 tasks extension): kept for their time to live,
bounded per owner and in all (finished ones pushed out, running ones never), saved by
compare-and-set. Each test runs on `MemoryStore` and on `RedisStore`, a fake clock moving time
for both; what only Redis does (another process, keys Redis forgets on its own) comes last."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import pytest
import redis.asyncio

from fastapi_mcp_routes.store.base import Store, TaskBounds, TaskRecord, Trust
from tests.support.stores import Stores
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio
TTL_MS = 60_000
ROOMY = TaskBounds(max_per_owner=10, max_tasks=10)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def task(task_id: str, owner: bytes = b"alice", trust: Trust = Trust.ANONYMOUS, **fields: Any) -> TaskRecord:
    made = TaskRecord(task_id, owner, trust, "notes_create", "9f2c", "working", 1_000_000, 1_000_000, TTL_MS)
    return dataclasses.replace(made, **fields)


async def finish(store: Store, task_id: str, status: str = "completed") -> TaskRecord:
    """Save the task as ended, as its route does once it returns."""
    read = await store.find_task(task_id)
    assert read is not None
    ended = dataclasses.replace(read, status=status, outcome={"content": [], "isError": False})
    assert await store.save_task(ended, read) is True
    return ended


async def test_a_kept_task_is_found_as_it_was_put_with_its_nested_mappings(stores: Stores) -> None:
    store = stores.make()
    kept = task(
        "t1",
        trust=Trust.VERIFIED,
        status="input_required",
        message="Which notebook, Zoë?",
        questions={"q1": {"method": "elicitation/create", "params": {"requestedSchema": {"type": "object"}}}},
        answers={"q0": {"action": "accept", "content": {"notebook": "work", "tags": ["a", "b"], "n": 1.5}}},
        outcome={"content": [{"type": "text", "text": "ok"}], "structuredContent": {"ids": [1, 2]}, "x": None},
    )
    assert await store.put_task(kept, ROOMY) is None
    assert await store.find_task("t1") == kept


async def test_an_unknown_task_is_not_found(stores: Stores) -> None:
    store = stores.make()
    assert await store.find_task("nobody-made-this") is None
    await store.put_task(task("t1"), ROOMY)
    assert await store.find_task("t2") is None


async def test_a_task_is_found_until_its_time_to_live_ends(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.put_task(task("t1"), ROOMY)
    clock.now += TTL_MS / 1000 - 1
    assert await store.find_task("t1") is not None
    clock.now += 1
    assert await store.find_task("t1") is None


async def test_saving_a_task_does_not_restart_its_time_to_live(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    await store.put_task(task("t1"), ROOMY)
    clock.now += 50
    await finish(store, "t1")
    clock.now += TTL_MS / 1000 - 50
    assert await store.find_task("t1") is None


async def test_a_save_from_a_stale_record_is_refused_and_keeps_the_newer_one(stores: Stores) -> None:
    store = stores.make()
    await store.put_task(task("t1"), ROOMY)
    read = await store.find_task("t1")
    assert read is not None
    progressed = dataclasses.replace(read, message="halfway", updated_ms=1_000_500)
    assert await store.save_task(progressed, read) is True
    assert await store.save_task(dataclasses.replace(read, status="cancelled"), read) is False
    assert await store.find_task("t1") == progressed


async def test_a_task_that_is_gone_is_never_saved_back(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    never = task("never")
    assert await store.save_task(dataclasses.replace(never, status="completed"), never) is False
    assert await store.find_task("never") is None
    await store.put_task(task("t1"), ROOMY)
    read = await store.find_task("t1")
    assert read is not None
    clock.now += TTL_MS / 1000
    assert await store.save_task(dataclasses.replace(read, status="completed"), read) is False
    assert await store.find_task("t1") is None


async def test_of_concurrent_saves_from_one_record_exactly_one_is_kept(stores: Stores) -> None:
    store = stores.make()
    await store.put_task(task("t1"), ROOMY)
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


async def test_an_owner_at_its_bound_of_running_tasks_is_refused_until_one_finishes(stores: Stores) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=2, max_tasks=10)
    assert await store.put_task(task("t1"), bounds) is None
    assert await store.put_task(task("t2"), bounds) is None
    assert await store.put_task(task("t3"), bounds) == "owner"
    assert await store.find_task("t3") is None
    await finish(store, "t2")
    assert await store.put_task(task("t3"), bounds) is None
    assert await store.find_task("t2") is None  # the finished one made room
    assert await store.find_task("t1") is not None  # a running one never goes
    assert await store.find_task("t3") is not None


async def test_a_task_put_already_finished_counts_as_finished(stores: Stores) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=2, max_tasks=10)
    assert await store.put_task(task("t1", status="failed"), bounds) is None
    assert await store.put_task(task("t2"), bounds) is None
    assert await store.put_task(task("t3"), bounds) is None
    assert await store.find_task("t1") is None
    assert await store.put_task(task("t4"), bounds) == "owner"


async def test_one_owners_tasks_never_count_against_another_owners_bound(stores: Stores) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=2, max_tasks=10)
    for task_id in ("a1", "a2"):
        await store.put_task(task(task_id), bounds)
    await finish(store, "a1")
    assert await store.put_task(task("b1", b"bob"), bounds) is None
    assert await store.put_task(task("b2", b"bob"), bounds) is None
    assert await store.put_task(task("b3", b"bob"), bounds) == "owner"  # alice's finished a1 is not bob's
    assert await store.find_task("a1") is not None
    assert await store.put_task(task("a3"), bounds) is None
    assert await store.find_task("a1") is None
    assert await store.find_task("b1") is not None


async def test_at_the_total_bound_running_tasks_leave_no_room(stores: Stores) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=10, max_tasks=2)
    await store.put_task(task("a1", b"alice", Trust.VERIFIED), bounds)
    await store.put_task(task("b1", b"bob", Trust.VERIFIED), bounds)
    assert await store.put_task(task("v1", b"vera", Trust.VERIFIED), bounds) == "total"
    assert await store.find_task("v1") is None
    assert await store.find_task("a1") is not None
    assert await store.find_task("b1") is not None


async def test_at_the_total_bound_a_task_pushes_out_finished_ones_of_the_lowest_trust_up_to_its_own(
    stores: Stores,
) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=10, max_tasks=3)
    await store.put_task(task("v1", b"vera", Trust.VERIFIED), bounds)
    await store.put_task(task("c1", b"carl", Trust.CLAIMED), bounds)
    await store.put_task(task("n1", b"10.0.0.1", Trust.ANONYMOUS), bounds)
    for task_id in ("v1", "c1", "n1"):  # v1 finished first, but is trusted most
        await finish(store, task_id)
    assert await store.put_task(task("c2", b"cora", Trust.CLAIMED), bounds) is None
    assert await store.find_task("n1") is None  # of lower trust
    assert await store.put_task(task("c3", b"cleo", Trust.CLAIMED), bounds) is None
    assert await store.find_task("c1") is None  # of equal trust
    assert await store.find_task("v1") is not None


async def test_a_finished_task_trusted_more_is_never_pushed_out_by_a_newcomer_trusted_less(stores: Stores) -> None:
    store = stores.make()
    bounds = TaskBounds(max_per_owner=10, max_tasks=2)
    await store.put_task(task("v1", b"vera", Trust.VERIFIED), bounds)
    await store.put_task(task("c1", b"carl", Trust.CLAIMED, status="completed"), bounds)
    await finish(store, "v1")
    assert await store.put_task(task("n1", b"10.0.0.1", Trust.ANONYMOUS), bounds) == "total"
    assert await store.find_task("v1") is not None
    assert await store.find_task("c1") is not None
    assert await store.put_task(task("v2", b"vic", Trust.VERIFIED), bounds) is None
    assert await store.find_task("c1") is None  # the lowest trust goes first, though v1 is older


async def test_a_task_past_its_time_to_live_no_longer_counts_against_the_bounds(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    bounds = TaskBounds(max_per_owner=1, max_tasks=1)
    await store.put_task(task("t1"), bounds)
    assert await store.put_task(task("b1", b"bob"), bounds) == "total"
    clock.now += TTL_MS / 1000
    assert await store.put_task(task("b1", b"bob"), bounds) is None
    assert await store.put_task(task("t2"), bounds) == "total"


# -- what only Redis does ----------------------------------------------------------------------


@pytest.mark.redis
async def test_a_task_kept_by_one_process_is_found_and_saved_by_another(redis_stores: Stores) -> None:
    first, second = redis_stores.make(), redis_stores.make()
    await first.put_task(task("t1", questions={"q1": {"method": "elicitation/create"}}), ROOMY)
    read = await second.find_task("t1")
    assert read == task("t1", questions={"q1": {"method": "elicitation/create"}})
    assert read is not None
    answered = dataclasses.replace(read, questions=None, answers={"q1": {"action": "decline"}})
    assert await second.save_task(answered, read) is True
    assert await first.save_task(dataclasses.replace(read, status="cancelled"), read) is False
    assert await first.find_task("t1") == answered


@pytest.mark.redis
async def test_redis_forgets_a_task_and_its_bookkeeping_on_its_own_after_its_time_to_live(
    redis_stores: Stores, redis_url: str
) -> None:
    store = redis_stores.make()
    await store.put_task(task("t1", ttl_ms=5_000), ROOMY)
    await finish(store, "t1")  # a save keeps the key's time to live running
    client = redis.asyncio.Redis.from_url(redis_url)
    try:
        keys = await client.keys(redis_stores.prefix + "*")
        assert redis_stores.prefix.encode() + b"task:t1" in keys
        for key in keys:
            assert 0 < await client.pttl(key) <= 5_000, key
    finally:
        await client.aclose()


async def test_running_tasks_are_listed_oldest_first_per_owner_or_for_anyone(stores: Stores) -> None:
    clock = Clock()
    store = stores.make(clock)
    for task_id, owner in (("a1", b"alice"), ("b1", b"bob"), ("a2", b"alice"), ("a3", b"alice")):
        assert await store.put_task(task(task_id, owner), ROOMY) is None
        clock.now += 1
    await finish(store, "a2")
    assert await store.running_tasks(b"alice", 10) == ("a1", "a3")
    assert await store.running_tasks(b"alice", 1) == ("a1",)
    assert await store.running_tasks(None, 10) == ("a1", "b1", "a3")
    assert await store.running_tasks(b"carol", 10) == ()
    clock.now += TTL_MS / 1000  # every one's time is up
    assert await store.running_tasks(None, 10) == ()
