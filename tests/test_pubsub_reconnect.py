"""Nothing lost when a process's pub/sub connection to Redis drops and comes back: what was
published meanwhile (a client's answer to a question, a cancellation, session news, a resource
update, a task change) reaches its listener once the connection is back, in order and once.

The fault is real: the listening store reaches Redis through a TCP relay the test cuts (every
connection through it drops, new ones are refused) while another store, or another process,
publishes directly; then the relay lets connections through again."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import redis
import redis.asyncio

from fastapi_mcp_routes.store.base import MISSED
from fastapi_mcp_routes.store.redis import RedisStore
from fastapi_mcp_routes.store.redis.pubsub import KEEP_MAX_BYTES, KEEP_S
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from tests.support.apps import notes_app
from tests.support.cluster import RedisCluster
from tests.support.deployments import SECRET, deployment_env
from tests.support.jsonrpc import open_session, rpc, tool_call
from tests.support.processes import serve_processes
from tests.support.redis import RedisLink, redis_link
from tests.support.runs import COLOUR, ELICITATION, WORKERS_APP
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages
from tests.support.waits import WAIT_S
from tests.test_replicas import messages_of, open_session_at

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

TOPICS = ("reply/a1/s1", "news", "updates", "tasks", "ended/a1")


@asynccontextmanager
async def linked_stores(redis_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore, RedisLink]]:
    """A listening store through a relay the test can cut, and a publishing one straight to Redis."""
    prefix = f"test-{secrets.token_hex(4)}:"
    with redis_link(redis_url) as link:
        listening = RedisStore.from_url(link.url, prefix=prefix, socket_timeout=2.0, socket_connect_timeout=2.0)
        publishing = RedisStore.from_url(redis_url, prefix=prefix)
        try:
            yield listening, publishing, link
        finally:
            await listening.aclose()
            await publishing.aclose()


async def read(inbox: Any, count: int) -> list[bytes]:
    with anyio.fail_after(WAIT_S):
        return [await inbox.receive() for _ in range(count)]


async def nothing_more(inbox: Any) -> None:
    with pytest.raises(anyio.WouldBlock):
        inbox.receive_nowait()


async def test_what_was_published_while_the_connection_was_cut_arrives_once_it_is_back(redis_url: str) -> None:
    async with linked_stores(redis_url) as (listening, publishing, link), AsyncExitStack() as stack:
        inboxes = {topic: await stack.enter_async_context(listening.subscribe(topic, capacity=64)) for topic in TOPICS}
        for topic in TOPICS:
            await publishing.publish(topic, b"before")
        for topic, inbox in inboxes.items():
            assert await read(inbox, 1) == [b"before"], topic
        link.cut()
        for number in range(10):
            for topic in TOPICS:
                await publishing.publish(topic, b"cut %d" % number)
        link.restore()
        for topic, inbox in inboxes.items():
            assert await read(inbox, 10) == [b"cut %d" % number for number in range(10)], topic
        # Live again, and nothing handed over twice (a replay overlaps what comes live).
        for topic in TOPICS:
            await publishing.publish(topic, b"after")
        for topic, inbox in inboxes.items():
            assert await read(inbox, 1) == [b"after"], topic
            await nothing_more(inbox)


async def test_a_listener_is_not_handed_what_was_published_before_it_joined(redis_url: str) -> None:
    async with linked_stores(redis_url) as (listening, publishing, link):
        await publishing.publish("news", b"old")
        await anyio.sleep(0.05)  # the old message is older than the listener on Redis's clock
        async with listening.subscribe("news", capacity=8) as inbox:
            link.cut()
            await publishing.publish("news", b"while cut")
            link.restore()
            assert await read(inbox, 1) == [b"while cut"]  # the replay after the reconnect
            await publishing.publish("news", b"live")
            assert await read(inbox, 1) == [b"live"]
            await nothing_more(inbox)


async def test_each_listener_of_a_topic_gets_what_it_missed_and_no_more(redis_url: str) -> None:
    async with (
        linked_stores(redis_url) as (listening, publishing, link),
        listening.subscribe("news", capacity=8) as early,
    ):
        await publishing.publish("news", b"one")
        assert await read(early, 1) == [b"one"]
        async with listening.subscribe("news", capacity=8) as late:
            link.cut()
            await publishing.publish("news", b"two")
            link.restore()
            assert await read(early, 1) == [b"two"]
            assert await read(late, 1) == [b"two"]
            await nothing_more(early)
            await nothing_more(late)


async def test_a_topics_log_expires_on_its_own(redis_url: str) -> None:
    async with linked_stores(redis_url) as (_, publishing, _link):
        await publishing.publish("reply/a9/s9", b"answer")
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            keys = [key async for key in client.scan_iter(match=f"{publishing._prefix}*")]
            assert keys, "the message was kept in a log"
            for key in keys:
                assert 0 < await client.pttl(key) <= KEEP_S * 1000
        finally:
            await client.aclose()


# -- across processes: a question answered, a call cancelled, while the asker's connection is cut --


@pytest.fixture
def asker_behind_a_link(redis_url: str) -> Iterator[tuple[str, str, RedisLink]]:
    """Two processes sharing a secret and Redis: the first reaches Redis through a relay the
    test cuts, the second directly. Yields their URLs and the relay."""
    with redis_link(redis_url) as link:
        first_env, second_env = deployment_env(link.url), deployment_env(redis_url)
        with (
            serve_processes(WORKERS_APP, env=first_env) as first,
            serve_processes(WORKERS_APP, env=second_env) as second,
        ):
            yield first, second, link


async def test_an_answer_given_to_another_process_while_the_askers_connection_is_cut_is_not_lost(
    asker_behind_a_link: tuple[str, str, RedisLink],
) -> None:
    first, second, link = asker_behind_a_link
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first, ELICITATION)
        async with http.stream("POST", f"{first}/mcp", json=tool_call("ask", request_id=5), headers=headers) as call:
            messages = messages_of(call)
            question = await anext(messages)
            assert question.get("method") == "elicitation/create", question
            link.cut()  # the asker hears nothing from Redis now
            reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": COLOUR}}
            answered = await http.post(f"{second}/mcp", json=reply, headers=headers)
            assert answered.status_code == 202, answered.text  # published, while nobody could hear it
            link.restore()
            with anyio.fail_after(WAIT_S):  # not the question's 300 s: the answer comes on the reconnect
                answer = await anext(messages)
    assert answer["result"]["structuredContent"]["content"] == COLOUR, answer


async def test_an_answer_too_large_to_keep_given_while_the_askers_connection_is_cut_ends_the_call_at_once(
    asker_behind_a_link: tuple[str, str, RedisLink],
) -> None:
    first, second, link = asker_behind_a_link
    large = {"colour": "x" * (KEEP_MAX_BYTES + 1)}
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first, ELICITATION)
        async with http.stream("POST", f"{first}/mcp", json=tool_call("ask", request_id=5), headers=headers) as call:
            messages = messages_of(call)
            question = await anext(messages)
            link.cut()
            reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": large}}
            assert (await http.post(f"{second}/mcp", json=reply, headers=headers)).status_code == 202
            link.restore()
            with anyio.fail_after(WAIT_S):  # told at once, not after the question's 300 s
                answer = await anext(messages)
    assert answer["result"]["isError"] is True, answer
    assert "too large to keep" in answer["result"]["content"][0]["text"], answer


async def test_a_cancellation_given_to_another_process_while_the_runners_connection_is_cut_is_not_lost(
    asker_behind_a_link: tuple[str, str, RedisLink],
) -> None:
    first, second, link = asker_behind_a_link
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        headers = await open_session_at(http, first)
        message = tool_call("slow", request_id=7, progress_token="slow")
        async with http.stream("POST", f"{first}/mcp", json=message, headers=headers) as call:
            messages = messages_of(call)
            started = await anext(messages)
            assert started.get("method") == "notifications/progress", started
            link.cut()
            cancel = rpc("notifications/cancelled", {"requestId": 7, "reason": "the user stopped it"}, None)
            assert (await http.post(f"{second}/mcp", json=cancel, headers=headers)).status_code == 202
            link.restore()
            with anyio.fail_after(WAIT_S):  # the slow call would run far longer
                rest = [seen async for seen in messages]
    assert not any("result" in seen for seen in rest), rest  # a cancelled call gets no answer


# -- on a Redis Cluster: sharded pub/sub on the node that holds the topics --------------------------


async def test_on_a_cluster_what_was_published_while_the_connection_was_killed_arrives(cluster: RedisCluster) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    url = cluster.url.replace("redis://", "redis+cluster://")
    listening, publishing = RedisStore.from_url(url, prefix=prefix), RedisStore.from_url(url, prefix=prefix)
    node = redis.asyncio.Redis(port=cluster.owner_port(f"{prefix}{{topics}}:news"))
    try:
        async with AsyncExitStack() as stack:
            inboxes = [await stack.enter_async_context(listening.subscribe(topic, capacity=64)) for topic in TOPICS]
            sent = 0
            for _ in range(3):  # each round: the node drops the connection, messages go out at once
                await node.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
                for _ in range(5):
                    for topic in TOPICS:
                        await publishing.publish(topic, b"%d" % sent)
                    sent += 1
            for inbox in inboxes:
                assert await read(inbox, sent) == [b"%d" % number for number in range(sent)]
                await nothing_more(inbox)
    finally:
        await node.aclose()
        await listening.aclose()
        await publishing.aclose()


async def test_garbage_in_a_topics_log_or_channel_loses_nothing_else(redis_url: str) -> None:
    async with linked_stores(redis_url) as (listening, publishing, link):
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            async with listening.subscribe("news", capacity=8) as inbox:
                log = f"{publishing.prefix}{{topics}}:log:news"
                channel = f"{publishing.prefix}{{topics}}:news"
                await client.set(log, b"not a log")  # replaced with garbage: a fresh log
                await client.publish(channel, b"no id at all")  # a message no store published
                assert await publishing.publish("news", b"one") is True
                assert await read(inbox, 1) == [b"one"]
                link.cut()
                await client.delete(log)
                await client.set(log, b"garbage again")  # the log a replay reads is not one
                link.restore()
                await publishing.publish("news", b"two")
                assert await read(inbox, 1) == [b"two"]
                await nothing_more(inbox)
        finally:
            await client.aclose()


async def test_a_message_too_large_to_keep_is_handed_over_live_and_missed_as_such(redis_url: str) -> None:
    large = b"x" * (KEEP_MAX_BYTES + 1)
    async with linked_stores(redis_url) as (listening, publishing, link):
        async with listening.subscribe("news", capacity=8) as inbox:
            await publishing.publish("news", large)
            assert await read(inbox, 1) == [large]  # live, whatever its size
            link.cut()
            await publishing.publish("news", large)  # missed, and not kept: what a client sends must not fill Redis
            await publishing.publish("news", b"small")
            link.restore()
            assert await read(inbox, 2) == [MISSED, b"small"]  # told it missed one, not left waiting
            await nothing_more(inbox)
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            log = await client.lrange(f"{publishing.prefix}{{topics}}:log:news", 0, -1)
        finally:
            await client.aclose()
        assert max(len(entry) for entry in log) < 100  # the large ones are kept as their ids alone


# -- what a client's replies can make Redis keep ------------------------------------------------------


def test_replies_that_no_question_waits_for_are_neither_kept_nor_passed_on(redis_url: str) -> None:
    # A client floods replies with ids of its own and large results: Redis keeps nothing of them.
    prefix = f"test-{secrets.token_hex(4)}:"
    app = notes_app(secret=SECRET, store=RedisStore.from_url(redis_url, prefix=prefix))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        session = open_session(http, capabilities=ELICITATION)
        for number in range(50):
            reply = {"jsonrpc": "2.0", "id": f"s{number:012d}", "result": {"filler": "x" * 100_000}}
            assert http.post("/mcp", json=reply, headers=session).status_code == 202
    with redis.Redis.from_url(redis_url) as client:
        assert list(client.scan_iter(match=f"{prefix}{{topics}}:log:reply/*")) == []


def test_a_question_takes_its_first_reply_and_a_second_is_dropped(redis_url: str) -> None:
    prefix = f"test-{secrets.token_hex(4)}:"
    app = notes_app(secret=SECRET, store=RedisStore.from_url(redis_url, prefix=prefix))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        session = open_session(http, capabilities=ELICITATION)
        with http.stream("POST", "/mcp", json=tool_call("ask", request_id=5), headers=session) as call:
            lines = call.iter_lines()
            question = next(iter_sse_messages(lines))
            assert question["method"] == "elicitation/create", question
            for action in ("accept", "decline"):
                reply = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": action, "content": {}}}
                assert http.post("/mcp", json=reply, headers=session).status_code == 202
            answer = next(message for message in iter_sse_messages(lines) if message.get("id") == 5)
    assert answer["result"]["structuredContent"] == {"action": "accept"}, answer
    with redis.Redis.from_url(redis_url) as client:
        [log] = list(client.scan_iter(match=f"{prefix}{{topics}}:log:reply/*"))
        assert client.llen(log) == 1  # the first reply only


# How often a test kills the store's pub/sub connection: often enough that kills land while the
# reader connects again, seldom enough that it does connect between them.
KILL_EVERY_S = 0.05
SUBSCRIPTIONS = 30


async def test_a_subscription_waits_out_a_connection_killed_again_and_again_while_redis_is_up(redis_url: str) -> None:
    # Redis is up all along; only the store's pub/sub connection is killed, again and again,
    # so a kill may land while the reader is connecting again. A subscription made meanwhile
    # must wait for the connection to come back, never fail as if Redis could not be reached
    # (a question asked then would end in an error, though nothing was down).
    prefix = f"test-{secrets.token_hex(4)}:"
    store = RedisStore.from_url(redis_url, prefix=prefix)
    killer = redis.asyncio.Redis.from_url(redis_url)
    failures: list[str] = []
    subscribed = 0

    async def kill_again_and_again(stop: anyio.Event) -> None:
        while not stop.is_set():
            await killer.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
            await anyio.sleep(KILL_EVERY_S)  # not synchronisation: how often the connection dies

    try:
        async with store.subscribe("warm-up"):
            pass
        stop = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(kill_again_and_again, stop)
            for number in range(SUBSCRIPTIONS):
                try:
                    async with store.subscribe(f"topic-{number}"):
                        subscribed += 1
                except StoreUnavailable as down:
                    failures.append(down.reason)
            stop.set()
    finally:
        await killer.aclose()
        await store.aclose()
    assert not failures, f"{len(failures)} of {SUBSCRIPTIONS} subscriptions failed with Redis up: {failures[:3]}"
    assert subscribed == SUBSCRIPTIONS
