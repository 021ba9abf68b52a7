"""`RedisStore`: the store every process serving the endpoint shares (the `redis` extra)."""

from fastapi_mcp_routes.store.redis.store import RedisStore

__all__ = ["RedisStore"]
