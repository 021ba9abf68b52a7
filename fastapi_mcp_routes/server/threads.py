"""Threads for sync routes called over MCP: per caller and in all, below the thread pool's size.

FastAPI runs a `def` route in anyio's thread pool, which REST's sync routes share (40 threads by
default). A call of such a route over MCP takes a thread share here first: one of its caller's
(`Limits.max_threads_per_caller`) and one of everyone's (`Limits.max_threads`, of which callers
trusted less hold only their share, `trust_shares`), so no caller, nor every MCP caller
together, can take the threads REST needs.

A call past a share waits for a thread rather than being refused: an agent's burst of parallel
calls is served in turn, as REST requests queue for the pool, while what waits holds only a
coroutine and its running call's slot (server/call_slots.py bounds those). A cancelled call
keeps its share until its thread returns: anyio does not end the wait for a thread before the
thread is done, so the share follows the thread, not the task or request that asked for it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Final, TypeVar

import anyio
import anyio.to_thread
from anyio.lowlevel import RunVar

from fastapi_mcp_routes.options import DEFAULT_MAX_THREADS, DEFAULT_MAX_THREADS_PER_CALLER
from fastapi_mcp_routes.store.base import Holder, Trust
from fastapi_mcp_routes.store.policy import trust_shares

logger = logging.getLogger("fastapi_mcp_routes")

# The part of a thread pool smaller than `max_threads` that MCP calls may take; REST keeps the rest.
_POOL_SHARE: Final = (3, 4)
_T = TypeVar("_T")


class _Loop:
    """The shares of one event loop (anyio's limiters and its thread pool each belong to one)."""

    __slots__ = ("callers", "pools")

    def __init__(self, pools: dict[Trust, anyio.CapacityLimiter]) -> None:
        self.pools = pools
        # Per caller holding or waiting for a thread: its limiter, and how many of its calls use it.
        self.callers: dict[bytes, tuple[anyio.CapacityLimiter, list[int]]] = {}


class ThreadShares:
    """Hands out thread shares to calls of sync routes, per caller and in all."""

    def __init__(self, *, per_caller: int = DEFAULT_MAX_THREADS_PER_CALLER, total: int = DEFAULT_MAX_THREADS) -> None:
        self._per_caller = per_caller
        self._total = total
        self._loop: RunVar[_Loop] = RunVar(f"fastapi_mcp_routes.threads.{id(self)}")

    @asynccontextmanager
    async def held(self, holder: Holder) -> AsyncIterator[None]:
        """Wait for a thread share of `holder`, hold it while inside."""
        loop = self._current()
        pools, callers = loop.pools, loop.callers
        mine = callers.get(holder.owner)
        if mine is None:
            mine = callers[holder.owner] = (anyio.CapacityLimiter(self._per_caller), [0])
        limiter, users = mine
        users[0] += 1
        try:
            async with AsyncExitStack() as held:
                # Narrowest first, in one order for everyone, so two waiters never wait on each other.
                await held.enter_async_context(limiter)
                for level, _ in reversed(trust_shares(self._total, holder.trust)):
                    await held.enter_async_context(pools[level])
                yield
        finally:
            users[0] -= 1
            if not users[0]:  # nobody of this caller holds or waits: its limiter goes
                del callers[holder.owner]

    async def run(self, holder: Holder, work: Callable[[], Awaitable[_T]]) -> _T:
        """`work`, once `holder` has a thread share."""
        async with self.held(holder):
            return await work()

    def _current(self) -> _Loop:
        try:
            return self._loop.get()
        except LookupError:
            loop = _Loop(self._pools())
            self._loop.set(loop)
            return loop

    def _pools(self) -> dict[Trust, anyio.CapacityLimiter]:
        pool = int(anyio.to_thread.current_default_thread_limiter().total_tokens)
        total = self._total
        if total >= pool:
            numerator, denominator = _POOL_SHARE
            total = max(1, pool * numerator // denominator)
            logger.warning(
                "Limits.max_threads (%d) is not below the thread pool's size (%d): sync routes called "
                "over MCP run in at most %d threads at once",
                self._total,
                pool,
                total,
            )
        return {level: anyio.CapacityLimiter(limit) for level, limit in trust_shares(total, Trust.ANONYMOUS)}
