"""Updates reach only who listens for them: a resource's update goes to the streams that watch
its URI and wakes no other; a stream keeps one pending notice per URI (and per task), so the
last update of what it watches always comes; a subscription made in one process reaches the
GET stream another holds (server/fanout.py, server/resources/updates.py)."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import httpx
import pytest

from fastapi_mcp_routes import Limits, RedisStore, Tasks
from fastapi_mcp_routes.server.fanout import Fanout, Watcher
from fastapi_mcp_routes.server.resources.updates import SUBSCRIPTIONS_MARK, TOPIC, ResourceUpdates
from fastapi_mcp_routes.server.sessions.manager import uri_digest
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.server.tasks.records import ended
from fastapi_mcp_routes.server.tasks.runs import TaskRuns
from fastapi_mcp_routes.store.base import TaskBounds, TaskRecord, Trust
from fastapi_mcp_routes.store.memory import MemoryStore
from tests.resources_app import notes_resources_app
from tests.support.deployments import one_process
from tests.support.discovery import registry_of
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, final_message, initialize, rpc
from tests.support.servers import serve
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

UPDATED = "notifications/resources/updated"
SECRET = "a-test-secret-shared-by-every-process-0123456789"


async def messages_of(stream: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in stream.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])


async def open_session(http: httpx.AsyncClient) -> dict[str, str]:
    sent = {**HEADERS, "mcp-protocol-version": SESSION_VERSION}
    opened = await http.post("/mcp", json=initialize(), headers=sent)
    assert opened.status_code == 200, opened.text
    return {**sent, "mcp-session-id": opened.headers["mcp-session-id"]}


async def subscribe(http: httpx.AsyncClient, headers: dict[str, str], uri: str) -> None:
    answered = final_message(await http.post("/mcp", json=rpc("resources/subscribe", {"uri": uri}), headers=headers))
    assert answered is not None
    assert "error" not in answered, answered


@asynccontextmanager
async def get_stream(http: httpx.AsyncClient, headers: dict[str, str]) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """The session's GET stream, open (watching) once entered; yields its messages."""
    async with http.stream("GET", "/mcp", headers={**headers, "accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        yield messages_of(stream)


@asynccontextmanager
async def listen_stream(http: httpx.AsyncClient, uris: list[str]) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """A `subscriptions/listen` stream for `uris`, acknowledged once entered; yields its messages."""
    request = stateless_request("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
    async with http.stream("POST", "/mcp", json=request, headers=stateless_headers("subscriptions/listen")) as stream:
        assert stream.status_code == 200
        messages = messages_of(stream)
        assert (await anext(messages))["method"] == "notifications/subscriptions/acknowledged"
        yield messages


def uri_of(message: dict[str, Any]) -> str:
    assert message["method"] == UPDATED
    return str(message["params"]["uri"])


# -- an update reaches the streams that watch it, and no other ----------------------------------


async def test_a_session_stream_hears_the_resources_its_session_subscribed_to_and_no_other() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http:
            watching, idle = await open_session(http), await open_session(http)
            await subscribe(http, watching, "notes://1")
            await subscribe(http, idle, "notes://2")
            async with get_stream(http, watching) as heard, get_stream(http, idle) as other:
                await http.put("/notes/1", params={"text": "for the first session"})
                await http.put("/notes/2", params={"text": "for the second"})
                # The second session's first notice is of its own resource: the first's never came.
                assert [uri_of(await anext(heard)), uri_of(await anext(other))] == ["notes://1", "notes://2"]


async def test_a_listen_stream_hears_the_resources_it_names_and_no_other() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with (
            httpx.AsyncClient(base_url=url) as http,
            listen_stream(http, ["notes://1"]) as heard,
            listen_stream(http, ["notes://2"]) as other,
        ):
            await http.put("/notes/1", params={"text": "for the first stream"})
            await http.put("/notes/2", params={"text": "for the second"})
            assert [uri_of(await anext(heard)), uri_of(await anext(other))] == ["notes://1", "notes://2"]


class CountedWatcher(Watcher):
    """A watcher counting the notices handed to it (each one a wake-up of its stream)."""

    notices = 0

    def notice(self, key: str, value: str) -> None:
        CountedWatcher.notices += 1
        super().notice(key, value)


async def test_idle_streams_are_not_woken_by_an_update_they_do_not_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every stream's watcher counts what it is handed; only the one watching the URI is.
    monkeypatch.setattr("fastapi_mcp_routes.transport.stateless.Watcher", CountedWatcher)
    monkeypatch.setattr(CountedWatcher, "notices", 0)
    with serve(notes_resources_app(limits=Limits(max_streams_per_caller=64))) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, AsyncExitStack() as streams:
            for _ in range(40):
                await streams.enter_async_context(listen_stream(http, ["notes://2"]))
            heard = await streams.enter_async_context(listen_stream(http, ["notes://1"]))
            for number in range(10):
                await http.put("/notes/1", params={"text": f"version {number}"})
            assert uri_of(await anext(heard)) == "notes://1"
    assert 1 <= CountedWatcher.notices <= 10  # the one stream watching notes://1, once per write at most


# -- one pending notice per URI: the last update always comes ---------------------------------


async def test_a_burst_of_updates_to_one_uri_leaves_one_notice_and_the_next_update_another() -> None:
    store = MemoryStore()
    updates = ResourceUpdates(store, registry_of(notes_resources_app()))
    async with anyio.create_task_group() as readers:
        await readers.start(updates.serve)
        with updates.watching(Watcher([uri_digest("notes://1"), uri_digest("notes://2")])) as watcher:
            for number in range(1000):
                await updates.updated("notes://1")
                if number % 100 == 0:
                    await anyio.wait_all_tasks_blocked()  # writes come as requests do, not in one go
            await updates.updated("notes://2")
            await updates.updated("notes://1")
            await anyio.wait_all_tasks_blocked()  # the reader has handed every update over
            with anyio.fail_after(WAIT_S):
                assert await watcher.taken() == ["notes://1", "notes://2"]  # in order of first arrival
                await updates.updated("notes://1")
                assert await watcher.taken() == ["notes://1"]
        readers.cancel_scope.cancel()


async def test_a_watcher_holds_at_most_one_notice_per_key_it_watches() -> None:
    fanout = Fanout()
    watcher = Watcher(["a", "b"])
    with fanout.watching(watcher):
        for _ in range(100):
            for key in ("b", "a", "c"):
                fanout.notify(key, key)
        watcher.watch(["a"])  # a key it no longer watches takes its pending notice with it
        fanout.notify("b", "b")
        assert (fanout.watched("a"), fanout.watched("b"), fanout.watched("c")) == (1, 0, 0)
    assert not fanout
    with anyio.fail_after(WAIT_S):
        assert await watcher.taken() == ["a"]


async def test_a_listen_stream_that_reads_slowly_still_hears_the_last_of_many_writes() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, listen_stream(http, ["notes://1", "notes://2"]) as heard:
            async with anyio.create_task_group() as writers:
                for writer in range(8):

                    async def write(writer: int = writer) -> None:
                        for number in range(40):
                            await http.put("/notes/1", params={"text": f"{writer}.{number}"})

                    writers.start_soon(write)
            # Every write was answered before the stream is read; then one last write of the other note.
            await http.put("/notes/2", params={"text": "last"})
            uris = []
            while not uris or uris[-1] != "notes://2":
                uris.append(uri_of(await anext(heard)))
    assert set(uris) == {"notes://1", "notes://2"}


# -- a subscription made in one process reaches a stream held in another -----------------------


@pytest.fixture
def two_processes(redis_url: str) -> Iterator[tuple[str, str]]:
    prefix = f"test-{secrets.token_hex(4)}:"
    with ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve(notes_resources_app(secret=SECRET, store=RedisStore.from_url(redis_url, prefix=prefix)))
            )
            for _ in range(2)
        ]
        yield urls[0], urls[1]


@pytest.mark.redis
async def test_a_subscription_made_in_one_process_reaches_the_get_stream_held_in_another(
    two_processes: tuple[str, str],
) -> None:
    first, second = two_processes
    with anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=first) as one, httpx.AsyncClient(base_url=second) as other:
            headers = await open_session(one)
            async with get_stream(other, headers) as heard:
                await subscribe(one, headers, "notes://1")  # after the stream opened, in the other process
                await one.put("/notes/1", params={"text": "written where the subscription was made"})
                assert uri_of(await anext(heard)) == "notes://1"
                await other.put("/notes/1", params={"text": "written where the stream is"})
                assert uri_of(await anext(heard)) == "notes://1"


