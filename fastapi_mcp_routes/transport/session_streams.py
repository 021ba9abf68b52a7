"""The session era's GET streams: the session's own stream for messages not tied to a request,
and a resume of a POST stream after `Last-Event-ID`.

Both are `ListenStream`s woken by their news, and both end with their session: a session closed
or pushed out is announced through the Store (`SessionManager.ended`); at each renewal of the
stream's lease the session is looked up, which restarts its idle time (an open stream keeps
its session alive) and ends the stream once the session is gone anyway. A session's own stream
holds a claim too, so it has one at a time (a second is refused 409).

A session's own stream watches the resources its session subscribed to (a `SessionWatcher`,
server/resources/updates.py): it reads them when it opens, hears each change announced after,
and reads them again at each renewal of its lease, from the record the renewal reads anyway.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import anyio

from fastapi_mcp_routes.server.dispatch import Dispatcher
from fastapi_mcp_routes.server.resources.updates import RESOURCE_UPDATED, SessionWatcher
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.store.base import ClaimStore, SessionRecord
from fastapi_mcp_routes.transport.listen import Emit, ListenStream
from fastapi_mcp_routes.transport.replay import StreamLogs
from fastapi_mcp_routes.transport.response_stream import KeepAlive
from fastapi_mcp_routes.transport.sse import sse_event
from fastapi_mcp_routes.transport.stream_slots import Slots
from fastapi_mcp_routes.wire.constants import JSONRPC_VERSION
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from fastapi_mcp_routes.wire.json import dumps


@dataclass(frozen=True, slots=True)
class Claim:
    """A name one holder has to itself for `ttl_s` unless renewed (the session's GET stream)."""

    store: ClaimStore
    name: str
    holder: str
    ttl_s: float

    async def take(self) -> bool:
        """Take or renew the claim; `False` while someone else holds it."""
        return await self.store.claim(self.name, self.holder, self.ttl_s)

    async def release(self) -> None:
        await self.store.release(self.name, self.holder)


@dataclass(frozen=True, slots=True)
class SessionLease:
    """What a session's stream holds: its slots, perhaps a claim, and its session; and what it
    watches of the session's subscriptions, if it does."""

    sessions: SessionManager
    session: SessionRecord
    slots: Slots
    claim: Claim | None = None
    watcher: SessionWatcher | None = None

    @property
    def renew_s(self) -> float:
        return self.slots.renew_s

    async def renew(self) -> bool:
        if not await self.reread():
            return False
        if self.claim is not None and not await self.claim.take():
            return False
        return await self.slots.renew()

    async def reread(self) -> bool:
        """Look the session up (its idle time restarts), and watch its subscriptions as read;
        `False` once it is gone."""
        announced = self.watcher.announced if self.watcher is not None else 0
        current = await self.sessions.current(self.session)
        if current is None:
            return False
        if self.watcher is not None:
            self.watcher.read(current.subscriptions, announced)
        return True

    async def release(self) -> None:
        if self.claim is not None:
            await self.claim.release()
        await self.slots.release()

    async def until_session_ends(self, emit: Emit) -> None:
        """A source that returns, ending the stream, once the session is closed or pushed out."""
        async with self.sessions.ended(self.session.id) as ended:
            if await self.sessions.live(self.session):
                await anext(aiter(ended))


def session_stream(dispatcher: Dispatcher, lease: SessionLease, keep_alive: KeepAlive) -> ListenStream:
    """The session's GET stream: list-change notifications, from the lists as they are now, and
    the updates of the resources the session subscribed to (whichever process it did so in)."""
    generation = dispatcher.listening_from()  # before the client can see the stream open
    listening = anyio.Event()  # the stream opens once updates are watched
    updates = dispatcher.listened.updates
    watcher = SessionWatcher()
    lease = dataclasses.replace(lease, watcher=watcher)

    async def list_changes(emit: Emit) -> None:
        nonlocal generation
        while True:
            generation, messages = await dispatcher.changes_after(generation)
            for message in messages:
                await emit(sse_event(dumps(message)))

    async def resource_updates(emit: Emit) -> None:
        with updates.watching_session(lease.session.id, watcher):
            # Watched first, then read: a change announced meanwhile is not undone by the read.
            watcher.watch(lease.session.subscriptions)
            with contextlib.suppress(StoreUnavailable):  # else read again at the lease's renewal
                await lease.reread()
            listening.set()
            while True:
                for uri in await watcher.taken():
                    message = {"jsonrpc": JSONRPC_VERSION, "method": RESOURCE_UPDATED, "params": {"uri": uri}}
                    await emit(sse_event(dumps(message)))

    sources = [lease.until_session_ends, list_changes, resource_updates]
    return ListenStream(sources, keep_alive, lease, listening=[listening])


def resume_stream(logs: StreamLogs, stream: int, seen: int, lease: SessionLease, keep_alive: KeepAlive) -> ListenStream:
    """Replay one stream after the event the client saw last, then follow it to its answer."""

    async def replay(emit: Emit) -> None:
        nonlocal seen
        # Listen first, then read, then wait: an event kept between the read and the wait wakes it.
        # The log is read again at each renewal of the stream too: a wake-up published while this
        # process's connection to a shared store was down is lost, the events are not.
        # A stream nobody sends any more (its sender died, or its call ended unanswered) ends
        # once what was kept of it is delivered, so the client knows to call again.
        async with logs.wakes(stream) as wakes:
            woken = aiter(wakes)
            unsent = False
            while (read := await logs.read(stream, seen)) is not None:  # None: pushed out, or ended
                seen += len(read.events)
                for event in read.events:
                    await emit(event)
                if read.complete:
                    await logs.forget(stream)  # delivered whole at last
                    return
                if unsent:
                    return
                with anyio.move_on_after(lease.renew_s) as quiet:
                    await anext(woken)
                unsent = quiet.cancelled_caught and await logs.sender_gone(stream)

    return ListenStream([lease.until_session_ends, replay], keep_alive, lease)
