"""No key without a time to live: after a burst of everything `RedisStore` keeps, every key
under its prefix expires on its own (`SCAN` + `PTTL`), so a Redis that every process stopped
renewing empties itself, whatever the scripts left behind on the way (bounds reached, records
pushed out, streams overflowed, results let go).

The burst runs the store's methods as the endpoint's processes do, several stores on one prefix,
with bounds small enough that every push-out path runs; its records live a minute, so none
expires while the keys are read."""

from __future__ import annotations

import dataclasses
from typing import Final

import anyio
import pytest
import redis.asyncio

from fastapi_mcp_routes.store.base import (
    USED,
    Holder,
    LogBounds,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    Store,
    StoreFull,
    TaskBounds,
    TaskRecord,
    Trust,
)
from tests.support.stores import Stores
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

LIFE_S: Final = 60.0  # every record's life: none ends while the test reads the keys
LIFE_MS: Final = int(LIFE_S * 1000)
SESSIONS: Final = SessionBounds(idle_s=LIFE_S, max_sessions=12, max_per_owner=5)
LOG: Final = LogBounds(max_events=4, max_session_bytes=400, max_total_bytes=2_000)
TOKENS: Final = (3, 20)  # per owner, in all
TASKS: Final = TaskBounds(max_per_owner=4, max_tasks=10)
RESULTS: Final = ResultBounds(max_per_owner=300, max_total=800)
OWNERS: Final = (b"alice", b"bob", b"carol")
TRUSTS: Final = (Trust.ANONYMOUS, Trust.VERIFIED, Trust.CLAIMED)
ROUNDS: Final = 8  # of each kind of record per owner: past every bound above
FAMILIES: Final = ("session", "token", "task", "claim", "slots")


async def test_after_a_burst_of_everything_the_store_keeps_every_key_has_a_time_to_live(
    redis_stores: Stores,
) -> None:
    first, second = redis_stores.make(), redis_stores.make()  # two processes sharing one Redis
    for owner, trust in zip(OWNERS, TRUSTS, strict=True):
        holder = Holder(owner, trust)
        for index in range(ROUNDS):
            store = (first, second)[index % 2]
            await sessions_with_streams(store, holder, f"{owner.decode()}-{index}")
            await tokens(store, holder, f"{owner.decode()}-{index}")
            await tasks_with_results(store, holder, f"{owner.decode()}-{index}")
            await claims_and_slots(store, f"{owner.decode()}-{index}")
    await questions_and_messages(first, second)
    held = await keys_by_time_to_live(redis_stores)
    assert held, "the burst left no key to check"
    # Every family left keys behind, whatever the layout names them (hash tags or not).
    missing = [family for family in FAMILIES if not any(family in key for key in held)]
    assert missing == [], f"the burst left no key of {missing}: {sorted(held)[:20]}"
    without = sorted(key for key, ttl_ms in held.items() if ttl_ms == -1)
    assert without == [], f"{len(without)} of {len(held)} keys have no time to live: {without[:20]}"


async def test_records_left_as_first_written_have_a_time_to_live(redis_stores: Stores) -> None:
    """What a client that goes away leaves: every family's keys as its first write made them,
    with nothing read or renewed after."""
    store = redis_stores.make()
    holder = Holder(b"alice", Trust.ANONYMOUS)
    await store.open_session(SessionRecord("opened", holder.owner, "2025-11-25"), SESSIONS)
    await store.open_session(SessionRecord("streaming", holder.owner, "2025-11-25"), SESSIONS)
    number = await store.start_stream("streaming", 2)
    assert number is not None
    await store.append_event("streaming", number, b"event", LOG)
    await store.put_token("token", b"value", LIFE_S, holder, TOKENS)
    running = TaskRecord("running", holder.owner, holder.trust, "tool", "runner", "working", 1, 1, LIFE_MS)
    assert await store.put_task(running, TASKS) is None
    failed = dataclasses.replace(running, status="failed", message="the route raised")
    assert await store.save_task(failed, running)
    assert await store.claim("listen/opened", "holder", LIFE_S)
    assert await store.take_slots([("streams", 10)], "holder", LIFE_S) is None
    held = await keys_by_time_to_live(redis_stores)
    without = sorted(key for key, ttl_ms in held.items() if ttl_ms == -1)
    assert without == [], f"{len(without)} of {len(held)} keys have no time to live: {without}"