@pytest.mark.redis
async def test_an_update_published_in_one_process_reaches_a_listen_stream_in_another(
    two_processes: tuple[str, str],
) -> None:
    first, second = two_processes
    with anyio.fail_after(WAIT_S):
        async with (
            httpx.AsyncClient(base_url=first) as one,
            httpx.AsyncClient(base_url=second) as other,
            listen_stream(other, ["notes://1"]) as heard,
        ):
            await one.put("/notes/1", params={"text": "from the other process"})
            assert uri_of(await anext(heard)) == "notes://1"


# -- a change of subscriptions whose announcement is lost is read at the lease's renewal ---------


class LosingStore(MemoryStore):
    """The default store, losing every announcement of a session's subscriptions, as a dropped
    pub/sub connection loses what is published meanwhile."""

    async def publish(self, topic: str, message: bytes) -> bool:
        if topic == TOPIC and message.startswith(SUBSCRIPTIONS_MARK):
            return False
        return await super().publish(topic, message)


async def test_a_subscription_whose_announcement_was_lost_is_heard_after_the_streams_next_renewal() -> None:
    app = notes_resources_app(store=LosingStore(), limits=Limits(keep_alive_s=0.2))
    with serve(app) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http:
            headers = await open_session(http)
            async with get_stream(http, headers) as heard:
                await subscribe(http, headers, "notes://1")

                async def write_until_heard() -> None:
                    while True:
                        await http.put("/notes/1", params={"text": "heard once the stream reads again"})
                        await anyio.sleep(0.1)  # a write every tenth of a second, not a wait for anything

                async with anyio.create_task_group() as writes:
                    writes.start_soon(write_until_heard)
                    assert uri_of(await anext(heard)) == "notes://1"
                    writes.cancel_scope.cancel()


