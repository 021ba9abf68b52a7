"""What only `RedisStore` does, on a real redis-server: one store shared by several processes
(here, several stores on one prefix), Redis's own clock and key expiry, publish/subscribe over
one connection, atomic steps under concurrency, and failing fast when Redis is gone. The
contract every store keeps is the kit's (fastapi_mcp_routes/store/testing.py), run by
test_store_contract.py."""

from __future__ import annotations

import re
import subprocess
import sys
from contextlib import AsyncExitStack
from typing import Any

import anyio
import pytest
import redis.asyncio
from anyio.streams.memory import MemoryObjectReceiveStream
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

import fastapi_mcp_routes
from fastapi_mcp_routes.store.base import USED, Holder, LogBounds, SessionBounds, SessionRecord, Store, Trust
from fastapi_mcp_routes.store.redis import pubsub as redis_pubsub
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from tests.support.redis import gone_redis_url
from tests.support.stores import Stores
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.anyio, pytest.mark.redis]
BOUNDS = SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10)
ALICE = Holder(b"alice", Trust.ANONYMOUS)


def record(session_id: str, owner: bytes = b"alice") -> SessionRecord:
    return SessionRecord(session_id, owner, "2025-11-25", client_info={"name": "c", "version": "1"})


async def next_message(inbox: Any) -> bytes:
    with anyio.fail_after(WAIT_S):
        message: bytes = await anext(aiter(inbox))
        return message


async def publish_until_heard(publisher: Store, inbox: Any, channel: str) -> None:
    """Publish to `channel` until `inbox` hears it. Messages published while a connection is
    down or being made anew are lost (one may even reach the connection on its way out)."""
    with anyio.fail_after(WAIT_S):
        while True:
            await publisher.publish(channel, b"again")
            with anyio.move_on_after(0.1):
                assert await anext(aiter(inbox)) == b"again"
                return


async def clients(url: str) -> list[dict[str, Any]]:
    admin = redis.asyncio.Redis.from_url(url)
    try:
        listed: list[dict[str, Any]] = await admin.client_list()
        return listed
    finally:
        await admin.aclose()


# -- one store, several processes --------------------------------------------------------------


async def test_a_session_opened_in_one_process_is_found_and_closed_in_another(redis_stores: Stores) -> None:
    first, second = redis_stores.make(), redis_stores.make()
    await first.open_session(record("a1"), BOUNDS)
    assert await second.find_session("a1", BOUNDS.idle_s) == record("a1")
    assert await second.close_session("a1") is True
    assert await first.find_session("a1", BOUNDS.idle_s) is None


async def test_a_stream_kept_by_one_process_is_resumed_from_another(redis_stores: Stores) -> None:
    first, second = redis_stores.make(), redis_stores.make()
    await first.open_session(record("a1"), BOUNDS)
    stream = await first.start_stream("a1", 8)
    assert stream is not None
    await first.append_event("a1", stream, b"e1", LogBounds(10, 1000, 10_000))
    await first.complete_stream("a1", stream)
    read = await second.read_stream("a1", stream, 0)
    assert read is not None
    assert (read.events, read.complete) == ((b"e1",), True)


async def test_stores_under_different_prefixes_share_nothing(redis_url: str) -> None:
    apps = Stores(redis_url), Stores(redis_url)
    try:
        one, other = apps[0].make(), apps[1].make()
        await one.open_session(record("a1"), BOUNDS)
        await one.put_token("t1", b"v", 60, ALICE, (10, 100))
        assert await other.find_session("a1", BOUNDS.idle_s) is None
        assert await other.use_token("t1", b"v") is None
        async with one.subscribe("news") as inbox:
            assert await other.publish("news", b"elsewhere") is False
            assert await one.publish("news", b"here") is True
            assert await next_message(inbox) == b"here"
    finally:
        for app in apps:
            await app.aclose()


# -- Redis's clock, and keys that expire on their own ------------------------------------------


async def test_without_a_clock_idle_time_runs_on_redis_own_clock(redis_stores: Stores) -> None:
    store = redis_stores.make()
    short = SessionBounds(idle_s=0.2, max_sessions=10, max_per_owner=10)
    await store.open_session(record("a1"), short)
    assert await store.find_session("a1", short.idle_s) is not None
    await anyio.sleep(0.3)  # lets Redis's clock pass the idle time: there is no other clock to move
    assert await store.find_session("a1", short.idle_s) is None


