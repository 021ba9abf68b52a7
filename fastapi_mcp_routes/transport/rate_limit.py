"""The endpoint's own rate limit: a budget per caller for every request to `/mcp`.

A tool call costs more than a plain request (it runs the route and the protocol around it),
so an exposed deployment should cap the endpoint itself. The budget is kept by the `limits`
library (slowapi's engine), in the app's slowapi `Limiter` storage when one is installed
(`app.state.limiter`, e.g. Redis shared by replicas), else in the endpoint's Redis when its
store is a `RedisStore` (so every process counts one budget), else in this process's memory. The caller is its
principal when `auth` knows one, else its IP address. Routes' own slowapi limits still apply
to tool calls, keyed by the same IP, which the tool request inherits.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

from fastapi import FastAPI
from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage as AsyncRedisStorage
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.aio.strategies import RateLimiter as AsyncRateLimiter
from limits.errors import StorageError
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter, RateLimiter
from starlette.requests import Request

from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import HttpError, InvalidRequest, StoreUnavailable

_NAMESPACE: Final = "fastapi_mcp_routes.endpoint"


class EndpointRateLimit:
    """Counts requests per caller and refuses those over budget with 429 and Retry-After."""

    def __init__(self, app: FastAPI, spec: str, redis_url: str | None = None) -> None:
        try:
            self._item: RateLimitItem = parse(spec)
        except ValueError:
            raise ValueError(f"rate_limit must be slowapi syntax such as '120/minute', got {spec!r}") from None
        self._app = app
        self._own: RateLimiter | None = None
        self._shared: AsyncRateLimiter | None = None
        # What a Redis that cannot be reached raises (redis is installed wherever a store is Redis).
        self._outages: tuple[type[Exception], ...] = ()
        if redis_url is not None:
            from redis.exceptions import RedisError

            storage = AsyncRedisStorage(_async_url(redis_url), implementation="redispy")
            self._shared = AsyncMovingWindow(storage)
            self._outages = (RedisError, OSError, StorageError)

    async def check(self, request: Request) -> None:
        key = _caller_key(request)
        installed = self._installed()
        if installed is None and self._shared is not None:
            # The store's Redis: the app installed no limiter of its own.
            reset = await self._shared_check(self._shared, key)
            if reset is None:
                return
        else:
            strategy = installed or self._memory()
            if strategy.hit(self._item, _NAMESPACE, key):
                return
            reset = strategy.get_window_stats(self._item, _NAMESPACE, key).reset_time
        retry_after = max(1, math.ceil(reset - time.time()))
        raise HttpError(
            429,
            InvalidRequest(f"Too Many Requests: the endpoint allows {self._item}; retry after {retry_after} seconds."),
            {"retry-after": str(retry_after)},
        )

    async def _shared_check(self, shared: AsyncRateLimiter, key: str) -> float | None:
        """Count a request in the store's Redis: `None` within budget, else when the window
        resets. A Redis that cannot be reached is the store's outage (`StoreUnavailable`, 503)."""
        try:
            if await shared.hit(self._item, _NAMESPACE, key):
                return None
            return (await shared.get_window_stats(self._item, _NAMESPACE, key)).reset_time
        except self._outages as error:
            raise StoreUnavailable(str(error)) from error

    def _installed(self) -> RateLimiter | None:
        """The strategy of the app's slowapi `Limiter`, when one is installed."""
        installed = getattr(self._app.state, "limiter", None)
        strategy = getattr(installed, "limiter", None)  # slowapi's public view of its engine
        return strategy if isinstance(strategy, RateLimiter) else None

    def _memory(self) -> RateLimiter:
        if self._own is None:
            self._own = MovingWindowRateLimiter(MemoryStorage())
        return self._own


def _caller_key(request: Request) -> str:
    principal: Any = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
    subject = getattr(principal, "subject", None) if principal is not None else None
    if subject is not None:
        return f"principal:{subject}"
    client = request.scope.get("client")
    return f"ip:{client[0] if client else 'unknown'}"


def _async_url(url: str) -> str:
    """The `limits` name of a Redis URL for its asyncio storage."""
    for scheme in ("redis://", "rediss://", "redis+unix://"):
        if url.startswith(scheme):
            return "async+" + url
    raise ValueError(f"the rate limit cannot keep its counters at {url!r}: a redis:// or rediss:// URL is needed")
