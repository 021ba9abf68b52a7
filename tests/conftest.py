"""Fixtures shared by every test module; what they use lives in `tests/support/`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from playwright.sync_api import Browser

from tests.support.browser import chromium, chromium_missing
from tests.support.cluster import RedisCluster, cluster_missing, redis_cluster
from tests.support.redis import redis_missing, redis_server
from tests.support.stores import Stores

# The fixtures that bring what a marker names: a test using one carries the marker, so that
# `-m "not redis and not browser"` leaves out every test that would need them.
MARKED_FIXTURES = {"redis_url": "redis", "redis_stores": "redis", "cluster": "redis", "browser": "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    unmarked = [
        f"{item.nodeid} uses the fixture {fixture} without @pytest.mark.{marker}"
        for item in items
        for fixture, marker in MARKED_FIXTURES.items()
        if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(marker) is None
    ]
    if unmarked:
        raise pytest.UsageError("A test that needs Redis or a browser says so by its marker:\n" + "\n".join(unmarked))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """One Redis for the whole run (see `redis_server`); the run fails, never skips, without one."""
    missing = redis_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def cluster() -> Iterator[RedisCluster]:
    """One Redis Cluster of three primaries for the whole run (see `redis_cluster`); the run
    fails, never skips, without redis-server and redis-cli. A test that stops a node starts a
    Cluster of its own."""
    missing = cluster_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with redis_cluster() as started:
        yield started


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    """The stores a contract test runs on, once of each kind: what the `Store` promises, every
    store keeps."""
    made = Stores(request.getfixturevalue("redis_url") if request.param == "redis" else None)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
async def redis_stores(redis_url: str) -> AsyncIterator[Stores]:
    """RedisStores for a test of what only Redis does, under a prefix of the test's own."""
    made = Stores(redis_url)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium for one module's tests (see `chromium`); the run fails, never skips,
    without one."""
    missing = chromium_missing()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    with chromium() as launched:
        yield launched
