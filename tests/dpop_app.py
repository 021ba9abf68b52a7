"""A route that takes DPoP-bound tokens only, served by processes of their own: the issuer's
public key (`DPOP_APP_ISSUER_KEY`, PEM), and the Redis where proofs' jti are kept
(`FASTAPI_MCP_ROUTES_REDIS_URL`, under the prefix `DPOP_APP_PREFIX`) come from the environment;
without a Redis, each process keeps them in its own memory."""

from __future__ import annotations

import os
from typing import Any

from fastapi import Depends, FastAPI

from fastapi_mcp_routes import JWTBearer, Principal, Store
from fastapi_mcp_routes.store import MemoryStore
from tests.support.jwt import AUDIENCE, ISSUER


def proofs_store() -> Store:
    url = os.environ.get("FASTAPI_MCP_ROUTES_REDIS_URL")
    if not url:
        return MemoryStore()
    from fastapi_mcp_routes import RedisStore

    return RedisStore.from_url(url, prefix=os.environ["DPOP_APP_PREFIX"])


bearer = JWTBearer(
    issuer=ISSUER, audience=AUDIENCE, key=os.environ["DPOP_APP_ISSUER_KEY"], dpop="required", dpop_store=proofs_store()
)
app = FastAPI()


@app.get("/me")
def me(principal: Principal = Depends(bearer)) -> dict[str, Any]:  # noqa: B008
    return {"sub": principal.subject}
