"""`ChangeFeed`: listeners wait for a value to move, one of them looking for all, in process."""

from __future__ import annotations

import anyio
import pytest
from anyio import wait_all_tasks_blocked

from fastapi_mcp_routes.server.changes import ChangeFeed
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio


class Value:
    """A value that moves when a test says so, counting the looks at it."""

    def __init__(self) -> None:
        self.now = 1
        self.looks = 0

    def __call__(self) -> int:
        self.looks += 1
        return self.now


async def test_every_waiter_wakes_when_the_value_moves() -> None:
    value = Value()
    feed = ChangeFeed(value, interval_s=0.01)
    seen = feed.now()
    woke: list[int] = []

    async def wait() -> None:
        woke.append(await feed.after(seen))

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tasks:
            for _ in range(3):
                tasks.start_soon(wait)
            await wait_all_tasks_blocked()
            value.now = 2
    assert woke == [2, 2, 2]


async def test_a_value_read_anyway_wakes_the_waiters_without_a_look() -> None:
    value = Value()
    feed = ChangeFeed(value, interval_s=3600)  # no look comes within the test
    seen = feed.now()
    woke: list[int] = []

    async def wait() -> None:
        woke.append(await feed.after(seen))

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait)
            tasks.start_soon(wait)
            await wait_all_tasks_blocked()
            feed.note(2)  # as a tools/list that rebuilt the table would
    assert woke == [2, 2]
    assert value.looks == 1  # only `now()`


async def test_a_waiter_that_saw_an_older_value_returns_at_once() -> None:
    value = Value()
    feed = ChangeFeed(value, interval_s=3600)
    old = feed.now()
    value.now = 5
    feed.now()
    with anyio.fail_after(WAIT_S):
        assert await feed.after(old) == 5


async def test_when_the_waiter_that_looks_leaves_another_looks_in_its_place() -> None:
    value = Value()
    feed = ChangeFeed(value, interval_s=0.01)
    seen = feed.now()
    woke: list[int] = []

    async def wait() -> None:
        woke.append(await feed.after(seen))

    first = anyio.CancelScope()

    async def wait_until_cancelled() -> None:
        with first:
            await feed.after(seen)

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(wait_until_cancelled)
            await wait_all_tasks_blocked()  # the first waiter looks
            tasks.start_soon(wait)
            await wait_all_tasks_blocked()  # the second waits for the first
            first.cancel()  # the first leaves before the value moves
            await wait_all_tasks_blocked()
            value.now = 2  # only a look finds this: someone must still be looking
    assert woke == [2]
