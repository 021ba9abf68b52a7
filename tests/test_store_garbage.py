"""Records in Redis this release cannot read, and failures nothing foresaw: a corrupt session is a fresh start for that
session (404, and the client opens another), a task with a status the tasks extension does not
have is an unknown task; never a 500 or a traceback, and the server goes on serving."""

from __future__ import annotations

import dataclasses
import json
import logging
import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from fastapi_mcp_routes import RedisStore
from fastapi_mcp_routes.store.base import SessionRecord, TaskBounds, TaskRecord, Trust
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.store.redis.records import UnreadableRecord, read_session, read_task
from tests.support.apps import streaming_app
from tests.support.jsonrpc import HEADERS, initialize, open_session, rpc, tool_call
from tests.support.servers import serve
from tests.support.stores import Stores
from tests.support.waits import WAIT_S

GOOD_TASK: dict[str, Any] = {
    "id": "t1",
    "owner": "ab",
    "trust": 0,
    "tool": "notes_create",
    "runner": "9f2c",
    "status": "working",
    "created_ms": 1,
    "updated_ms": 1,
    "ttl_ms": 60_000,
}

UNREADABLE_TASKS = [
    b"not json",
    b"\xff\xfe",
    b"[1, 2]",
    b'{"id": "t1"}',
    *(
        json.dumps({**GOOD_TASK, name: value}).encode()
        for name, value in (
            ("status", "sleeping"),
            ("status", None),
            ("trust", 7),
            ("trust", True),
            ("owner", "not hex"),
            ("created_ms", "1"),
            ("outcome", [1]),
            ("message", 5),
        )
    ),
]


@pytest.mark.parametrize("raw", UNREADABLE_TASKS)
def test_a_task_record_of_another_shape_is_unreadable(raw: bytes) -> None:
    with pytest.raises(UnreadableRecord):
        read_task(raw)


def test_a_task_record_with_a_field_of_a_newer_release_still_reads() -> None:
    raw = json.dumps({**GOOD_TASK, "added_later": 1}).encode()
    assert read_task(raw).status == "working"


@pytest.mark.parametrize("raw", [b"{}", b"null", b'{"id": 1, "owner": "", "protocol_version": "x", "trust": 0}'])
def test_a_session_record_of_another_shape_is_unreadable(raw: bytes) -> None:
    with pytest.raises(UnreadableRecord):
        read_session(raw)


@pytest.mark.anyio
@pytest.mark.redis
async def test_a_task_whose_status_the_extension_lacks_is_not_found(
    redis_stores: Stores, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = redis_stores.make()
    record = TaskRecord("t1", b"alice", Trust.ANONYMOUS, "notes_create", "9f2c", "working", 1, 1, 60_000)
    await store.put_task(record, TaskBounds(max_per_owner=4, max_tasks=4))
    client = redis.Redis.from_url(redis_url)
    try:
        key = f"{redis_stores.prefix}{{tasks}}:task:t1"
        kept = dataclasses.asdict(record) | {"owner": "616c696365", "caller": "", "status": "sleeping"}
        client.set(key, json.dumps(kept).encode(), keepttl=True)
        with caplog.at_level(logging.WARNING, "fastapi_mcp_routes"):
            assert await store.find_task("t1") is None
        assert "ignored task 't1'" in caplog.text
        assert "'status' is 'sleeping'" in caplog.text
    finally:
        client.close()


@pytest.fixture
def served_on_redis(redis_url: str) -> Iterator[tuple[httpx.Client, redis.Redis, str]]:
    prefix = f"test-{secrets.token_hex(6)}:"
    store = RedisStore.from_url(redis_url, prefix=prefix)
    client = redis.Redis.from_url(redis_url)
    with serve(streaming_app(store=store)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        yield http, client, prefix
    client.close()


@pytest.mark.redis
@pytest.mark.parametrize("garbage", [b"not json", b'{"id": "x"}', b'{"id":"x","owner":"zz","protocol_version":1}'])
def test_a_session_whose_record_is_garbage_is_answered_404_and_the_server_serves_on(
    served_on_redis: tuple[httpx.Client, redis.Redis, str], garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    http, client, prefix = served_on_redis
    headers = open_session(http)
    [key] = [key for key in client.keys(f"{prefix}{{sessions}}:session:*") if client.hexists(key, "r")]
    client.hset(key, "r", garbage)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_routes"):
        answer = http.post("/mcp", json=tool_call("count", {"steps": 1}), headers=headers)
    assert answer.status_code == 404, answer.text
    assert answer.json()["error"]["code"] < 0
    assert "its record in Redis cannot be read" in caplog.text
    assert not client.exists(key)  # the record is gone: the session starts afresh
    reopened = open_session(http)
    assert http.post("/mcp", json=rpc("ping"), headers=reopened).status_code == 200


class _BrokenStore(MemoryStore):
    """A store whose session lookup fails in a way nothing foresaw."""

    async def find_session(self, session_id: str, idle_s: float) -> SessionRecord | None:
        raise RuntimeError("a value nobody foresaw")


def test_a_failure_nothing_foresaw_is_a_json_rpc_error_with_a_reference_not_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with serve(streaming_app(store=_BrokenStore())) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        headers = {**open_session(http)}
        with caplog.at_level(logging.ERROR, "fastapi_mcp_routes"):
            answer = http.post("/mcp", json=rpc("ping"), headers=headers)
        assert answer.status_code == 500
        assert answer.headers["content-type"].startswith("application/json")
        message = answer.json()["error"]["message"]
        assert message.startswith("Internal error: the request could not be handled. Reference: ")
        assert "nobody foresaw" not in answer.text
        assert "a value nobody foresaw" in caplog.text  # the traceback stays in the log
        assert http.post("/mcp", json=initialize(), headers=HEADERS).status_code == 200  # it serves on


# Found in review: a record nested past the JSON decoder's recursion limit raised
# RecursionError (not a ValueError) out of `_object`, and the endpoint answered 500.
DEEPLY_NESTED = b"[" * 100_000 + b"]" * 100_000


def test_a_session_record_nested_too_deeply_to_decode_is_unreadable() -> None:
    with pytest.raises(UnreadableRecord):
        read_session(DEEPLY_NESTED)


def test_a_task_record_nested_too_deeply_to_decode_is_unreadable() -> None:
    with pytest.raises(UnreadableRecord):
        read_task(b'{"id": ' + DEEPLY_NESTED + b"}")