async def test_redis_forgets_every_record_on_its_own_once_nothing_renews_it(redis_stores: Stores) -> None:
    store = redis_stores.make()
    short = SessionBounds(idle_s=0.2, max_sessions=10, max_per_owner=10)
    await store.open_session(record("a1"), short)
    stream = await store.start_stream("a1", 8)
    assert stream is not None
    await store.append_event("a1", stream, b"event", LogBounds(10, 1000, 10_000))
    await store.complete_stream("a1", stream)
    await store.put_token("t1", b"v", 0.2, ALICE, (10, 100))
    await store.claim("listen/a1", "holder", 0.2)
    await store.take_slots([("streams", 5)], "holder", 0.2)
    assert await redis_stores.redis_keys() != {}
    await anyio.sleep(0.4)  # lets Redis's clock pass every time to live: no process renews them
    assert await redis_stores.redis_keys() == {}


# -- atomic steps ------------------------------------------------------------------------------


async def test_concurrent_uses_of_one_token_let_exactly_one_through(redis_stores: Stores) -> None:
    stores = [redis_stores.make() for _ in range(5)]  # five processes, ten callers each
    await stores[0].put_token("t1", b"value", 60, ALICE, (10, 100))
    found: list[bytes | None] = []

    async def use(index: int) -> None:
        found.append(await stores[index % len(stores)].use_token("t1", b"value"))

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            for index in range(50):
                group.start_soon(use, index)
    assert sorted(found, key=lambda value: value == USED) == [b"value"] + [USED] * 49


async def test_concurrent_claims_of_one_name_have_one_holder(redis_stores: Stores) -> None:
    store = redis_stores.make()
    won: list[str] = []

    async def claim(holder: str) -> None:
        if await store.claim("listen/a1", holder, 60):
            won.append(holder)

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(claim, f"holder-{index}")
    assert len(won) == 1


async def test_concurrent_slot_takers_never_exceed_the_limit(redis_stores: Stores) -> None:
    store = redis_stores.make()
    taken: list[str] = []

    async def take(holder: str) -> None:
        if await store.take_slots([("streams", 3)], holder, 60) is None:
            taken.append(holder)

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(take, f"holder-{index}")
    assert len(taken) == 3


# -- publish/subscribe -------------------------------------------------------------------------


async def test_a_message_published_in_one_process_reaches_a_listener_in_another(redis_stores: Stores) -> None:
    listening, publishing = redis_stores.make(), redis_stores.make()
    async with listening.subscribe("reply/a1/1") as inbox:
        assert await publishing.publish("reply/a1/1", b"answer") is True
        assert await next_message(inbox) == b"answer"


async def test_publishing_says_whether_anyone_listens_in_any_process(redis_stores: Stores) -> None:
    listening, publishing = redis_stores.make(), redis_stores.make()
    assert await publishing.publish("ended/a1", b"") is False
    async with listening.subscribe("ended/a1"):
        assert await publishing.publish("ended/a1", b"") is True
    assert await publishing.publish("ended/a1", b"") is False  # the last listener unsubscribed


async def test_a_subscription_is_confirmed_before_its_context_opens(redis_stores: Stores) -> None:
    listening, publishing = redis_stores.make(), redis_stores.make()
    for index in range(50):  # no wait between entering and publishing: Redis already took it
        async with listening.subscribe(f"reply/a1/{index}") as inbox:
            assert await publishing.publish(f"reply/a1/{index}", b"answer") is True
            assert await next_message(inbox) == b"answer"


async def test_listeners_of_one_channel_share_its_subscription_until_the_last_leaves(redis_stores: Stores) -> None:
    listening, publishing = redis_stores.make(), redis_stores.make()
    async with listening.subscribe("wake/a1/1") as staying:
        async with listening.subscribe("wake/a1/1") as leaving:
            assert await publishing.publish("wake/a1/1", b"both") is True
            assert await next_message(leaving) == b"both"
        assert await publishing.publish("wake/a1/1", b"one") is True
        assert await next_message(staying) == b"both"
        assert await next_message(staying) == b"one"
    assert await publishing.publish("wake/a1/1", b"none") is False


async def test_a_listener_that_does_not_read_loses_messages_and_holds_up_nobody(redis_stores: Stores) -> None:
    listening, publishing = redis_stores.make(), redis_stores.make()
    async with listening.subscribe("wake/a1/1") as reading, listening.subscribe("wake/a1/1") as idle:
        for index in range(20):
            await publishing.publish("wake/a1/1", str(index).encode())
            assert await next_message(reading) == str(index).encode()
        assert isinstance(idle, MemoryObjectReceiveStream)
        assert [idle.receive_nowait() for _ in range(16)] == [str(index).encode() for index in range(16)]
        with pytest.raises(anyio.WouldBlock):
            idle.receive_nowait()  # the 17th and later were lost to the full inbox


