"""The endpoint's own rate limit: a budget per caller for every request to `/mcp`.

A tool call costs more than a plain request (it runs the route and the protocol around it),
so an exposed deployment should cap the endpoint itself. The budget is kept by the `limits`
library (slowapi's engine), in the first of:

- the app's slowapi `Limiter` storage when one is installed (`app.state.limiter`, e.g. Redis
  shared by replicas): one budget with whatever else counts there;
- the store's Redis when the store has one (`RedisStore`, however it was built: from a URL, a
  client, a Sentinel-managed primary or a Cluster client), so every process counts one budget;
- this process's memory.

The caller is its principal when `auth` knows one, else its IP address. Routes' own slowapi
limits still apply to tool calls, keyed by the same IP, which the tool request inherits.

Nothing here waits on a network with the event loop held: the store's Redis is counted through
`limits.aio` on the store's own connections, and slowapi's storage, which is synchronous, is
counted in a worker thread (memory, which does no I/O, is counted in place). A thread rather
than an asyncio twin of slowapi's storage: the very storage object slowapi counts in, so the
budget is one whatever storage the app chose (Redis, Sentinel, Cluster, memcached, MongoDB) and
whatever options it was built with, where a twin would have to rebuild a client from options
slowapi keeps private. benchmarks/loop_lag.py shows the loop's lag under a limited flood.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from typing import Any, Final, Literal

import anyio
import anyio.to_thread
from fastapi import FastAPI
from limits import RateLimitItem, parse
from limits.aio.storage import RedisClusterStorage as AsyncRedisClusterStorage
from limits.aio.storage import RedisStorage as AsyncRedisStorage
from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
from limits.aio.strategies import RateLimiter as AsyncRateLimiter
from limits.errors import StorageError
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter, RateLimiter
from starlette.requests import Request

from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import HttpError, InvalidRequest, StoreUnavailable

logger = logging.getLogger("fastapi_mcp_routes")

_NAMESPACE: Final = "fastapi_mcp_routes.endpoint"
# Put after the store's prefix, so the counters sit with the store's keys (several apps can
# share one Redis) and a scan of the prefix finds them.
_KEY_SUFFIX: Final = "limits"
# At most this many requests wait on slowapi's storage at once, each in a thread of its own;
# more wait their turn without holding a thread, and none holds the event loop. A bound of
# our own, so a slow storage cannot take the threads that the app's sync routes run in.
STORAGE_THREADS: Final = 16
# Python client libraries whose asyncio clients `limits.aio` drives (its `implementation`).
_IMPLEMENTATIONS: Final[dict[str, Literal["redispy", "valkey"]]] = {"redis": "redispy", "valkey": "valkey"}


class EndpointRateLimit:
    """Counts requests per caller and refuses those over budget with 429 and Retry-After."""

    def __init__(self, app: FastAPI, spec: str, redis: Any = None, prefix: str = "") -> None:
        """`redis`: the store's asyncio client (redis-py or valkey: plain, Sentinel-managed or
        Cluster), whose Redis keeps the budget; `prefix`: the store's key prefix."""
        try:
            self._item: RateLimitItem = parse(spec)
        except ValueError:
            raise ValueError(f"rate_limit must be slowapi syntax such as '120/minute', got {spec!r}") from None
        self._app = app
        self._own: RateLimiter | None = None
        self._shared: AsyncRateLimiter | None = None
        self._threads = anyio.CapacityLimiter(STORAGE_THREADS)
        if redis is not None:
            storage = store_storage(redis, f"{prefix}{_KEY_SUFFIX}")
            if storage is not None:
                self._shared = AsyncMovingWindow(storage)

    async def check(self, request: Request) -> None:
        key = _caller_key(request)
        installed = self._installed()
        if installed is not None:
            reset = await self._installed_check(installed, key)
        elif self._shared is not None:
            reset = await self._shared_check(self._shared, key)
        else:
            reset = _count(self._memory(), self._item, key)
        if reset is None:
            return
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
        except (StorageError, OSError) as error:  # the storage wraps its client's errors
            raise StoreUnavailable(str(error)) from error

    async def _installed_check(self, strategy: RateLimiter, key: str) -> float | None:
        """Count a request in slowapi's storage, off the event loop unless it is memory. A
        storage that cannot be reached is answered as the store's outage would be (503)."""
        storage = strategy.storage
        if isinstance(storage, MemoryStorage):
            return _count(strategy, self._item, key)
        outages: tuple[type[Exception], ...] = (StorageError, OSError, *_exceptions_of(storage))
        try:
            return await anyio.to_thread.run_sync(_count, strategy, self._item, key, limiter=self._threads)
        except outages as error:
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


