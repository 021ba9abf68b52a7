"""The one FastAPI app every implementation in `peers.py` serves, and how each adds MCP to it.

uvicorn loads it with `--factory peer_app:create_app`, in the virtualenv of the implementation
named by the environment variable `FMR_PEER_IMPL`:

- `rest`: the bare app, no MCP at all (the startup floor);
- `fastapi-mcp-routes`: this library, its router included before the routes, every route
  marked (the peers expose every route), mutations unconfirmed (the peers have no gate);
- `fastapi-mcp`: `FastApiMCP(app, headers=[...]).mount_http()`, forwarding the credential
  header as well as Authorization (its default forwards only Authorization);
- `fastmcp`: `FastMCP.from_fastapi(app)`, its Streamable-HTTP app mounted into the same app
  with its lifespan, as FastMCP's FastAPI guide shows.

Every implementation serves REST on the same server, so each tool call is compared with the
REST call of the same route on the same process. Route bodies are trivial `async def`s, so what
is measured is the framework and the MCP layer, not a handler's work.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any, Final

from fastapi import Depends, FastAPI, Header, HTTPException, Path, status
from pydantic import BaseModel, Field

IMPL_ENV: Final = "FMR_PEER_IMPL"
EXTRA_ROUTES_ENV: Final = "FMR_PEER_EXTRA_ROUTES"
API_KEY: Final = "bench-key"
CREDENTIAL_HEADER: Final = "x-api-key"
# Where each implementation's MCP endpoint is, for the client.
ENDPOINTS: Final = {"rest": "", "fastapi-mcp-routes": "/mcp", "fastapi-mcp": "/mcp", "fastmcp": "/fastmcp/mcp"}


class Item(BaseModel):
    id: int
    name: str
    q: str | None = Field(description="The query string echoed back.")
    price: float
    tags: list[str]


class ItemIn(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="What the item is called.")
    price: float = Field(ge=0, description="Unit price in euros.")
    tags: list[str] = Field(default_factory=list, max_length=20)


class CreatedItem(ItemIn):
    id: int
    price_with_tax: float


ItemId = Annotated[int, Path(ge=1, description="The item's id.")]


def require_api_key(x_api_key: Annotated[str | None, Header()] = None) -> None:
    """The credential dependency: a guard every implementation must let the caller's key through."""
    if x_api_key != API_KEY:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "A valid x-api-key header is required.")


async def get_item(item_id: ItemId, q: str | None = None) -> Item:
    """Fetch one item by id; `q` is echoed back."""
    return Item(id=item_id, name=f"item {item_id}", q=q, price=9.5, tags=["bench", "get"])


async def create_item(item: ItemIn) -> CreatedItem:
    """Create an item; the id is derived from the name so every call answers the same."""
    return CreatedItem(id=len(item.name), price_with_tax=round(item.price * 1.21, 2), **item.model_dump())


async def get_secret() -> dict[str, str]:
    """A route behind the credential dependency."""
    return {"secret": "s3cret"}


async def get_extra(item_id: ItemId) -> Item:
    """A generated route: only there to grow the route table and the tool list."""
    return Item(id=item_id, name="extra", q=None, price=1.0, tags=[])


def create_app() -> FastAPI:
    impl = os.environ.get(IMPL_ENV, "rest")
    raw = os.environ.get(EXTRA_ROUTES_ENV, "10")
    if impl not in ATTACH or not raw.isdigit():
        raise ValueError(
            f"{IMPL_ENV} must be one of {sorted(ATTACH)} and {EXTRA_ROUTES_ENV} a count; got {impl!r}, {raw!r}"
        )
    return build_app(impl, int(raw))


def build_app(impl: str, extra_routes: int) -> FastAPI:
    app = FastAPI(title="Benchmark", version="1.0.0")
    marked: dict[str, Any] = {"openapi_extra": {"x-mcp": True}} if impl == "fastapi-mcp-routes" else {}
    if impl == "fastapi-mcp-routes":
        attach_routes_first(app)
    # operation_id = name: every implementation then calls the tool by the same name.
    routes: list[tuple[str, Callable[..., Any], str, dict[str, Any]]] = [
        ("/items/{item_id}", get_item, "GET", {"response_model": Item}),
        ("/items", create_item, "POST", {"response_model": CreatedItem, "status_code": 201}),
        ("/secret", get_secret, "GET", {"dependencies": [Depends(require_api_key)]}),
    ]
    routes += [
        (f"/extra/{index}/{{item_id}}", get_extra, "GET", {"response_model": Item}) for index in range(extra_routes)
    ]
    for path, endpoint, method, options in routes:
        name = endpoint.__name__ if endpoint is not get_extra else f"extra_{path.split('/')[2]}"
        app.add_api_route(path, endpoint, methods=[method], name=name, operation_id=name, **options, **marked)
    ATTACH[impl](app)
    return app


def attach_routes_first(app: FastAPI) -> None:
    from fastapi_mcp_routes import ToolCalls, mcp_routes

    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))


def attach_fastapi_mcp(app: FastAPI) -> None:
    from fastapi_mcp import FastApiMCP

    FastApiMCP(app, headers=["authorization", CREDENTIAL_HEADER]).mount_http()


def attach_fastmcp(app: FastAPI) -> None:
    from fastmcp import FastMCP

    mcp_app = FastMCP.from_fastapi(app=app).http_app(path="/mcp")
    app.mount("/fastmcp", mcp_app)
    app.router.lifespan_context = mcp_app.lifespan


ATTACH: Final[dict[str, Callable[[FastAPI], None]]] = {
    "rest": lambda app: None,
    "fastapi-mcp-routes": lambda app: None,  # included before the routes, see build_app
    "fastapi-mcp": attach_fastapi_mcp,
    "fastmcp": attach_fastmcp,
}
