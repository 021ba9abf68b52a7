"""The app `jwt_auth.py` serves: one route behind a `JWTBearer`, also a tool on an endpoint that
the same bearer guards, and the same route with no token at all.

uvicorn loads it with `--factory jwt_app:create_app`. The environment names the public key to
verify with (`KEY_ENV`, a PEM file) and, for the python-jose arm, the file of a module that
defines the `JWTBearer` to use instead of the library's (`BEARER_MODULE_ENV`): the class as it
was before PyJWT replaced python-jose, run by an interpreter that has python-jose.

A tool call verifies the token twice, as a deployment that guards both does: once at `/mcp`
(`mcp_routes(auth=...)`), once more at the route (`Security(bearer)`), which the call reaches
through the app with the caller's credentials. A REST call verifies it once.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Final

from fastapi import FastAPI, Query, Security
from fastapi.security import SecurityScopes
from peer_app import Item, ItemId
from starlette.requests import Request

from fastapi_mcp_routes import JWTBearer, ToolCalls, auth_guard, mcp_routes, mcp_tool

KEY_ENV: Final = "FMR_BENCH_JWT_PUBLIC_KEY"
BEARER_MODULE_ENV: Final = "FMR_BENCH_JWT_BEARER_MODULE"
ISSUER: Final = "https://issuer.bench"
AUDIENCE: Final = "http://127.0.0.1/mcp"
SCOPE: Final = "items:read"


def bearer_class() -> Any:
    """The library's `JWTBearer`, or the one in the module file the environment names."""
    path = os.environ.get(BEARER_MODULE_ENV)
    if not path:
        return JWTBearer
    spec = importlib.util.spec_from_file_location("jose_jwt_bearer", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"{BEARER_MODULE_ENV} names no loadable module: {path!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.JWTBearer


def make_bearer() -> Any:
    return bearer_class()(issuer=ISSUER, audience=AUDIENCE, key=Path(os.environ[KEY_ENV]).read_text())


def verification_cpu_us(token: str, count: int) -> float:
    """CPU per verification of `token` by the bearer alone, called as FastAPI calls it, in this
    process: no HTTP, no route."""
    bearer = make_bearer()
    scope = {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())]}
    request, scopes = Request(scope), SecurityScopes([SCOPE])

    async def verify_all() -> None:
        for _ in range(count):
            await bearer(request, scopes)

    asyncio.run(verify_all())  # once to warm up: imports, the key
    started = time.process_time()
    asyncio.run(verify_all())
    return (time.process_time() - started) / count * 1e6


def create_app() -> FastAPI:
    bearer = make_bearer()
    auth_guard(bearer)  # as the library treats its own JWTBearer (the listing only)
    app = FastAPI(title="JWT benchmark", version="1.0.0")
    calls = ToolCalls(require_confirmation_for_mutations=False)
    app.include_router(mcp_routes(app, auth=bearer, tool_calls=calls))

    # The bearer is a local object, so a default rather than Annotated: string annotations
    # (from __future__) could not name it.
    @app.get("/items/{item_id}", response_model=Item)
    @mcp_tool()
    async def get_item(
        item_id: ItemId,
        q: Annotated[str | None, Query(max_length=50)] = None,
        principal: Any = Security(bearer, scopes=[SCOPE]),  # noqa: B008
    ) -> Item:
        """Fetch one item by id, for a caller whose token carries items:read."""
        return Item(id=item_id, name=f"item {item_id}", q=q, price=9.5, tags=["bench", "get"])

    @app.get("/open/items/{item_id}", response_model=Item)
    async def get_open_item(item_id: ItemId, q: Annotated[str | None, Query(max_length=50)] = None) -> Item:
        """The same route with no token: the floor the verification adds to."""
        return Item(id=item_id, name=f"item {item_id}", q=q, price=9.5, tags=["bench", "get"])

    return app
