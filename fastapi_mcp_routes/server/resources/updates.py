"""Resource updates: who is told that a resource changed, from whichever process changed it.

An update is one message on one Store topic, so it reaches the listening streams of every
process that shares the store (and of this process alone with the default memory store): a
session's GET stream sends it when the session subscribed to the URI, a 2026-07-28
`subscriptions/listen` stream when its `resourceSubscriptions` name it. Updates come from the
app (`notify_resource_updated`) and from the app's own writes: a successful POST, PUT, PATCH or
DELETE to the path a resource is read from (transport/writes.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final, NoReturn

import anyio

from fastapi_mcp_routes.store.base import MessageBus
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import StoreUnavailable

logger = logging.getLogger("fastapi_mcp_routes")

TOPIC: Final = "resources/updated"
# What a listener that follows a resource is sent when it changes.
RESOURCE_UPDATED: Final = "notifications/resources/updated"
RETRY_S: Final = 2.0
# While the store cannot be reached, the writes whose updates are lost are logged this often.
DOWN_LOG_S: Final = 60.0
# Where an app keeps its endpoints' `ResourceUpdates`, so `notify_resource_updated(app, ...)`
# reaches them without module-level state.
_STATE_KEY: Final = "fastapi_mcp_routes_updates"


class ResourceUpdates:
    """Publishes resource updates and lets streams listen for them."""

    def __init__(self, store: MessageBus, registry: ToolRegistry) -> None:
        self._store = store
        self._registry = registry
        self._local = 0  # streams of this process listening now
        self._down_logged = -math.inf

    @property
    def may_be_heard(self) -> bool:
        """Whether an update could reach anyone: a stream of this process listens, or another
        process's may (a shared store). Without, a write costs nothing more than its check."""
        return self._local > 0 or self._store.shared

    async def updated(self, uri: str) -> None:
        """Tell every listener that `uri` changed."""
        await self._store.publish(TOPIC, uri.encode())

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

    async def follow(self, on_update: Callable[[str], Awaitable[None]], listening: anyio.Event) -> NoReturn:
        """Hand every URI updated from now on to `on_update`, for as long as the caller runs
        (a stream's source), setting `listening` once it listens (or cannot for now); while
        the store cannot be reached, listen again every `RETRY_S` (updates published
        meanwhile are not heard)."""
        while True:
            try:
                async with self.listen() as updated:
                    listening.set()
                    async for uri in updated:
                        await on_update(uri)
            except StoreUnavailable as down:
                logger.info("resource updates cannot be heard now (%s); listening again in %g s", down.reason, RETRY_S)
            listening.set()  # the stream opens without them meanwhile
            await anyio.sleep(RETRY_S)

    @asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[str]]:
        """The URIs updated from now on, for as long as the context is open."""
        self._local += 1
        try:
            async with self._store.subscribe(TOPIC) as inbox:
                yield _decoded(inbox)
        finally:
            self._local -= 1


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


async def _decoded(inbox: AsyncIterable[bytes]) -> AsyncIterator[str]:
    async for message in inbox:
        yield message.decode("utf-8", "replace")
