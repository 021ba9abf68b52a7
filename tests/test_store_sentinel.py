"""`RedisStore` over a Sentinel-managed primary: a client made with `Sentinel(...).master_for(...)`,
as a team with Sentinel passes it to `RedisStore(...)`, against a real primary, replica and three
sentinels (tests/support/sentinel.py). The `Store` contract (fastapi_mcp_routes/store/testing.py)
holds there; when the primary is killed, each call fails fast with `StoreUnavailable` until the
sentinels promote the replica, then finds what the replica had, and a subscription hears again.
What a failover does to an app's requests: test_failover.py."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Iterator

import anyio
import pytest
import redis.asyncio
from anyio.streams.memory import MemoryObjectReceiveStream

from fastapi_mcp_routes.store import Store
from fastapi_mcp_routes.store.base import SessionBounds, SessionRecord
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.store.testing import MakeStore, StoreContract
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from tests.support.sentinel import SentinelDeployment, primary_client, sentinel_deployment, sentinel_missing
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.redis, pytest.mark.processes]


@pytest.fixture(scope="module")
def deployment() -> Iterator[SentinelDeployment]:
    """One primary, its replica and three sentinels for the module; the run fails, never skips,
    without them."""
    missing = sentinel_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with sentinel_deployment() as running:
        yield running


class TestSentinelStore(StoreContract):
    @pytest.fixture
    async def make_store(self, deployment: SentinelDeployment) -> AsyncIterator[MakeStore]:
        prefix = f"test-{secrets.token_hex(6)}:"
        clients: list[redis.asyncio.Redis] = []

        def make(clock: Callable[[], float] | None = None) -> Store:
            clients.append(primary_client(deployment.sentinels))
            return RedisStore(clients[-1], prefix=prefix, clock=clock)

        yield make
        for client in clients:  # the store leaves a client it was given open
            await client.aclose()


# -- a failover, as the store sees it ----------------------------------------------------------


@pytest.fixture
def own_deployment() -> Iterator[SentinelDeployment]:
    """A deployment of the test's own: it kills the primary."""
    missing = sentinel_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with sentinel_deployment() as running:
        yield running


async def replicated(client: redis.asyncio.Redis) -> None:
    """Returns once the replica has every write the primary took so far: a write, then `WAIT`
    on the same connection."""
    async with client.pipeline(transaction=False) as pipeline:
        pipeline.set("sentinel-test:mark", b"1")
        pipeline.wait(1, round(WAIT_S * 1000))
        _, replicas = await pipeline.execute()
    assert replicas == 1


async def heard(store: Store, inbox: MemoryObjectReceiveStream[bytes], topic: str) -> None:
    """Publish on `topic` until `inbox` hears it (one published while the subscription is made
    anew is lost) or the store is out of reach: each try fails fast, or is heard."""
    with anyio.fail_after(WAIT_S):
        while True:
            with contextlib.suppress(StoreUnavailable):
                await store.publish(topic, b"news")
            with anyio.move_on_after(0.1):
                assert await inbox.receive() == b"news"
                return


@pytest.mark.anyio
async def test_a_killed_primary_fails_calls_fast_until_the_store_finds_the_promoted_replica(
    own_deployment: SentinelDeployment,
) -> None:
    client = primary_client(own_deployment.sentinels)
    store = RedisStore(client, prefix=f"test-{secrets.token_hex(6)}:")
    session = SessionRecord("a1", b"alice", "2025-11-25", client_info={"name": "c", "version": "1"})
    try:
        await store.open_session(session, SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10))
        await replicated(client)
        async with store.subscribe("news") as inbox:
            await heard(store, inbox, "news")
            await anyio.to_thread.run_sync(own_deployment.kill_primary)
            with anyio.fail_after(WAIT_S):
                while True:  # each call fails fast, as StoreUnavailable, or finds the new primary
                    try:
                        found = await store.find_session("a1", 60.0)
                        break
                    except StoreUnavailable:
                        await anyio.sleep(0.05)
            assert found == session
            await heard(store, inbox, "news")  # the subscription is on the new primary too
    finally:
        await store.aclose()
        await client.aclose()
