"""The `Store` contract (fastapi_mcp_routes/store/testing.py) run on `RedisStore` over a
Sentinel-managed primary: a client made with `Sentinel(...).master_for(...)`, as a team with
Sentinel passes it to `RedisStore(...)`, against a real primary, replica and three sentinels
(tests/support/sentinel.py)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
import redis.asyncio

from fastapi_mcp_routes.store import Store
from fastapi_mcp_routes.store.redis.store import RedisStore
from fastapi_mcp_routes.store.testing import MakeStore, StoreContract
from tests.support.sentinel import SentinelDeployment, primary_client, sentinel_deployment, sentinel_missing

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
