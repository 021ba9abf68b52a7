"""`mcp_routes` itself: options, endpoint dependencies, startup checks, the public surface."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import httpx
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import Route

import fastapi_mcp_routes
from fastapi_mcp_routes import Limits, Origins, ServerInfo, Streaming, ToolCalls, mcp_routes, mcp_tool
from tests.support.jsonrpc import HEADERS, call_tool, initialize, tool_call
from tests.support.servers import serve


def test_public_names_are_exactly_these() -> None:
    assert fastapi_mcp_routes.__all__ == [
        "ContentResponse",
        "Credentials",
        "ElicitationResult",
        "InputRequest",
        "JWTBearer",
        "Limits",
        "Origins",
        "Principal",
        "PromptMessage",
        "PromptResponse",
        "ProtectedResource",
        "RedisStore",
        "ServerCard",
        "ServerInfo",
        "Sessions",
        "Skills",
        "Store",
        "Streaming",
        "Tasks",
        "Telemetry",
        "ToolCallEvent",
        "ToolCalls",
        "ToolContext",
        "ToolContextError",
        "audio_content",
        "auth_guard",
        "image_content",
        "log_tool_call",
        "mcp_completion",
        "mcp_prompt",
        "mcp_resource",
        "mcp_routes",
        "mcp_tool",
        "notify_resource_updated",
        "resource_content",
        "resource_link",
        "text_content",
    ]
    assert sorted(fastapi_mcp_routes.__all__) == fastapi_mcp_routes.__all__


def test_endpoint_dependencies_guard_every_request() -> None:
    app = FastAPI()

    def require_token(x_token: Annotated[str | None, Header()] = None) -> None:
        if x_token != "open-sesame":
            raise HTTPException(401, "token required")

    app.include_router(mcp_routes(app, dependencies=[Depends(require_token)]))
    with TestClient(app) as client:
        assert client.post("/mcp", json=initialize(), headers=HEADERS).status_code == 401
        allowed = client.post("/mcp", json=initialize(), headers={**HEADERS, "x-token": "open-sesame"})
        assert allowed.status_code == 200


SIGNING_KEY = b"shared-with-the-client"
BODY_READ_S = 5.0  # a body the endpoint waits for past this was never coming


def _signed(body: bytes) -> dict[str, str]:
    return {**HEADERS, "x-signature": hmac.new(SIGNING_KEY, body, hashlib.sha256).hexdigest()}


@pytest.mark.parametrize("where", ["dependency", "middleware"])
def test_a_guard_that_reads_the_body_leaves_it_for_the_endpoint(where: str) -> None:
    """A signature check reads the whole body before the endpoint (an endpoint dependency, or an
    `@app.middleware("http")`); the endpoint still gets the body, on a real server that waits
    for a disconnect once the body is read."""
    app = FastAPI()

    @mcp_tool()
    @app.get("/ping")
    def ping() -> str:
        return "pong"

    async def verify(request: Request) -> None:
        expected = hmac.new(SIGNING_KEY, await request.body(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(request.headers.get("x-signature", ""), expected):
            raise HTTPException(401, "bad signature")

    if where == "dependency":
        app.include_router(mcp_routes(app, sessions=False, dependencies=[Depends(verify)]))
    else:

        @app.middleware("http")
        async def check_signature(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
            try:
                if request.url.path == "/mcp":  # the route's own request carries no signature
                    await verify(request)
            except HTTPException as refusal:
                return Response(status_code=refusal.status_code)
            return await call_next(request)

        app.include_router(mcp_routes(app, sessions=False))
    with serve(app) as base_url, httpx.Client(base_url=base_url, timeout=BODY_READ_S) as http:
        body = json.dumps(tool_call("ping")).encode()
        assert http.post("/mcp", content=body, headers={**HEADERS, "x-signature": "forged"}).status_code == 401
        answered = http.post("/mcp", content=body, headers=_signed(body))
    assert answered.status_code == 200, answered.text
    assert answered.json()["result"]["structuredContent"] == {"result": "pong"}


def test_duplicate_tool_names_stop_the_app_at_startup() -> None:
    app = FastAPI()

    @mcp_tool(name="same")
    @app.get("/a")
    def first() -> int:
        return 1

    app.include_router(mcp_routes(app))

    @mcp_tool(name="same")
    @app.get("/b")
    def second() -> int:
        return 2

    with pytest.raises(ValueError, match=r"two tools are named 'same'.*first.*second"), TestClient(app):
        pass


def test_the_router_included_twice_stops_the_app_at_startup() -> None:
    app = FastAPI()
    router = mcp_routes(app)
    app.include_router(router)
    app.include_router(router, prefix="/v2")
    with pytest.raises(ValueError, match=r"2 MCP endpoints \('/mcp', '/v2/mcp'\).*include it once"), TestClient(app):
        pass


def test_two_endpoints_on_one_app_stop_it_at_startup() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app))
    app.include_router(mcp_routes(app, path="/agents"))
    with pytest.raises(ValueError, match=r"2 MCP endpoints .*pass path= to mcp_routes"), TestClient(app):
        pass


def test_one_endpoint_under_a_prefix_starts_and_serves() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app), prefix="/api")
    with TestClient(app) as client:
        assert client.post("/api/mcp", json=initialize(), headers=HEADERS).status_code == 200
    with TestClient(app) as client:  # and again after a restart: the plain route was put back
        assert client.post("/api/mcp", json=initialize(), headers=HEADERS).status_code == 200


def test_server_identity_defaults_to_the_app_and_can_be_set() -> None:
    app = FastAPI(title="Inventory", version="3.2.1")
    app.include_router(mcp_routes(app))
    other = FastAPI()
    other.include_router(mcp_routes(other, server=ServerInfo(name="stock", version="9"), path="/agents"))
    with TestClient(app) as client:
        info = client.post("/mcp", json=initialize(), headers=HEADERS).json()["result"]["serverInfo"]
        assert info == {"name": "Inventory", "version": "3.2.1"}
    with TestClient(other) as client:
        info = client.post("/agents", json=initialize(), headers=HEADERS).json()["result"]["serverInfo"]
        assert info == {"name": "stock", "version": "9"}


def test_the_route_sees_the_real_callers_address() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/whoami")
    def whoami(request: Request) -> dict[str, Any]:
        assert request.client is not None
        return {"host": request.client.host, "agent": request.headers.get("user-agent")}

    app.include_router(mcp_routes(app, sessions=False))
    with TestClient(app, client=("203.0.113.7", 5000)) as client:
        result = call_tool(client, "whoami", headers={**HEADERS, "user-agent": "agent/1"})
    assert result["structuredContent"] == {"host": "203.0.113.7", "agent": "agent/1"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"path": "mcp"}, "path must start with '/'"),
        ({"limits": {"max_body_bytes": 1}}, "limits must be a Limits"),
        ({"sessions": "yes"}, "sessions must be True, False or a Sessions"),
        ({"forward_headers": "x-api-key"}, "forward_headers must be a list"),
        ({"forward_headers": ["mcp-session-id"]}, "cannot name MCP transport headers"),
        ({"server": {"name": "stock"}}, r"server must be a ServerInfo\(\.\.\.\), got \{'name': 'stock'\}"),
        ({"origins": ["https://a.example"]}, "origins must be a Origins"),
        ({"streaming": 5000}, "streaming must be a Streaming"),
        ({"tool_calls": False}, "tool_calls must be a ToolCalls"),
    ],
)
def test_bad_options_are_refused_with_the_rule_and_the_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mcp_routes(FastAPI(), **options)


@pytest.mark.parametrize(
    ("group", "fields", "message"),
    [
        (ServerInfo, {"name": 7}, "ServerInfo.name must be a string or None, got 7"),
        (Origins, {"allowed_origins": "https://a.example"}, "Origins.allowed_origins must be a list"),
        (Origins, {"allowed_hosts": [""]}, "Origins.allowed_hosts must hold non-empty strings, got ''"),
        (
            Streaming,
            {"max_stream_seconds": 0},
            "Streaming.max_stream_seconds must be a positive, finite number of seconds or None, got 0",
        ),
        (
            ToolCalls,
            {"confirmation_ttl_s": float("inf")},
            "ToolCalls.confirmation_ttl_s must be a positive, finite number of seconds, got inf",
        ),
        (ToolCalls, {"require_confirmation_for_mutations": "no"}, "must be True or False, got 'no'"),
        (ToolCalls, {"on_tool_call": "print"}, "ToolCalls.on_tool_call must be a function or None, got 'print'"),
        (Limits, {"rate_limit": "lots"}, "Limits.rate_limit must be slowapi syntax such as '120/minute'"),
        (Limits, {"rate_limit": 120}, "Limits.rate_limit must be slowapi syntax .*, got 120"),
    ],
)
def test_bad_group_fields_are_refused_naming_the_group_and_the_value(
    group: Callable[..., object], fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        group(**fields)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_body_bytes": 0}, "Limits.max_body_bytes must be a positive number of bytes, got 0"),
        ({"max_response_bytes": -1}, "Limits.max_response_bytes must be a positive number of bytes, got -1"),
        ({"page_size": 2.5}, "Limits.page_size must be a positive whole number, got 2.5"),
        ({"keep_alive_s": 0}, "Limits.keep_alive_s must be a positive, finite number of seconds, got 0"),
        ({"keep_alive_s": float("inf")}, "Limits.keep_alive_s must be a positive, finite number of seconds, got inf"),
        ({"max_batch_length": 0}, "Limits.max_batch_length must be a positive whole number, got 0"),
        ({"max_replay_bytes": 0}, "Limits.max_replay_bytes must be a positive number of bytes, got 0"),
        ({"max_questions_per_session": 0}, "Limits.max_questions_per_session must be a positive whole number, got 0"),
        ({"max_tokens_per_caller": 0}, "Limits.max_tokens_per_caller must be a positive whole number, got 0"),
        ({"max_streams_per_caller": 0}, "Limits.max_streams_per_caller must be a positive whole number, got 0"),
        ({"max_streams": True}, "Limits.max_streams must be a positive whole number, got True"),
        ({"max_resumes_per_session": -2}, "Limits.max_resumes_per_session must be a positive whole number, got -2"),
    ],
)
def test_bad_limits_are_refused_with_the_rule_and_the_value(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Limits(**options)


def test_a_response_over_the_cap_ends_the_call_with_an_error_result() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/big")
    def big() -> Response:
        return Response(b"x" * 2048, media_type="text/plain")

    app.include_router(mcp_routes(app, sessions=False, limits=Limits(max_response_bytes=1024)))
    with TestClient(app) as client:
        result = call_tool(client, "big")
    assert result["isError"] is True
    assert "larger than 1024 bytes" in result["content"][0]["text"]


def test_a_response_that_never_ends_is_stopped_at_the_cap_even_behind_base_http_middleware() -> None:
    app = FastAPI()
    stopped: list[str] = []

    @app.middleware("http")
    async def pass_through(request: Request, call_next: Any) -> Any:
        return await call_next(request)

    @mcp_tool()
    @app.get("/endless")
    async def endless() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield b"x" * 512
            finally:
                stopped.append("generator closed")

        return StreamingResponse(chunks(), media_type="text/plain")

    app.include_router(mcp_routes(app, sessions=False, limits=Limits(max_response_bytes=4096)))
    with TestClient(app) as client:
        result = call_tool(client, "endless")
        served_after = call_tool(client, "endless")
    assert result["isError"] is True
    assert "larger than 4096 bytes" in result["content"][0]["text"]
    assert served_after["isError"] is True  # the server keeps serving, and stops the next one too
    assert stopped == ["generator closed", "generator closed"]


def test_a_failing_background_task_does_not_turn_a_done_response_into_an_error() -> None:
    app = FastAPI()
    orders: list[str] = []

    def audit() -> None:
        raise RuntimeError("the audit service is down")

    @mcp_tool()
    @app.post("/orders", status_code=201)
    def place_order(background: BackgroundTasks) -> dict[str, int]:
        orders.append("order")
        background.add_task(audit)
        return {"orders": len(orders)}

    app.include_router(mcp_routes(app, sessions=False, tool_calls=ToolCalls(require_confirmation_for_mutations=False)))
    with TestClient(app) as client:
        result = call_tool(client, "place_order")
    assert "isError" not in result
    assert result["content"][0]["text"] == '{"orders":1}'


def test_the_plain_endpoint_keeps_the_order_of_matching_at_its_included_path() -> None:
    app = FastAPI()

    @app.get("/v1/mcp")
    def declared_first() -> dict[str, str]:  # ahead of the inclusion, so it answers GET first
        return {"caught": "GET"}

    app.include_router(mcp_routes(app), prefix="/v1")
    inclusion = app.router.routes[-1]
    front = FastAPI()
    front.include_router(mcp_routes(front), prefix="/v1")
    with TestClient(app) as client, TestClient(front):
        plain = [route for route in app.router.routes if _plain(route) and route.path == "/v1/mcp"]
        assert len(plain) == 1
        assert app.router.routes.index(plain[0]) == 5  # where the inclusion was, after the GET
        assert inclusion not in app.router.routes  # it held only the endpoint: REST skips it
        assert _plain(front.router.routes[0])  # nothing ahead could take it
        assert front.router.routes[0].path == "/v1/mcp"  # type: ignore[attr-defined]
        assert client.get("/v1/mcp").json() == {"caught": "GET"}
        assert client.get("/v1/other").status_code == 404
        assert client.post("/v1/mcp", json=initialize(), headers=HEADERS).status_code == 200
    assert plain[0] not in app.router.routes  # removed at shutdown
    assert app.router.routes[5] is inclusion  # and the inclusion is back where it was
    other = FastAPI()
    with TestClient(other) as client:  # an app that never included the router does not serve it
        assert client.post("/v1/mcp", json=initialize(), headers=HEADERS).status_code == 404


def _plain(route: Any) -> bool:
    """The endpoint served as a plain Starlette route, not FastAPI's."""
    return isinstance(route, Route) and not isinstance(route, APIRoute)


def test_dependencies_of_the_app_and_the_inclusion_guard_the_endpoint_too() -> None:
    def refuse() -> None:
        raise HTTPException(401, "the app's own guard")

    guarded_app = FastAPI(dependencies=[Depends(refuse)])
    guarded_app.include_router(mcp_routes(guarded_app))
    guarded_inclusion = FastAPI()
    guarded_inclusion.include_router(mcp_routes(guarded_inclusion), dependencies=[Depends(refuse)])
    for app in (guarded_app, guarded_inclusion):
        with TestClient(app) as client:
            refused = client.post("/mcp", json=initialize(), headers=HEADERS)
        assert refused.status_code == 401
        assert refused.json() == {"detail": "the app's own guard"}


def test_a_body_limit_of_the_inclusion_applies_to_the_endpoint() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app), max_body_size=64)
    with TestClient(app) as client:
        assert client.post("/mcp", json=initialize(), headers=HEADERS).status_code == 413
