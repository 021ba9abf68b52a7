"""`RedisStore` on any Redis a team runs: a Redis Cluster (redis-py's and valkey-py's clients),
valkey-py's client on one Redis, a Sentinel-managed primary; the URLs that name each; a
Cluster node that goes down and comes back; garbage in a key on a Cluster. The store contract
itself runs on each in tests/test_store_contract.py."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
import redis
import redis.asyncio
import valkey.asyncio
from redis.asyncio.sentinel import Sentinel

from fastapi_mcp_routes import RedisStore
from fastapi_mcp_routes.store.base import SessionBounds, SessionRecord, Trust
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from tests.support.apps import streaming_app
from tests.support.cluster import RedisCluster, redis_cluster
from tests.support.jsonrpc import HEADERS, initialize, open_session, rpc, tool_call
from tests.support.redis import gone_redis_url
from tests.support.servers import serve
from tests.support.waits import WAIT_S

BOUNDS = SessionBounds(idle_s=60.0, max_sessions=10, max_per_owner=10)


def session(session_id: str) -> SessionRecord:
    return SessionRecord(session_id, b"alice", "2025-11-25", {}, {}, None, Trust.ANONYMOUS)


@pytest.fixture
async def cluster_store(cluster: RedisCluster) -> AsyncIterator[RedisStore]:
    store = RedisStore.from_url(cluster.store_url, prefix=f"test-{secrets.token_hex(6)}:")
    try:
        yield store
    finally:
        await store.aclose()


# -- the clients and the URLs ------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.anyio
async def test_a_cluster_url_makes_a_store_on_the_cluster(cluster_store: RedisStore) -> None:
    assert cluster_store.cluster is True
    assert isinstance(cluster_store.client, redis.asyncio.RedisCluster)
    await cluster_store.open_session(session("a1"), BOUNDS)
    assert await cluster_store.find_session("a1", 60) is not None


@pytest.mark.redis
@pytest.mark.anyio
async def test_each_record_family_lives_in_one_slot_of_the_cluster(cluster: RedisCluster) -> None:
    prefix = f"test-{secrets.token_hex(6)}:"
    store = RedisStore.from_url(cluster.store_url, prefix=prefix)
    client = redis.asyncio.RedisCluster.from_url(cluster.url)
    try:
        for number in range(8):
            await store.open_session(session(f"s{number}"), BOUNDS)
            assert await store.start_stream(f"s{number}", 4) is not None
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        assert len(keys) > 8
        slots = {client.keyslot(key) for key in keys}
        assert slots == {client.keyslot(f"{prefix}{{sessions}}")}
    finally:
        await client.aclose()
        await store.aclose()


@pytest.mark.redis
@pytest.mark.anyio
async def test_a_valkey_client_makes_a_store_whose_outage_is_store_unavailable() -> None:
    client = valkey.asyncio.Valkey.from_url(gone_redis_url().replace("redis://", "valkey://"))
    store = RedisStore(client)
    try:
        assert store.client is client
        assert store.cluster is False
        with anyio.fail_after(WAIT_S), pytest.raises(StoreUnavailable):
            await store.find_session("a1", 60)
    finally:
        await store.aclose()
        await client.aclose()


@pytest.mark.redis
@pytest.mark.anyio
async def test_a_valkey_cluster_client_is_a_cluster(cluster: RedisCluster) -> None:
    client = valkey.asyncio.ValkeyCluster.from_url(cluster.url.replace("redis://", "valkey://"))
    store = RedisStore(client, prefix=f"test-{secrets.token_hex(6)}:")
    try:
        assert store.cluster is True
        await store.open_session(session("a1"), BOUNDS)
        assert await store.find_session("a1", 60) is not None
    finally:
        await store.aclose()
        await client.aclose()


# Made, never connected: the store refuses them before any command.
DECODING_CLIENTS = [
    redis.asyncio.Redis(decode_responses=True),
    redis.asyncio.RedisCluster(host="127.0.0.1", port=7000, decode_responses=True),
    Sentinel([("127.0.0.1", 26379)]).master_for("primary", decode_responses=True),
    valkey.asyncio.Valkey(decode_responses=True),
    valkey.asyncio.ValkeyCluster(host="127.0.0.1", port=7000, decode_responses=True),
]


@pytest.mark.parametrize("client", DECODING_CLIENTS, ids=lambda client: type(client).__name__)
def test_a_client_of_any_kind_that_decodes_replies_is_refused(client: object) -> None:
    with pytest.raises(ValueError, match="decode_responses=True"):
        RedisStore(client)


@pytest.mark.parametrize("prefix", ["app{1}:", "{app:", "app}:"])
def test_a_prefix_with_a_brace_is_refused_as_it_would_change_the_hash_tags(prefix: str) -> None:
    with pytest.raises(ValueError, match="must not contain"):
        RedisStore.from_url("redis://127.0.0.1:6379/0", prefix=prefix)


def test_a_cluster_url_names_its_nodes_and_credentials() -> None:
    store = RedisStore.from_url("rediss+cluster://user:s%40cret@node-a:7000,node-b,[::1]:7002")
    client = store.client
    assert isinstance(client, redis.asyncio.RedisCluster)
    nodes = [(node.host, node.port) for node in client.nodes_manager.startup_nodes.values()]
    assert nodes == [("node-a", 7000), ("node-b", 6379), ("::1", 7002)]
    options = client.get_connection_kwargs()
    assert (options["username"], options["password"]) == ("user", "s@cret")
    assert "ssl" in str(client.nodes_manager.connection_kwargs.get("connection_class", "")).lower()
    assert repr(store) == (
        "RedisStore(rediss+cluster://user:***@node-a:7000,node-b,[::1]:7002, prefix='fastapi-mcp-routes:')"
    )


def test_a_sentinel_url_names_the_sentinels_the_primary_and_its_database() -> None:
    store = RedisStore.from_url("redis+sentinel://:pw@sentinel-a:26380,sentinel-b/orders/2")
    primary = store.client
    assert isinstance(primary, redis.asyncio.Redis)
    pool = primary.connection_pool
    assert pool.service_name == "orders"  # type: ignore[attr-defined]
    sentinels = [sentinel.get_connection_kwargs() for sentinel in pool.sentinel_manager.sentinels]  # type: ignore[attr-defined]
    assert [(kwargs["host"], kwargs["port"]) for kwargs in sentinels] == [("sentinel-a", 26380), ("sentinel-b", 26379)]
    assert sentinels[0].get("password") is None  # the credentials are the primary's
    assert (pool.connection_kwargs["password"], pool.connection_kwargs["db"]) == ("pw", 2)
    assert store.cluster is False


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("redis+cluster://node-a:7000/3", "database 0 only"),
        ("redis+cluster://node-a:7000/?ssl_cert_reqs=none", "keyword arguments"),
        ("redis+sentinel://sentinel-a:26379", "/primary-name"),
        ("redis+sentinel://sentinel-a:26379/orders/x", "/primary-name"),
        ("redis+cluster://user:hunter2@:7000", "needs a host"),
        ("redis+cluster://node-a:port", "a port is a number"),
    ],
)
def test_a_url_that_names_no_deployment_clearly_is_refused(url: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule) as refused:
        RedisStore.from_url(url)
    assert "hunter2" not in str(refused.value)


# -- faults on a cluster -----------------------------------------------------------------------


@pytest.mark.redis
@pytest.mark.anyio
async def test_while_the_node_holding_the_sessions_is_down_the_store_is_unavailable_then_works_again() -> None:
    prefix = f"test-{secrets.token_hex(6)}:"
    with redis_cluster() as own:
        store = RedisStore.from_url(own.store_url, prefix=prefix)
        try:
            await store.open_session(session("a1"), BOUNDS)
            with own.owner_down(f"{prefix}{{sessions}}"):
                for _ in range(3):  # the first call after the node went, and the ones after
                    with anyio.fail_after(WAIT_S), pytest.raises(StoreUnavailable):
                        await store.find_session("a1", 60)
            # The node kept nothing on disk, so it is back empty; the store is served again.
            assert await store.find_session("a1", 60) is None
            await store.open_session(session("a2"), BOUNDS)
            assert await store.find_session("a2", 60) is not None
        finally:
            await store.aclose()


@pytest.mark.redis
def test_while_the_node_holding_the_sessions_is_down_requests_are_answered_503_never_500() -> None:
    prefix = f"test-{secrets.token_hex(6)}:"
    with redis_cluster() as own:
        store = RedisStore.from_url(own.store_url, prefix=prefix)
        with serve(streaming_app(store=store)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
            headers = open_session(http)
            with own.owner_down(f"{prefix}{{sessions}}"):
                during = http.post("/mcp", json=tool_call("count", {"steps": 1}), headers=headers)
                opening = http.post("/mcp", json=initialize(), headers=HEADERS)
            reopened = open_session(http)
            after = http.post("/mcp", json=rpc("ping"), headers=reopened)
    for answer in (during, opening):
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"]
        assert "store" in answer.json()["error"]["message"]
    assert after.status_code == 200, after.text


@pytest.mark.redis
@pytest.mark.parametrize("garbage", [b"not json", b'{"id": "x"}'])
def test_a_session_whose_record_is_garbage_on_a_cluster_is_answered_404_and_the_server_serves_on(
    cluster: RedisCluster, garbage: bytes
) -> None:
    prefix = f"test-{secrets.token_hex(6)}:"
    store = RedisStore.from_url(cluster.store_url, prefix=prefix)
    client = redis.RedisCluster.from_url(cluster.url)
    try:
        with serve(streaming_app(store=store)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
            headers = open_session(http)
            [key] = list(client.scan_iter(match=f"{prefix}{{sessions}}:session:*"))
            client.hset(key, "r", garbage)
            answer = http.post("/mcp", json=tool_call("count", {"steps": 1}), headers=headers)
            assert answer.status_code == 404, answer.text
            assert not client.exists(key)  # a fresh start for that session
            reopened = open_session(http)
            assert http.post("/mcp", json=rpc("ping"), headers=reopened).status_code == 200
    finally:
        client.close()