def _count(strategy: RateLimiter, item: RateLimitItem, key: str) -> float | None:
    """Count a request with a synchronous strategy: `None` within budget, else when the window
    resets."""
    if strategy.hit(item, _NAMESPACE, key):
        return None
    return strategy.get_window_stats(item, _NAMESPACE, key).reset_time


def _exceptions_of(storage: Any) -> tuple[type[Exception], ...]:
    """What a storage's client raises when its server cannot be reached (redis-py's
    `RedisError`, pymemcache's...), which `limits` passes on unwrapped unless told otherwise."""
    try:
        found = storage.base_exceptions
    except Exception:  # a storage without the property, or whose client is not installed
        return ()
    return found if isinstance(found, tuple) else (found,)


def store_storage(client: Any, key_prefix: str) -> AsyncRedisStorage | None:
    """A `limits.aio` storage on the Redis that `client` reaches, under `key_prefix`; `None`,
    said in a log line, for a client `limits` cannot be given.

    A plain or Sentinel-managed client lends its connection pool, so the counters go through
    the store's own connections, with its TLS, credentials and timeouts, and follow a failover
    as the store does. A Cluster client has no one pool: `limits` builds a Cluster client of its
    own on the same startup nodes with the same connection options (TLS included)."""
    # The library whose client class this is, or whose class the app's own client class extends.
    roots = (kind.__module__.partition(".")[0] for kind in type(client).__mro__)
    library = next((root for root in roots if root in _IMPLEMENTATIONS), "")
    try:
        if not library:
            raise TypeError(f"{type(client).__qualname__} is not a redis-py or valkey asyncio client")
        implementation = _IMPLEMENTATIONS[library]
        if hasattr(client, "connection_pool"):
            return AsyncRedisStorage(
                f"async+{library}://",
                implementation=implementation,
                key_prefix=key_prefix,
                wrap_exceptions=True,
                connection_pool=client.connection_pool,
            )
        if hasattr(client, "nodes_manager"):
            nodes = ",".join(f"{node.host}:{node.port}" for node in client.nodes_manager.startup_nodes.values())
            return AsyncRedisClusterStorage(
                f"async+{library}+cluster://{nodes}",
                implementation=implementation,
                key_prefix=key_prefix,
                wrap_exceptions=True,
                **_cluster_options(client),
            )
        raise TypeError(f"{type(client).__qualname__} has neither a connection pool nor cluster nodes")
    except Exception as error:  # whatever `limits` refuses: counted in memory, and said so
        logger.warning(
            "the endpoint's rate limit counts in this process's memory, one budget per process: "
            "the store's Redis client cannot be handed to the limits library (%s)",
            error,
        )
        return None


def _cluster_options(client: Any) -> dict[str, Any]:
    """The keyword arguments that build a Cluster client connecting as `client` does: its
    connection options, under the names the client's constructor takes them by."""
    kwargs: dict[str, Any] = dict(client.connection_kwargs)
    accepted = inspect.signature(type(client)).parameters
    options = {name: value for name, value in kwargs.items() if name in accepted and value is not None}
    connection_class = kwargs.get("connection_class")
    if connection_class is not None and "SSL" in connection_class.__name__:
        options["ssl"] = True  # its constructor takes TLS as a flag and picks the class itself
    return options


def _caller_key(request: Request) -> str:
    principal: Any = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
    subject = getattr(principal, "subject", None) if principal is not None else None
    if subject is not None:
        return f"principal:{subject}"
    client = request.scope.get("client")
    return f"ip:{client[0] if client else 'unknown'}"
