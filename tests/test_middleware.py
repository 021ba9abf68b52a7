"""Tool calls through the app's own middleware: a route's questions and progress reach the
client in both eras, whatever ordinary middleware wraps the app.

A tool call runs the route through the whole app, so the endpoint's request and the route's
own request both pass every middleware. Five stacks are tried, each on a real uvicorn server:
Starlette's `BaseHTTPMiddleware` (`@app.middleware("http")`), a pure ASGI pass-through,
`CORSMiddleware`, `GZipMiddleware` (compressing from the first byte), and all four together.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.gzip import GZipMiddleware
from mcp import Client, types
from starlette.middleware.base import RequestResponseEndpoint
from starlette.types import ASGIApp, Receive, Scope, Send

from fastapi_mcp_routes import ToolCalls, ToolContext, mcp_routes, mcp_tool
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.sse import sse_messages
from tests.support.stateless import post_stateless, stateless_headers, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio
STATELESS = "2026-07-28"
SESSION_ERA = "2025-11-25"
Context = Annotated[ToolContext, Depends()]
COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
# What a pass-through layer saw: (layer, path), in the order requests reached it.
Seen = list[tuple[str, str]]


class PureAsgiPassThrough:
    """Middleware written against ASGI itself: it only notes the paths it passes on."""

    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append(("pure_asgi", scope["path"]))
        await self.app(scope, receive, send)


def add_base_http(app: FastAPI, seen: Seen) -> None:
    @app.middleware("http")
    async def pass_through(request: Request, call_next: RequestResponseEndpoint) -> Response:
        seen.append(("base_http", request.url.path))
        return await call_next(request)


def add_pure_asgi(app: FastAPI, seen: Seen) -> None:
    app.add_middleware(PureAsgiPassThrough, seen=seen)


def add_cors(app: FastAPI, seen: Seen) -> None:
    app.add_middleware(
        CORSMiddleware, allow_origin_regex=r"http://127\.0\.0\.1:\d+", allow_methods=["*"], allow_headers=["*"]
    )


def add_gzip(app: FastAPI, seen: Seen) -> None:
    app.add_middleware(GZipMiddleware, minimum_size=1)  # every answer big enough to compress


LAYERS: dict[str, Callable[[FastAPI, Seen], None]] = {
    "base_http": add_base_http,
    "pure_asgi": add_pure_asgi,
    "cors": add_cors,
    "gzip": add_gzip,
}
STACKS: dict[str, tuple[str, ...]] = {**{layer: (layer,) for layer in LAYERS}, "all": tuple(LAYERS)}


def make_app(layers: tuple[str, ...], seen: Seen) -> FastAPI:
    app = FastAPI(title="Behind middleware")
    # The middleware is the subject here, not confirming mutations.
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))
    for layer in layers:
        LAYERS[layer](app, seen)

    @mcp_tool()
    @app.get("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Which colour?", COLOUR)
        return {"action": answer.action, "colour": (answer.content or {}).get("colour")}

    @mcp_tool()
    @app.get("/broad")
    async def broad(ctx: Context) -> dict[str, Any]:
        try:
            answer = await ctx.elicit("Which colour?", COLOUR)
        except Exception as exc:  # a route's own broad handler must not swallow the question
            return {"swallowed": type(exc).__name__}
        return {"colour": (answer.content or {}).get("colour")}

    @mcp_tool()
    @app.get("/count")
    async def count(ctx: Context, steps: int = 3) -> dict[str, int]:
        for step in range(1, steps + 1):
            await ctx.report_progress(step, total=steps, message=f"step {step}")
        return {"steps": steps}

    @mcp_tool()
    @app.get("/plain")
    async def plain(ctx: Context) -> dict[str, bool]:
        return {"is_tool_call": ctx.is_tool_call}

    return app


@dataclass(frozen=True, slots=True)
class Served:
    stack: str
    url: str
    seen: Seen


@pytest.fixture(scope="module", params=list(STACKS))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    seen: Seen = []
    with serve(make_app(STACKS[request.param], seen)) as url:
        yield Served(request.param, url, seen)


# --- the stateless revision (2026-07-28), raw HTTP ---------------------------------------------

CAPABLE = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


def call(http: httpx.Client, served: Served, name: str, meta: dict[str, Any] | None = None, **params: Any) -> Any:
    """One stateless `tools/call`; its JSON-RPC result (any other answer fails the test). The
    server's own Origin goes along (accepted), so CORS has work to do."""
    response = post_stateless(
        http,
        "tools/call",
        {"name": name, "arguments": {}, **params},
        meta={**CAPABLE, **(meta or {})},
        headers={"origin": served.url},
    )
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()["result"]


