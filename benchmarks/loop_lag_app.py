"""The app `loop_lag.py` serves: `uvicorn --factory loop_lag_app:create_app`.

The endpoint has a rate limit so generous that no request is refused, so every request counts
in Redis, and no store of sessions (the stateless endpoint: no other Redis traffic). Where the
budget lives is `LOOP_LAG_ARM`: `slowapi` installs the app's own slowapi `Limiter` on the Redis
at `LOOP_LAG_REDIS_URL` (the budget is kept in its storage); `store` gives the endpoint a
`RedisStore` from that URL. The library imported is whichever `PYTHONPATH` names first, so the
same app runs the code before and after a change.

Beside it, a probe of the event loop's lag: a task that sleeps `PROBE_S` again and again and
keeps how late each wake-up was, started by `POST /lag/reset` and read by `GET /lag`; and a
plain route, `GET /plain`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import time
from typing import Any, Final

from fastapi import FastAPI

import fastapi_mcp_routes
from fastapi_mcp_routes import Limits, RedisStore, mcp_routes, mcp_tool

PROBE_S: Final = 0.005  # how long the probe sleeps: its lateness is the loop's lag
GENEROUS: Final = "1000000/minute"  # counted, never refused


class LagProbe:
    """How late the loop wakes a sleeping task: a loop held by a blocking call wakes it late."""

    def __init__(self) -> None:
        self.lags_s: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def reset(self) -> None:
        self.lags_s = []
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            self.lags_s.append(time.perf_counter() - started - PROBE_S)

    def report(self) -> dict[str, Any]:
        lags = sorted(self.lags_s) or [0.0]
        return {
            "samples": len(self.lags_s),
            "p50_ms": statistics.median(lags) * 1000,
            "p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
            "max_ms": lags[-1] * 1000,
            "library": fastapi_mcp_routes.__file__,
        }


def create_app() -> FastAPI:
    redis_url = os.environ["LOOP_LAG_REDIS_URL"]
    arm = os.environ["LOOP_LAG_ARM"]
    app = FastAPI(title="Loop lag")
    options: dict[str, Any] = {"sessions": False, "limits": Limits(rate_limit=GENEROUS)}
    if arm == "slowapi":
        from slowapi import Limiter
        from slowapi.util import get_remote_address

        # A storage prefix of its own: the servers of one run share a Redis, and each counts alone.
        storage = {"key_prefix": f"bench-{secrets.token_hex(4)}"}
        app.state.limiter = Limiter(key_func=get_remote_address, storage_uri=redis_url, storage_options=storage)
    elif arm == "store":
        options |= {"store": RedisStore.from_url(redis_url, prefix=f"bench-{secrets.token_hex(4)}:")}
        options |= {"secret": secrets.token_hex(32)}
    else:
        raise ValueError(f"LOOP_LAG_ARM must be slowapi or store, got {arm!r}")
    app.include_router(mcp_routes(app, **options))
    probe = LagProbe()

    @mcp_tool()
    @app.get("/echo")
    def echo(text: str) -> dict[str, str]:
        return {"text": text}

    @app.get("/plain")
    async def plain() -> dict[str, bool]:
        return {"plain": True}

    @app.post("/lag/reset")
    async def reset() -> dict[str, bool]:
        probe.reset()
        return {"reset": True}

    @app.get("/lag")
    async def lag() -> dict[str, Any]:
        return probe.report()

    return app
