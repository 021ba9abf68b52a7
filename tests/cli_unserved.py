"""Apps that mark routes on a router they never include, for `fastapi-mcp-routes check`
(`tests.cli_unserved:<name>`): one whose endpoint then serves nothing, one that serves a tool of
its own besides. Kept apart from tests/cli_apps.py, whose apps include every router they mark."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from fastapi_mcp_routes import mcp_routes, mcp_tool

# -- marked routes on a router never included --------------------------------------------------

orders = APIRouter(prefix="/orders")


@mcp_tool()
@orders.get("")
def list_orders() -> list[str]:
    return []


@orders.post("", openapi_extra={"x-mcp": True})
def place_order() -> dict[str, bool]:
    return {"placed": True}


router_left_out = FastAPI()
router_left_out.include_router(mcp_routes(router_left_out))

router_partly_left_out = FastAPI()
router_partly_left_out.include_router(mcp_routes(router_partly_left_out))


@mcp_tool()
@router_partly_left_out.get("/health")
def health() -> dict[str, bool]:
    return {"healthy": True}


# -- an object that must not be asked what it is ----------------------------------------------


class _ContextLocal:
    """Stands in for a context-local proxy (werkzeug's `LocalProxy`, Django's lazy settings):
    asking it for `__class__` outside a request raises, or sets it up, so a scan of the module
    must not."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        raise RuntimeError("Working outside of request context.")


current_user: object = _ContextLocal()
