"""The app the benchmark serves: two tool routes, N generated tool routes, and the MCP endpoint.

uvicorn loads it with `--factory bench_app:create_app`; a factory takes no arguments, so the
number of generated routes comes from the environment variable named by `EXTRA_ROUTES_ENV`, and
a Redis to share state through (`RedisStore`) from the one named by `REDIS_URL_ENV` (unset: the
default memory store). The secret, if any, is the library's own variable,
FASTAPI_MCP_ROUTES_SECRET.
The MCP router is included before the routes (tools are discovered lazily, so routes added after
the include are still tools); at startup the endpoint moves to the front of the route table
anyway. The generated routes sit after the two measured ones, so neither a REST call to
`/items/...` nor its tool call scans them.

Route bodies are `async def` and trivial, so what is measured is FastAPI plus this library,
not a thread pool hop or the work of a real handler.
"""

from __future__ import annotations

import os
from typing import Annotated, Final

from fastapi import FastAPI, Query, status
from peer_app import CreatedItem, Item, ItemId, ItemIn

from fastapi_mcp_routes import RedisStore, Telemetry, ToolCalls, mcp_routes, mcp_tool

EXTRA_ROUTES_ENV: Final = "FMR_BENCH_EXTRA_ROUTES"
DEFAULT_EXTRA_ROUTES: Final = 10
REDIS_URL_ENV: Final = "FMR_BENCH_REDIS_URL"


def create_app() -> FastAPI:
    """The benchmark app, with as many generated tool routes as the environment asks for, and
    its state in the Redis it names, if any."""
    raw = os.environ.get(EXTRA_ROUTES_ENV, str(DEFAULT_EXTRA_ROUTES))
    if not raw.isdigit():
        raise ValueError(f"{EXTRA_ROUTES_ENV} must be a non-negative whole number, got {raw!r}")
    return build_app(int(raw), os.environ.get(REDIS_URL_ENV) or None)


def build_app(extra_routes: int, redis_url: str | None = None, telemetry: Telemetry | None = None) -> FastAPI:
    """Two measured tool routes, `extra_routes` generated ones, and `/mcp`; with `redis_url`,
    the endpoint's state is kept in that Redis; `telemetry` as `mcp_routes` takes it."""
    app = FastAPI(title="Benchmark", version="1.0.0")
    store = None if redis_url is None else RedisStore.from_url(redis_url)
    # Confirmation off: what is measured is one call of the route, as the peers make it.
    calls = ToolCalls(require_confirmation_for_mutations=False)
    app.include_router(mcp_routes(app, tool_calls=calls, store=store, telemetry=telemetry))
    app.add_api_route("/items/{item_id}", get_item, methods=["GET"], response_model=Item, summary="Get an item")
    app.add_api_route(
        "/items",
        create_item,
        methods=["POST"],
        response_model=CreatedItem,
        status_code=status.HTTP_201_CREATED,
        summary="Create an item",
    )
    for index in range(extra_routes):
        app.add_api_route(
            f"/extra/{index}/{{item_id}}",
            get_extra,
            methods=["GET"],
            response_model=Item,
            name=f"extra_{index}",
            summary=f"Generated route {index}",
        )
    return app


@mcp_tool()
async def get_item(item_id: ItemId, q: Annotated[str | None, Query(max_length=50)] = None) -> Item:
    """Fetch one item by id; `q` is echoed back."""
    return Item(id=item_id, name=f"item {item_id}", q=q, price=9.5, tags=["bench", "get"])


@mcp_tool()
async def create_item(item: ItemIn) -> CreatedItem:
    """Create an item; the id is derived from the name so every call answers the same."""
    return CreatedItem(id=len(item.name), price_with_tax=round(item.price * 1.21, 2), **item.model_dump())


@mcp_tool()
async def get_extra(item_id: ItemId, q: Annotated[str | None, Query(max_length=50)] = None) -> Item:
    """A generated route: only there to grow the route table and the tool list."""
    return Item(id=item_id, name="extra", q=q, price=1.0, tags=[])
