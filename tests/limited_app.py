"""The app the rate limit's multi-process test serves: `python -m uvicorn tests.limited_app:app`.

Imported by each uvicorn process (run from the project's root), never by a test module. Its
store is built from a client the app made itself (not from a URL), on the Redis that
`LIMITED_APP_REDIS_URL` names, under the prefix `LIMITED_APP_PREFIX`; the endpoint's budget is
`LIMITED_APP_RATE`.
"""

from __future__ import annotations

import os

import redis.asyncio
from fastapi import FastAPI

from fastapi_mcp_routes import Limits, RedisStore, mcp_routes

client = redis.asyncio.Redis.from_url(os.environ["LIMITED_APP_REDIS_URL"])
store = RedisStore(client, prefix=os.environ["LIMITED_APP_PREFIX"])

app = FastAPI(title="Limited")
app.include_router(mcp_routes(app, store=store, limits=Limits(rate_limit=os.environ["LIMITED_APP_RATE"])))
