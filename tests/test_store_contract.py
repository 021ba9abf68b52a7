"""The `Store` contract (fastapi_mcp_routes/store/testing.py) run on both stores of the package:
`MemoryStore`, and `RedisStore` on a real redis-server, each test under a prefix of its own."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest

from fastapi_mcp_routes.store import MemoryStore, Store
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.store.testing import MakeStore, StoreContract


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
