"""The endpoint's rate limit on a real Redis: one budget for every process however the store was
built, counted without holding the event loop, and a Redis that cannot be reached answered 503.

The event loop is shown free by order, not by time: the link to Redis holds the limiter's write
(tests/support/redis.py `RedisLink.hold`) while a plain route is asked for, and that route
answers while the limited request still waits on Redis.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest
import redis
import redis.asyncio
from fastapi import FastAPI
from slowapi import Limiter
from slowapi.util import get_remote_address

from fastapi_mcp_routes import Limits, RedisStore
from tests.support.apps import notes_app
from tests.support.cluster import RedisCluster
from tests.support.deployments import SECRET, deployment_env
from tests.support.jsonrpc import HEADERS, initialize, rpc
from tests.support.processes import serve_processes
from tests.support.redis import RedisLink, gone_redis_url, redis_link
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.redis

# What every counter of the endpoint's budget has in its key (transport/rate_limit.py).
NAMESPACE = b"fastapi_mcp_routes.endpoint"
LIMITED_APP = "tests.limited_app:app"


def with_a_plain_route(app: FastAPI) -> FastAPI:
    @app.get("/plain")
    def plain() -> dict[str, bool]:
        return {"plain": True}

    return app


def store_from_a_client(redis_url: str, prefix: str) -> RedisStore:
    return RedisStore(redis.asyncio.Redis.from_url(redis_url), prefix=prefix)


def test_a_store_built_from_a_client_keeps_one_budget_for_two_processes(redis_url: str) -> None:
    env = {
        **deployment_env(),
        "LIMITED_APP_REDIS_URL": redis_url,
        "LIMITED_APP_PREFIX": f"test-{secrets.token_hex(4)}:",
        "LIMITED_APP_RATE": "3/minute",
    }
    with ExitStack() as stack:
        urls = [stack.enter_context(serve_processes(LIMITED_APP, env=env)) for _ in range(2)]
        statuses = []
        for turn in range(4):
            with httpx.Client(base_url=urls[turn % 2], timeout=WAIT_S) as http:
                statuses.append(http.post("/mcp", json=initialize(), headers=HEADERS).status_code)
    assert statuses == [200, 200, 200, 429]


def test_the_budget_of_a_store_built_from_a_client_lives_under_the_stores_prefix(redis_url: str) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    app = notes_app(secret=SECRET, store=store_from_a_client(redis_url, prefix), limits=Limits(rate_limit="5/minute"))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        assert http.post("/mcp", json=initialize(), headers=HEADERS).status_code == 200
    with redis.Redis.from_url(redis_url) as client:
        keys = client.keys(f"{prefix}limits:*")
    assert len(keys) == 1
    assert NAMESPACE in keys[0]


def a_plain_route_answers_while_a_limited_request_waits_on_redis(app: FastAPI, link: RedisLink) -> None:
    """The steps both loop tests take: warm up, hold the link, send a limited request, see its
    count held on the way to Redis, ask for the plain route (it answers), then release."""
    with serve(with_a_plain_route(app)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        assert http.post("/mcp", json=initialize(), headers=HEADERS).status_code == 200  # connected, scripts loaded
        link.hold()
        try:
            with ThreadPoolExecutor(1) as pool:
                limited = pool.submit(http.post, "/mcp", json=initialize(request_id=1), headers=HEADERS)
                assert link.wait_held(NAMESPACE, WAIT_S), "the limited request never reached Redis"
                assert http.get("/plain").json() == {"plain": True}
                assert not limited.done()  # its count is still held on the way to Redis
                link.release()
                assert limited.result(WAIT_S).status_code == 200
        finally:
            link.release()


def test_a_limited_request_waiting_on_the_stores_redis_does_not_hold_the_event_loop(redis_url: str) -> None:
    with redis_link(redis_url) as link:
        store = store_from_a_client(link.url, f"test-{secrets.token_hex(4)}:")
        app = notes_app(secret=SECRET, store=store, limits=Limits(rate_limit="100/minute"))
        a_plain_route_answers_while_a_limited_request_waits_on_redis(app, link)


def test_a_limited_request_waiting_on_slowapis_redis_does_not_hold_the_event_loop(redis_url: str) -> None:
    with redis_link(redis_url) as link:
        app = notes_app(secret=SECRET, limits=Limits(rate_limit="100/minute"))
        app.state.limiter = Limiter(key_func=get_remote_address, storage_uri=link.url, key_prefix=secrets.token_hex(4))
        a_plain_route_answers_while_a_limited_request_waits_on_redis(app, link)


def test_slowapis_storage_keeps_one_budget_for_two_processes(redis_url: str) -> None:
    prefix = secrets.token_hex(4)
    with ExitStack() as stack:
        urls = []
        for _ in range(2):
            app = notes_app(secret=SECRET, limits=Limits(rate_limit="3/minute"))
            app.state.limiter = Limiter(key_func=get_remote_address, storage_uri=redis_url, key_prefix=prefix)
            urls.append(stack.enter_context(serve(app)))
        statuses = []
        for turn in range(4):
            with httpx.Client(base_url=urls[turn % 2], timeout=WAIT_S) as http:
                statuses.append(http.post("/mcp", json=initialize(), headers=HEADERS).status_code)
    assert statuses == [200, 200, 200, 429]


def test_a_store_built_from_a_client_on_a_redis_that_is_gone_is_answered_503() -> None:
    # Without sessions, listing tools needs nothing of the store but the budget.
    store = store_from_a_client(gone_redis_url(), "test:")
    app = notes_app(secret=SECRET, store=store, sessions=False, limits=Limits(rate_limit="100/minute"))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=rpc("tools/list"), headers=HEADERS)
    assert response.status_code == 503, response.text
    assert response.headers.get("retry-after")


def test_slowapis_storage_on_a_redis_that_is_gone_is_answered_503() -> None:
    app = notes_app(secret=SECRET, limits=Limits(rate_limit="100/minute"))
    app.state.limiter = Limiter(key_func=get_remote_address, storage_uri=gone_redis_url())
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        response = http.post("/mcp", json=initialize(), headers=HEADERS)
    assert response.status_code == 503, response.text
    assert response.headers.get("retry-after")


@pytest.mark.parametrize("made", ["url", "client"])
def test_servers_whose_store_is_on_a_cluster_keep_one_budget(cluster: RedisCluster, made: str) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    url = cluster.url.replace("redis://", "redis+cluster://")

    def store() -> RedisStore:
        if made == "url":
            return RedisStore.from_url(url, prefix=prefix)
        return RedisStore(redis.asyncio.RedisCluster.from_url(cluster.url), prefix=prefix)

    with ExitStack() as stack:
        urls = [
            stack.enter_context(serve(notes_app(secret=SECRET, store=store(), limits=Limits(rate_limit="3/minute"))))
            for _ in range(2)
        ]
        statuses = []
        for turn in range(4):
            with httpx.Client(base_url=urls[turn % 2], timeout=WAIT_S) as http:
                statuses.append(http.post("/mcp", json=initialize(), headers=HEADERS).status_code)
    assert statuses == [200, 200, 200, 429]
