"""Resource updates: who is told that a resource changed, from whichever process changed it.

An update is one message on one Store topic, so it reaches every process that shares the store
(and this process alone with the default memory store). In each process one task reads the
topic (`serve`, for the app's lifetime) and hands each URI to the streams watching it (a
`Fanout` by URI digest): a session's GET stream watches the resources its session subscribed
to, a 2026-07-28 `subscriptions/listen` stream those its `resourceSubscriptions` name. So an
update costs a lookup and the streams that watch it, not every open stream. Updates come from
the app (`notify_resource_updated`) and from the app's own writes: a successful POST, PUT, PATCH
or DELETE to the path a resource is read from (transport/writes.py).

A session's subscriptions change in whichever process serves its `resources/subscribe`, and
its GET stream may be held in another. The change is announced on the same topic as updates
(`subscriptions_changed`), so each process hears it before any update published after the
client saw its answer, and the stream watches the resource before its first update comes. The
stream reads its session's record when it opens and at each renewal of its lease (a read it
already makes), which covers a change whose message was lost.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Final, NoReturn

import anyio
from anyio.abc import TaskStatus

from fastapi_mcp_routes.server.fanout import Fanout, Watcher
from fastapi_mcp_routes.server.sessions.manager import uri_digest
from fastapi_mcp_routes.store.base import MessageBus
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import McpError, StoreUnavailable
from fastapi_mcp_routes.wire.json import dumps, loads

logger = logging.getLogger("fastapi_mcp_routes")

TOPIC: Final = "resources/updated"
# What a listener that follows a resource is sent when it changes.
RESOURCE_UPDATED: Final = "notifications/resources/updated"
RETRY_S: Final = 2.0
# While the store cannot be reached, the writes whose updates are lost are logged this often.
DOWN_LOG_S: Final = 60.0
# A message on `TOPIC` that starts with this byte (no URI does: a scheme starts with a letter)
# is a session's subscriptions as just saved, not an update.
SUBSCRIPTIONS_MARK: Final = b"\x00"
# Messages the process's one reader of `TOPIC` may have waiting: it never awaits but its inbox,
# so only what is published between two of its turns waits, and a full inbox would lose updates.
INBOX_SIZE: Final = 4096
# Where an app keeps its endpoints' `ResourceUpdates`, so `notify_resource_updated(app, ...)`
# reaches them without module-level state.
_STATE_KEY: Final = "fastapi_mcp_routes_updates"


class SessionWatcher(Watcher):
    """What a session's GET stream watches: its session's subscriptions, from the record as
    read or from a change announced since, whichever is newer."""

    __slots__ = ("announced",)

    def __init__(self) -> None:
        super().__init__()
        self.announced = 0  # changes announced so far

    def heard(self, digests: Iterable[str]) -> None:
        """A change of the session's subscriptions was announced."""
        self.announced += 1
        self.watch(digests)

    def read(self, digests: Iterable[str], announced_before: int) -> None:
        """The session's record, read since `announced` was `announced_before`: a change
        announced meanwhile is newer than the read, and stands."""
        if self.announced == announced_before:
            self.watch(digests)


