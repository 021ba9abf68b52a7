"""The app `rest_writes.py` serves three times: as a plain FastAPI app, with the MCP router, and
with the router but without its `ResourceWrites` middleware (and counts the Python calls of a
fourth, the router included after the app's routes, in process).

uvicorn loads it with `--factory writes_app:create_app`; the environment variable named by
`MCP_ENV` picks the variant (`VARIANTS`). Everything else is the same code: `GET
/items/{item_id}` is the resource `items://{item_id}` (the mark is an attribute on the function,
which nothing reads without the router), and `PUT /items/{item_id}` writes to that resource's
path, so with the middleware every PUT is looked at. The third variant is there to tell the
middleware's cost from the router's; no real app removes it.

Route bodies are `async def` and trivial, so what is measured is FastAPI plus this library,
not a thread pool hop or the work of a real handler.
"""

from __future__ import annotations

import os
from typing import Final

from fastapi import FastAPI
from peer_app import Item, ItemId, ItemIn

from fastapi_mcp_routes import ToolCalls, mcp_resource, mcp_routes
from fastapi_mcp_routes.transport.writes import ResourceWrites

MCP_ENV: Final = "FMR_BENCH_MCP"
WITHOUT: Final = "none"
WITH: Final = "router"
WITHOUT_WRITES: Final = "router-without-writes"
WITH_LAST: Final = "router-last"  # included after the app's routes
VARIANTS: Final = (WITHOUT, WITH, WITHOUT_WRITES, WITH_LAST)
RESOURCE_TEMPLATE: Final = "items://{item_id}"


def create_app() -> FastAPI:
    """The benchmark app, in the variant the environment names."""
    variant = os.environ.get(MCP_ENV, WITH)
    if variant not in VARIANTS:
        raise ValueError(f"{MCP_ENV} must be one of {', '.join(VARIANTS)}, got {variant!r}")
    return build_app(variant)


def build_app(variant: str) -> FastAPI:
    """A resource's GET route and a PUT to the same path, after the MCP router (included first,
    as the docs advise) unless `variant` is `WITHOUT` or `WITH_LAST`."""
    app = FastAPI(title="Writes benchmark", version="1.0.0")
    if variant in (WITH, WITHOUT_WRITES):
        app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))
    if variant == WITHOUT_WRITES:
        app.user_middleware[:] = [m for m in app.user_middleware if m.cls is not ResourceWrites]
    app.add_api_route("/items/{item_id}", get_item, methods=["GET"], response_model=Item, summary="Get an item")
    app.add_api_route("/items/{item_id}", replace_item, methods=["PUT"], response_model=Item, summary="Replace one")
    if variant == WITH_LAST:
        app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))
    return app


@mcp_resource(RESOURCE_TEMPLATE)
async def get_item(item_id: ItemId) -> Item:
    """One item, as JSON."""
    return Item(id=item_id, name=f"item {item_id}", q=None, price=9.5, tags=["bench", "get"])


async def replace_item(item_id: ItemId, item: ItemIn) -> Item:
    """Replace an item; nothing is kept, so every call answers the same."""
    return Item(id=item_id, q=None, **item.model_dump())
