"""Rate limits: the endpoint's own budget per caller, and a route's own slowapi limit when it
runs as a tool."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

from fastapi_mcp_routes import Limits, mcp_routes, mcp_tool
from fastapi_mcp_routes.transport.rate_limit import store_storage
from tests.support.jsonrpc import JSON_ONLY, call_tool, rpc

LIST_TOOLS = rpc("tools/list")


def make_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, sessions=False, **options))
    return app


def test_over_the_endpoint_budget_is_429_with_retry_after_per_caller() -> None:
    app = make_app(limits=Limits(rate_limit="2/minute"))
    with (
        TestClient(app, client=("198.51.100.1", 1000)) as first,
        TestClient(app, client=("198.51.100.2", 1000)) as other,
    ):
        assert [first.post("/mcp", json=LIST_TOOLS, headers=JSON_ONLY).status_code for _ in range(2)] == [200, 200]
        refused = first.post("/mcp", json=LIST_TOOLS, headers=JSON_ONLY)
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["error"]["code"] == -32600
        assert other.post("/mcp", json=LIST_TOOLS, headers=JSON_ONLY).status_code == 200  # its own bucket


def test_the_apps_slowapi_limiter_keeps_the_endpoint_budget_and_route_limits_become_error_results() -> None:
    limiter = Limiter(key_func=get_remote_address)
    app = make_app(limits=Limits(rate_limit="100/minute"))
    app.state.limiter = limiter
    app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

    @mcp_tool()
    @app.get("/search")
    @limiter.limit("1/minute")
    def search(request: Request) -> dict[str, str]:
        return {"found": "x"}

    with TestClient(app, client=("198.51.100.9", 1000)) as client:
        assert call_tool(client, "search", headers=JSON_ONLY)["structuredContent"] == {"found": "x"}
        limited = call_tool(client, "search", headers=JSON_ONLY)
        assert client.get("/search").status_code == 429  # REST shares the route's bucket, keyed by the same IP
    assert limited["isError"] is True
    assert limited["content"][0]["text"].startswith("HTTP 429 (rate limited: retry later)")


def test_a_bad_rate_limit_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="rate_limit must be slowapi syntax"):
        mcp_routes(FastAPI(), limits=Limits(rate_limit="lots"))


def test_a_store_client_the_limits_library_cannot_take_is_said_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_routes"):
        assert store_storage(object(), "app:limits") is None
    assert "counts in this process's memory, one budget per process" in caplog.text
    assert "object is not a redis-py or valkey asyncio client" in caplog.text