class ResourceUpdates:
    """Publishes resource updates, and hands each to the streams of this process that watch it."""

    def __init__(self, store: MessageBus, registry: ToolRegistry) -> None:
        self._store = store
        self._registry = registry
        self._fanout = Fanout()
        self._sessions: dict[str, set[SessionWatcher]] = {}  # session id -> its streams here
        self._down_logged = -math.inf

    @property
    def may_be_heard(self) -> bool:
        """Whether an update could reach anyone: a stream of this process watches a resource,
        or another process's may (a shared store). Without, a write costs nothing more than its check."""
        return bool(self._fanout) or self._store.shared

    def watched(self, uri: str) -> int:
        """How many streams of this process watch `uri`."""
        return self._fanout.watched(uri_digest(uri))

    async def updated(self, uri: str) -> None:
        """Tell every listener that `uri` changed."""
        await self._store.publish(TOPIC, uri.encode())

    async def subscriptions_changed(self, session_id: str, digests: Iterable[str]) -> None:
        """A session's subscriptions were saved as `digests` (`uri_digest`): its GET stream, in
        whichever process, watches them from now on."""
        news = dumps({"session": session_id, "watch": list(digests)})
        await self._store.publish(TOPIC, SUBSCRIPTIONS_MARK + news)

    def canonical(self, uri: str) -> str:
        """The URI as the server spells it (its template expanded again), so an update and a
        subscription match however each was written; a URI no resource has is kept as it is."""
        found = self._registry.table().catalog.resource(uri)
        return found[0].template.expand(found[1]) if found is not None else uri

    async def written(self, path: str) -> None:
        """A write to `path` succeeded: the resources read from that path changed. While the
        store cannot be reached their update is lost, with one WARNING a minute: the write
        itself succeeded and was answered, so nothing is raised into the app after it."""
        try:
            for uri in self._registry.cached().catalog.written(path):
                await self.updated(uri)
        except StoreUnavailable as down:
            now = time.monotonic()
            if now - self._down_logged > DOWN_LOG_S:
                self._down_logged = now
                logger.warning("the app's writes to resources cannot be announced now (%s)", down.reason)

    def watching(self, watcher: Watcher) -> AbstractContextManager[Watcher]:
        """Hand `watcher` the updates of the URI digests it watches while the context is open."""
        return self._fanout.watching(watcher)

    @contextmanager
    def watching_session(self, session_id: str, watcher: SessionWatcher) -> Iterator[SessionWatcher]:
        """As `watching`, and have `watcher` hear each change of the session's subscriptions."""
        streams = self._sessions.setdefault(session_id, set())
        streams.add(watcher)
        try:
            with self._fanout.watching(watcher):
                yield watcher
        finally:
            streams.discard(watcher)
            if not streams and self._sessions.get(session_id) is streams:
                del self._sessions[session_id]

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> NoReturn:
        """Read the updates topic for this process's streams, for the app's lifetime (started
        once it listens, or once it cannot for now); while the store cannot be reached, listen
        again every `RETRY_S` (updates published meanwhile are not heard)."""
        started = False
        while True:
            try:
                async with self._store.subscribe(TOPIC, capacity=INBOX_SIZE) as inbox:
                    if not started:
                        started = True
                        task_status.started()
                    async for message in inbox:
                        self._take(message)
            except StoreUnavailable as down:
                logger.info("resource updates cannot be heard now (%s); listening again in %g s", down.reason, RETRY_S)
            if not started:  # the streams open without updates meanwhile
                started = True
                task_status.started()
            await anyio.sleep(RETRY_S)

    def _take(self, message: bytes) -> None:
        if message.startswith(SUBSCRIPTIONS_MARK):
            self._take_subscriptions(message[len(SUBSCRIPTIONS_MARK) :])
        elif self._fanout:
            uri = message.decode("utf-8", "replace")
            self._fanout.notify(uri_digest(uri), uri)

    def _take_subscriptions(self, message: bytes) -> None:
        try:
            news: Any = loads(message)
        except McpError:
            return
        if not isinstance(news, dict):
            return
        streams = self._sessions.get(news.get("session"))  # type: ignore[arg-type]
        digests = news.get("watch")
        if not streams or not isinstance(digests, list) or not all(isinstance(each, str) for each in digests):
            return
        for stream in streams:
            stream.heard(digests)


async def notify_resource_updated(app: Any, uri: str) -> None:
    """Tell the clients subscribed to `uri` that the resource changed, in every process.

    The app's own successful writes (POST, PUT, PATCH, DELETE) to a resource's path already
    notify (`PUT /notes/1` for `notes://{note_id}` read from `GET /notes/{note_id}`); call this
    for changes that come from elsewhere (a background job, another service).

    Args:
        app: the FastAPI app the MCP endpoint serves.
        uri: the resource's URI, as a client reads it (`notes://1`).
    """
    hubs = getattr(app.state, _STATE_KEY, None)
    if not hubs:
        raise ValueError(f"the app {app!r} serves no MCP endpoint: call mcp_routes(app) first")
    for hub in hubs:
        await hub.updated(hub.canonical(uri))


def remember(app: Any, updates: ResourceUpdates) -> None:
    """Keep `updates` on the app, for `notify_resource_updated`."""
    hubs = getattr(app.state, _STATE_KEY, None)
    if hubs is None:
        hubs = []
        setattr(app.state, _STATE_KEY, hubs)
    hubs.append(updates)
