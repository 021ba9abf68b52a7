"""The app `soak.py` attacks: three tools behind `mcp_routes(app)` at its defaults.

uvicorn loads it with `--factory soak_app:create_app`. Every bound is the library's default:
what is measured is what a deployment gets without tuning. The app checks one key, the demo
key the legitimate client sends (`Limits.verify_credentials`): its caller ranks above anonymous
ones. Any other `x-api-key` is made up and counts as no key: its caller is anonymous, told
apart by its client address.

Route bodies are `async def` and do no work of their own: the large answer is built once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from fastapi import FastAPI

from fastapi_mcp_routes import Limits, mcp_routes, mcp_tool

# About 1 MB of route response; a tool answer carries it twice (text and structuredContent),
# about 2 MB: the size of the review's "large answers".
LARGE_CHARACTERS: Final = 1_000_000
_LARGE: Final = {"text": "x" * LARGE_CHARACTERS}
DEMO_KEY: Final = "legit-key"  # soak.py's LEGIT_KEY


def demo_key(headers: Mapping[str, str]) -> bool:
    """The one key the app knows."""
    return headers.get("x-api-key") == DEMO_KEY


def create_app() -> FastAPI:
    """The attacked app: a gated mutation, a large read-only answer, a small one."""
    app = FastAPI(title="Soak", version="1.0.0")
    app.include_router(mcp_routes(app, limits=Limits(verify_credentials=demo_key)))
    app.add_api_route("/orders", place_order, methods=["POST"], summary="Place an order")
    app.add_api_route("/large", large, methods=["GET"], summary="A large document")
    app.add_api_route("/small", small, methods=["GET"], summary="A small answer")
    return app


@mcp_tool()
async def place_order(item: str) -> dict[str, str]:
    """Place an order: a mutation, so each call must be confirmed first (the default)."""
    return {"placed": item}


@mcp_tool()
async def large() -> dict[str, str]:
    """A read-only tool whose answer is about 2 MB."""
    return _LARGE


@mcp_tool()
async def small() -> dict[str, bool]:
    """A read-only tool with a tiny answer: what the legitimate client calls."""
    return {"ok": True}
