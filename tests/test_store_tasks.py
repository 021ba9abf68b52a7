"""What only `RedisStore` does with tasks (2026-07-28 tasks extension): another process finds
and saves them, and Redis forgets them on its own. What every store does with tasks is the
contract kit's (fastapi_mcp_routes/store/testing.py, run by test_store_contract.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import redis.asyncio

from fastapi_mcp_routes.store.base import Store, TaskBounds, TaskRecord, Trust
from tests.support.stores import Stores

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
TTL_MS = 60_000
ROOMY = TaskBounds(max_per_owner=10, max_tasks=10)


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
        assert redis_stores.prefix.encode() + b"{tasks}:task:t1" in keys
        for key in keys:
            assert 0 < await client.pttl(key) <= 5_000, key
    finally:
        await client.aclose()
