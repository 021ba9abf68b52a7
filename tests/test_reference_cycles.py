"""A request leaves no reference cycle behind: what it made is freed by reference counting the
moment it ends, not by the garbage collector later. One cycle per tool call (the answer's stream
and its channel holding each other, a call and its slot registration) left 28 objects a call for
the collector: a pass every 25th call, a full pass over the process every few thousand, 7% of a
tool call's CPU against REST (docs/benchmarks.md). Each kind of request is sent a few times with
the collector off; the collector then must find nothing to free.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel
from starlette.types import Message

from fastapi_mcp_routes import ToolCalls, ToolContext, mcp_resource, mcp_routes, mcp_tool
from tests.support.asgi import http_scope
from tests.support.jsonrpc import HEADERS, JSON_ONLY, SESSION_VERSION, initialize, rpc, tool_call
from tests.support.stateless import stateless_headers, stateless_request

ROUNDS = 5  # each request, with the collector off
WARM_UP = 3  # each request first, so one-off caches (a compiled schema, a sealed id) are made


class Item(BaseModel):
    id: int
    name: str
    q: str | None = None


class NewItem(BaseModel):
    name: str
    price: float


def make_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))

    @mcp_tool()
    @app.get("/items/{item_id}")
    async def get_item(item_id: int, q: str | None = None) -> Item:
        if item_id == 404:
            raise HTTPException(404, "no such item")
        return Item(id=item_id, name=f"item {item_id}", q=q)

    @mcp_tool()
    @app.post("/items")
    async def create_item(item: NewItem) -> Item:
        return Item(id=len(item.name), name=item.name)

    @mcp_tool()
    @app.get("/slow/{steps}")
    async def counted(steps: int, context: Annotated[ToolContext, Depends()]) -> Item:
        for step in range(steps):
            await context.report_progress(step + 1, steps)
        return Item(id=steps, name="counted")

    @mcp_resource("items://{item_id}")
    @app.get("/resources/items/{item_id}")
    async def item_resource(item_id: int) -> Item:
        return Item(id=item_id, name=f"item {item_id}")

    return app


async def post(app: FastAPI, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One POST to the endpoint as raw ASGI, the way a server calls the app."""
    raw = json.dumps(body).encode()
    sent: list[Message] = []
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if delivered:  # the client stays until the answer is whole
            raise AssertionError("the endpoint read past the body")
        delivered = True
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    await app(http_scope("POST", "/mcp", {"host": "127.0.0.1", **headers}), receive, send)
    start = sent[0]
    answer_headers = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    return start["status"], answer_headers, b"".join(m.get("body", b"") for m in sent[1:])


@contextmanager
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def left_for_the_collector() -> Counter[str]:
    """What the collector frees now, by type: objects only a cycle kept alive."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(type(found).__qualname__ for found in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def open_session(app: FastAPI) -> dict[str, str]:
    status, headers, _ = await post(app, initialize(), HEADERS)
    assert status == 200
    session = {**HEADERS, "mcp-protocol-version": SESSION_VERSION, "mcp-session-id": headers["mcp-session-id"]}
    status, _, _ = await post(app, rpc("notifications/initialized", request_id=None), session)
    assert status == 202
    return session


REQUESTS: dict[str, tuple[str, Any]] = {
    "tools/call of a GET route": ("session", tool_call("get_item", {"item_id": 42, "q": "hello"})),
    "tools/call of a POST route": ("session", tool_call("create_item", {"name": "widget", "price": 9.5})),
    "tools/call, a client reading JSON only": ("json-only", tool_call("get_item", {"item_id": 42})),
    "tools/call answered by SSE, with progress": (
        "session",
        tool_call("counted", {"steps": 2}, progress_token="p"),
    ),
    "tools/call the route refuses (isError)": ("session", tool_call("get_item", {"item_id": 404})),
    "tools/call with arguments the route refuses (422)": ("session", tool_call("get_item", {"item_id": "x"})),
    "tools/call of an unknown tool (-32602)": ("session", tool_call("nope", {})),
    "tools/list": ("session", rpc("tools/list", {})),
    "resources/read": ("session", rpc("resources/read", {"uri": "items://7"})),
    "ping": ("session", rpc("ping", {})),
    "2026-07-28 tools/call": (
        "stateless",
        stateless_request("tools/call", {"name": "get_item", "arguments": {"item_id": 42}}),
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(REQUESTS))
async def test_a_request_leaves_no_reference_cycle(kind: str) -> None:
    app = make_app()
    era, message = REQUESTS[kind]
    async with app.router.lifespan_context(app):
        if era == "stateless":
            params = message["params"]
            headers = stateless_headers(message["method"], params.get("name"))
        else:
            headers = await open_session(app)
            if era == "json-only":
                headers = {**headers, "accept": JSON_ONLY["accept"]}
        for _ in range(WARM_UP):
            status, _, body = await post(app, message, headers)
            assert status == 200, body
        with collector_off():
            for _ in range(ROUNDS):
                status, _, body = await post(app, message, headers)
                assert status == 200, body
            left = left_for_the_collector()
    assert not left, f"{kind}: {ROUNDS} requests left cycles of {dict(left.most_common(12))}"