# -- task changes: the latest status, to the streams that follow the task -----------------------


async def test_task_changes_coalesce_to_the_latest_status_for_the_streams_that_follow_the_task() -> None:
    store = MemoryStore()
    runs = TaskRuns(deployment=one_process(store), options=Tasks())
    methods = TaskMethods(runs)
    for task_id in ("followed", "other"):
        record = TaskRecord(task_id, b"owner", Trust.ANONYMOUS, "work", "here", "working", 0, 0, 60_000)
        assert await store.put_task(record, TaskBounds(16, 1000)) is None
    async with anyio.create_task_group() as readers:
        await readers.start(methods.serve)
        with methods.watching(Watcher(["followed"])) as follower, methods.watching(Watcher(["other"])) as bystander:
            for step in range(200):
                await runs.book.change("followed", lambda kept, step=step: replace(kept, message=f"step {step}"))
                if step % 50 == 0:
                    await anyio.wait_all_tasks_blocked()
            await runs.book.change("followed", lambda kept: ended(kept, "completed", {"content": []}, None))
            await anyio.wait_all_tasks_blocked()
            with anyio.fail_after(WAIT_S):
                tasks = await methods.taken(follower)
            assert [(task["taskId"], task["status"]) for task in tasks] == [("followed", "completed")]
            await runs.book.change("other", lambda kept: replace(kept, message="its own news"))
            with anyio.fail_after(WAIT_S):
                assert [task["statusMessage"] for task in await methods.taken(bystander)] == ["its own news"]
        readers.cancel_scope.cancel()
