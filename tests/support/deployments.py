"""What the processes of a deployment share (a secret, a Redis), and what one process alone
serves with."""

from __future__ import annotations

from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import Secret
from fastapi_mcp_routes.store.base import Store
from fastapi_mcp_routes.store.memory import MemoryStore

# A fixed test secret of 32+ bytes, shared by every process of a deployment.
SECRET = "workers-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz"


def deployment_env(redis_url: str = "", secret: str = SECRET) -> dict[str, str]:
    """What every process of a deployment gets: the shared secret (or none: a process of its
    own), and a Redis or none."""
    return {"FASTAPI_MCP_ROUTES_SECRET": secret, "FASTAPI_MCP_ROUTES_REDIS_URL": redis_url}


def one_process(store: Store | None = None) -> Deployment:
    """What a single process serves with: a random secret of its own, and a store (its memory)."""
    return Deployment(Secret.configure(None, {}), store or MemoryStore())