def test_every_layer_of_the_stack_acts_on_a_tool_call(served: Served) -> None:
    served.seen.clear()
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as http:
        params = {"name": "plain", "arguments": {}}
        response = post_stateless(http, "tools/call", params, meta=CAPABLE, headers={"origin": served.url})
    assert response.json()["result"]["structuredContent"] == {"is_tool_call": True}
    layers = STACKS[served.stack]
    if "cors" in layers:
        assert response.headers["access-control-allow-origin"] == served.url
    if "gzip" in layers:
        assert response.headers["content-encoding"] == "gzip"
    for layer in {"base_http", "pure_asgi"}.intersection(layers):
        # The endpoint's request, then the route's own request inside the tool call.
        assert [path for name, path in served.seen if name == layer] == ["/mcp", "/plain"]


def test_a_stateless_question_behind_the_stack_is_input_required(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as http:
        result = call(http, served, "ask")
    assert result["resultType"] == "input_required"
    [question] = result["inputRequests"].values()
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"] == "Which colour?"
    assert result["requestState"]


def test_a_stateless_retry_with_the_answer_runs_the_route_to_completion(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as http:
        asked = call(http, served, "ask")
        assert asked.get("resultType") == "input_required", asked
        answers = {key: {"action": "accept", "content": {"colour": "red"}} for key in asked["inputRequests"]}
        done = call(http, served, "ask", inputResponses=answers, requestState=asked["requestState"])
    assert done["resultType"] == "complete"
    assert done["structuredContent"] == {"action": "accept", "colour": "red"}
    assert json.loads(done["content"][0]["text"]) == {"action": "accept", "colour": "red"}


def test_a_routes_broad_except_does_not_swallow_a_stateless_question(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=WAIT_S) as http:
        result = call(http, served, "broad")
    assert result["resultType"] == "input_required"
    assert "structuredContent" not in result


def test_stateless_progress_behind_the_stack_reaches_the_client_as_events(served: Served) -> None:
    body = stateless_request("tools/call", {"name": "count", "arguments": {}}, {**CAPABLE, "progressToken": "p"})
    headers = stateless_headers("tools/call", "count", origin=served.url)
    with (
        httpx.Client(base_url=served.url, timeout=WAIT_S) as http,
        http.stream("POST", "/mcp", json=body, headers=headers) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in response.headers  # GZip leaves event streams alone
        if "cors" in STACKS[served.stack]:
            assert response.headers["access-control-allow-origin"] == served.url
        messages = sse_messages(response.iter_lines())
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["message"]) for p in progress] == [
        ("p", 1, "step 1"),
        ("p", 2, "step 2"),
        ("p", 3, "step 3"),
    ]
    assert messages[-1]["result"]["structuredContent"] == {"steps": 3}


async def test_the_sdk_client_answers_a_stateless_question_behind_the_stack(served: Served) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "amber"})

    with anyio.fail_after(WAIT_S):
        async with Client(f"{served.url}/mcp", mode=STATELESS, elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask", {})
    assert asked == ["Which colour?"]
    assert result.structured_content == {"action": "accept", "colour": "amber"}


# --- the session era (2025-11-25), the official SDK client ------------------------------------


@asynccontextmanager
async def session_client(served: Served, **options: Any) -> AsyncIterator[Client]:
    async with mcp_client(served.url, **options) as client:
        assert client.protocol_version == SESSION_ERA
        yield client


async def test_a_session_elicitation_behind_the_stack_reaches_the_route(served: Served) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"colour": "teal"})

    with anyio.fail_after(WAIT_S):
        async with session_client(served, elicitation_callback=on_elicit) as client:
            result = await client.call_tool("ask", {})
    assert asked == ["Which colour?"]
    assert result.structured_content == {"action": "accept", "colour": "teal"}


async def test_session_progress_behind_the_stack_reaches_the_progress_callback(served: Served) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    with anyio.fail_after(WAIT_S):
        async with session_client(served) as client:
            result = await client.call_tool("count", {"steps": 3}, progress_callback=on_progress)
    assert result.structured_content == {"steps": 3}
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
