"""The stores a test runs on, made and closed together: in memory, or on a real Redis."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import redis.asyncio

from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.redis import RedisStore


class Stores:
    """Makes the stores of one test, all of one kind, and closes them: `MemoryStore`s, or
    `RedisStore`s on the Redis at `redis_url` under a prefix of the test's own."""

    def __init__(self, redis_url: str | None = None) -> None:
        self.redis_url = redis_url
        self.prefix = f"test-{secrets.token_hex(6)}:"
        self._made: list[Store] = []

    def make(self, clock: Callable[[], float] | None = None, **options: Any) -> Store:
        """A new store. RedisStores of one test share what they hold, as two processes on one
        Redis would (`options` go to their client); MemoryStores share nothing."""
        store: Store
        if self.redis_url is None:
            store = MemoryStore() if clock is None else MemoryStore(clock)
        else:
            store = RedisStore.from_url(self.redis_url, prefix=self.prefix, clock=clock, **options)
        self._made.append(store)
        return store

    async def redis_keys(self) -> dict[str, dict[str, str] | None]:
        """Every key the RedisStores of this test hold (without the prefix), with its fields
        when it is a hash: what is left in Redis."""
        assert self.redis_url is not None
        client = redis.asyncio.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            held: dict[str, dict[str, str] | None] = {}
            for key in await client.keys(self.prefix + "*"):
                fields = await client.hgetall(key) if await client.type(key) == "hash" else None
                held[key.removeprefix(self.prefix)] = fields
            return held
        finally:
            await client.aclose()

    async def aclose(self) -> None:
        for store in self._made:
            await store.aclose()
