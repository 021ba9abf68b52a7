"""Fixtures shared by every test module; the helpers they use live in `tests/helpers.py`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import redis_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A Redis server of the test run's own (see `redis_server`); a run without one fails, never skips."""
    with redis_server() as url:
        yield url