async def test_a_thousand_subscriptions_share_one_connection(redis_stores: Stores, redis_url: str) -> None:
    name = redis_stores.prefix + "listener"
    store = redis_stores.make(client_name=name)
    async with AsyncExitStack() as stack:
        for index in range(1000):
            await stack.enter_async_context(store.subscribe(f"wake/a{index}/1"))
        connections = [client for client in await clients(redis_url) if client["name"] == name]
        # One connection holds every subscription (and one more that keeps it subscribed); the
        # store has no other but the one its commands went through.
        assert sorted(int(client["sub"]) for client in connections) in ([1001], [0, 1001])


@pytest.mark.parametrize("retries", [0, 1], ids=["the-store-reconnects", "redis-py-reconnects"])
async def test_subscriptions_come_back_after_the_connection_drops(
    redis_stores: Stores, redis_url: str, retries: int
) -> None:
    # Without a retry, the read fails and the store makes a connection anew; with one, redis-py
    # reconnects within the read and subscribes again itself.
    name = redis_stores.prefix + "listener"
    retry = Retry(NoBackoff(), retries, supported_errors=(RedisConnectionError,))
    listening, publishing = redis_stores.make(retry=retry, client_name=name), redis_stores.make()
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with listening.subscribe("ended/a1") as inbox:
            named = [client for client in await clients(redis_url) if client["name"] == name]
            [pubsub] = [client for client in named if int(client["sub"]) > 0]
            await admin.client_kill_filter(_id=pubsub["id"])
            await publish_until_heard(publishing, inbox, "ended/a1")
    finally:
        await admin.aclose()


async def test_a_connection_that_stops_answering_is_made_anew(
    redis_stores: Stores, redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(redis_pubsub, "HEARTBEAT_S", 0.1)
    listening, publishing = redis_stores.make(), redis_stores.make()
    admin = redis.asyncio.Redis.from_url(redis_url)
    try:
        async with listening.subscribe("ended/a1") as inbox:
            await admin.execute_command("CLIENT", "PAUSE", 500, "ALL")  # Redis answers nobody for a while
            with anyio.fail_after(WAIT_S):
                while "no answer to a PING" not in caplog.text:
                    await anyio.sleep(0.02)  # polls the log: the reader says when it gave up
            await publish_until_heard(publishing, inbox, "ended/a1")
    finally:
        await admin.aclose()


# -- a Redis that is gone ----------------------------------------------------------------------


async def test_a_redis_that_is_gone_is_an_error_at_once() -> None:
    store = RedisStore.from_url(gone_redis_url())
    try:
        with anyio.fail_after(WAIT_S):
            with pytest.raises(StoreUnavailable):
                await store.find_session("a1", 60)
            with pytest.raises(StoreUnavailable):
                await store.publish("ended/a1", b"")
            with pytest.raises(StoreUnavailable):
                async with store.subscribe("ended/a1"):
                    pass  # pragma: no cover - never entered
    finally:
        await store.aclose()


def test_the_description_of_a_store_never_shows_a_password() -> None:
    assert repr(RedisStore.from_url("redis://user:hunter2@cache:6380/1")) == (
        "RedisStore(redis://user:***@cache:6380/1, prefix='fastapi-mcp-routes:')"
    )


# -- construction and import -------------------------------------------------------------------


async def test_the_url_is_kept_for_whoever_shares_the_redis(redis_url: str) -> None:
    made = RedisStore.from_url(redis_url)
    client = redis.asyncio.Redis.from_url(redis_url)
    given = RedisStore(client)
    try:
        assert made.url == redis_url
        assert given.url is None
        assert made.shared is True
    finally:
        await made.aclose()
        await given.aclose()
        await client.aclose()


def test_a_client_that_decodes_replies_is_refused(redis_url: str) -> None:
    with pytest.raises(ValueError, match="decode_responses=True"):
        RedisStore(redis.asyncio.Redis.from_url(redis_url, decode_responses=True))
    with pytest.raises(ValueError, match="prefix must not be empty"):
        RedisStore(redis.asyncio.Redis.from_url(redis_url), prefix="")


@pytest.mark.processes
def test_importing_the_package_does_not_import_redis() -> None:
    probe = "import sys, fastapi_mcp_routes; print('redis' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_without_redis_the_store_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # as if it were not installed
    monkeypatch.delitem(sys.modules, "fastapi_mcp_routes.store.redis.store")
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install 'fastapi-mcp-routes[redis]'")):
        _ = fastapi_mcp_routes.RedisStore