async def sessions_with_streams(store: Store, holder: Holder, name: str) -> None:
    """A session with three streams (one too many to keep), events past the bounds, a resume,
    a stream forgotten, a subscription saved; every other session closed."""
    record = SessionRecord(name, holder.owner, "2025-11-25", client_info={"name": "c", "version": "1"})
    record = dataclasses.replace(record, trust=holder.trust)
    await store.open_session(record, SESSIONS)
    for stream_index in range(3):
        number = await store.start_stream(name, 2, holder.trust)
        if number is None:
            return  # pushed out by a later session of another store: a path of its own
        for event in range(LOG.max_events + 1):
            await store.append_event(name, number, f"event {event} ".encode() * 8, LOG)
        if stream_index != 1:
            await store.complete_stream(name, number)
        await store.read_stream(name, number, 0)
        if stream_index == 2:
            await store.forget_stream(name, number)
    found = await store.find_session(name, SESSIONS.idle_s)
    if found is not None:
        await store.save_session(dataclasses.replace(found, subscriptions=("digest",)), found)
    if name.endswith(("1", "4")):
        await store.close_session(name)


async def tokens(store: Store, holder: Holder, name: str) -> None:
    """Tokens kept past their bounds, used, adopted, revoked."""
    try:
        await store.put_token(f"t-{name}", b"value", LIFE_S, holder, TOKENS)
        await store.use_token(f"t-{name}", b"value")
        await store.adopt_token(f"adopted-{name}", LIFE_S, holder, TOKENS)
        await store.put_token(f"r-{name}", b"value", LIFE_S, holder, TOKENS)
        await store.revoke_token(f"r-{name}")
    except StoreFull:  # the total is reached by tokens trusted more: a path of its own
        pass
    assert await store.use_token(f"t-{name}", b"value") in (USED, None)


async def tasks_with_results(store: Store, holder: Holder, name: str) -> None:
    """A task that asks a question, is answered, and ends with a result (results let go and
    tasks pushed out past their bounds); every third one stays running."""
    made = TaskRecord(f"k-{name}", holder.owner, holder.trust, "tool", "runner", "working", 1, 1, LIFE_MS)
    if await store.put_task(made, TASKS) is not None:
        return  # the bound is full of running tasks: a path of its own
    asking = dataclasses.replace(made, status="input_required", questions={"confirm": {"method": "elicitation"}})
    assert await store.save_task(asking, made)
    answered = dataclasses.replace(asking, status="working", questions=None, answers={"confirm": {"ok": True}})
    assert await store.save_task(answered, asking)
    if name.endswith(("0", "3", "6")):
        return
    ended = dataclasses.replace(answered, status="completed", outcome={"content": [], "text": "x" * 150})
    await store.end_task(ended, answered, 150, RESULTS)
    await store.running_tasks(holder.owner, 10)
    await store.running_tasks(None, 10)


async def claims_and_slots(store: Store, name: str) -> None:
    """Claims and slots taken, renewed, some given back."""
    assert await store.claim(f"listen/{name}", "holder-1", LIFE_S)
    assert await store.claim(f"listen/{name}", "holder-1", LIFE_S)
    await store.claim(f"task/{name}", "holder-2", LIFE_S)
    await store.release(f"task/{name}", "holder-2")
    pools = [("streams", 100), (f"streams/{name[:-2]}", 10), (f"questions/{name}", 2)]
    await store.take_slots(pools, f"slot-{name}", LIFE_S)
    await store.take_slots(pools, f"slot-{name}-again", LIFE_S)
    await store.free_slots([pool for pool, _ in pools], f"slot-{name}-again")


async def questions_and_messages(first: Store, second: Store) -> None:
    """Questions' answers and news published from one store to a listener of the other: pub/sub
    keeps no key, and must leave none."""
    async with first.subscribe("answers/q1") as inbox:
        with anyio.fail_after(WAIT_S):
            while not await second.publish("answers/q1", b"teal"):
                await anyio.sleep(0.01)
            assert await anext(aiter(inbox)) == b"teal"
    await second.publish("news", b"ended")


async def keys_by_time_to_live(stores: Stores) -> dict[str, int]:
    """Every key under the stores' prefix (without it), with its PTTL in milliseconds: -1 for
    a key that never expires. A key that expired between SCAN and PTTL is left out."""
    assert stores.redis_url is not None
    client = redis.asyncio.Redis.from_url(stores.redis_url, decode_responses=True)
    try:
        held: dict[str, int] = {}
        async for key in client.scan_iter(match=stores.prefix + "*", count=1000):
            ttl_ms = await client.pttl(key)
            if ttl_ms != -2:
                held[key.removeprefix(stores.prefix)] = ttl_ms
        return held
    finally:
        await client.aclose()
