"""The `Store` contract (fastapi_mcp_routes/store/testing.py) run on both stores of the package:
`MemoryStore`, and `RedisStore` on a real redis-server and on a real Redis Cluster, with
redis-py's clients and valkey-py's, each test under a prefix of its own."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable

import pytest
import valkey.asyncio

from fastapi_mcp_routes.store import MemoryStore, Store
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.store.testing import MakeStore, StoreContract
from tests.support.cluster import RedisCluster


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def make_store(self) -> MakeStore:
        def make(clock: Callable[[], float] | None = None) -> Store:
            return MemoryStore() if clock is None else MemoryStore(clock)

        return make


@pytest.mark.redis
class TestRedisStore(StoreContract):
    @pytest.fixture
    def make_store(self, redis_url: str) -> MakeStore:
        prefix = f"test-{secrets.token_hex(6)}:"

        def make(clock: Callable[[], float] | None = None) -> Store:
            return RedisStore.from_url(redis_url, prefix=prefix, clock=clock)

        return make


@pytest.mark.redis
class TestRedisStoreOnACluster(StoreContract):
    @pytest.fixture
    def make_store(self, cluster: RedisCluster) -> MakeStore:
        prefix = f"test-{secrets.token_hex(6)}:"

        def make(clock: Callable[[], float] | None = None) -> Store:
            return RedisStore.from_url(cluster.store_url, prefix=prefix, clock=clock)

        return make


@pytest.mark.redis
class TestRedisStoreWithAValkeyClient(StoreContract):
    @pytest.fixture
    async def make_store(self, redis_url: str) -> AsyncIterator[MakeStore]:
        prefix = f"test-{secrets.token_hex(6)}:"
        clients: list[valkey.asyncio.Valkey] = []

        def make(clock: Callable[[], float] | None = None) -> Store:
            clients.append(valkey.asyncio.Valkey.from_url(redis_url.replace("redis://", "valkey://")))
            return RedisStore(clients[-1], prefix=prefix, clock=clock)

        yield make
        for client in clients:
            await client.aclose()


@pytest.mark.redis
class TestRedisStoreWithAValkeyClusterClient(StoreContract):
    @pytest.fixture
    async def make_store(self, cluster: RedisCluster) -> AsyncIterator[MakeStore]:
        prefix = f"test-{secrets.token_hex(6)}:"
        clients: list[valkey.asyncio.ValkeyCluster] = []

        def make(clock: Callable[[], float] | None = None) -> Store:
            clients.append(valkey.asyncio.ValkeyCluster.from_url(cluster.url.replace("redis://", "valkey://")))
            return RedisStore(clients[-1], prefix=prefix, clock=clock)

        yield make
        for client in clients:
            await client.aclose()
