"""Fixtures shared by every test module; the helpers they use live in `tests/helpers.py`."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
