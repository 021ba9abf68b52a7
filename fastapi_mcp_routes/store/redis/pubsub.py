"""`Topics`: every subscription of one `RedisStore`, over one pub/sub connection.

A process may hold a thousand long-lived streams, each listening on a topic of its own (a
session's end, a stream's next event), and a call waiting for a client's reply: one connection
each would exhaust Redis's clients. So one connection carries them all, one reader task hands
each message to the inboxes of its topic, and a topic is subscribed while at least one
local listener is on it (SUBSCRIBE when the first comes, UNSUBSCRIBE when the last leaves).

Entering a subscription returns once Redis has taken the SUBSCRIBE: a PING sent after it is
answered in order on the same connection, so its PONG means a message published from then on
is delivered. Leaving waits the same way for the UNSUBSCRIBE, so once the last listener has
left, a publisher anywhere is told nobody listens.

An inbox holds a few messages (`INBOX_SIZE`, unless its listener asks for more); a listener
that does not read loses the next ones, never blocking the reader or the other listeners.
When the connection drops, the reader makes another and subscribes it to every topic listened
to then (or redis-py does, within a read, when its client retries); messages published
meanwhile are lost, as with any Redis pub/sub.
A PING after `HEARTBEAT_S` of silence notices a connection that died without a word; while
Redis is unreachable a subscription fails at once, and one Redis does not confirm within
`CONFIRM_S` raises instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import redis.asyncio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from fastapi_mcp_routes.store.base import INBOX_SIZE
from fastapi_mcp_routes.wire.errors import StoreUnavailable

logger = logging.getLogger(__name__)

# Silence on the connection after which a PING checks it is alive; no answer by the next
# period, and it is taken for dead and made again.
HEARTBEAT_S: Final = 10.0
# How long a subscription waits for Redis to confirm it before it raises.
CONFIRM_S: Final = 10.0
# Waits between attempts to reach Redis again after the connection dropped: doubling to the cap.
RETRY_FIRST_S: Final = 0.05
RETRY_CAP_S: Final = 2.0
_HEARTBEAT: Final = b"heartbeat"


class Topics:
    """The subscriptions of one store, multiplexed over one pub/sub connection."""

    def __init__(self, client: redis.asyncio.Redis, own: bytes) -> None:
        """`own`: a topic nobody publishes on, that keeps the connection subscribed."""
        self._client = client
        self._own = own
        self._listeners: dict[bytes, set[MemoryObjectSendStream[bytes]]] = {}
        self._pubsub: PubSub | None = None  # the connection, while it is up
        # Set once the current attempt to connect has an outcome: up, or `_failure`.
        self._attempt = asyncio.Event()
        self._failure: BaseException | None = None
        # One writer at a time: a topic's SUBSCRIBE and UNSUBSCRIBE go out in the order its
        # listeners came and went, and a reconnection subscribes to what is listened to then.
        self._writing = asyncio.Lock()
        self._tokens = itertools.count(1)
        self._pongs: dict[bytes, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def listen(self, topic: bytes, capacity: int = INBOX_SIZE) -> AsyncIterator[MemoryObjectReceiveStream[bytes]]:
        """Listen on `topic` while the context is open, keeping up to `capacity` messages not
        read yet; entered once Redis confirmed it."""
        send, receive = anyio.create_memory_object_stream[bytes](capacity)
        with send, receive:
            try:
                try:
                    await self._enter(topic, send)
                except Exception as error:  # a RedisError, an OSError, or redis-py caught reconnecting
                    raise StoreUnavailable(f"{type(error).__name__}: {error}") from error
                yield receive
            finally:
                # Shielded: a listener cancelled on its way out still unsubscribes, or Redis
                # would count it as listening for as long as the connection lives.
                # A connection that dropped meanwhile took the subscription with it: no error.
                with (
                    anyio.CancelScope(shield=True),
                    anyio.move_on_after(CONFIRM_S),
                    # A connection dropping meanwhile may fail it any way redis-py fails mid-reconnect.
                    contextlib.suppress(Exception),
                ):
                    await self._leave(topic, send)

    async def _enter(self, topic: bytes, send: MemoryObjectSendStream[bytes]) -> None:
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read(), name="redis-store-pubsub")
        async with self._writing:
            listeners = self._listeners.setdefault(topic, set())
            listeners.add(send)
            if len(listeners) == 1 and self._pubsub is not None:
                await self._pubsub.subscribe(topic)
        await self._confirmed()

    async def _leave(self, topic: bytes, send: MemoryObjectSendStream[bytes]) -> None:
        async with self._writing:
            listeners = self._listeners.get(topic)
            if listeners is None or send not in listeners:
                return
            listeners.discard(send)
            if listeners:
                return
            del self._listeners[topic]
            if self._pubsub is None:
                return  # the connection is down: it subscribes again only to what is listened to
            await self._pubsub.unsubscribe(topic)
        await self._confirmed()

    async def _confirmed(self) -> None:
        """Returns once Redis has answered every command sent on the connection before."""
        token = str(next(self._tokens)).encode()
        pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            with anyio.fail_after(CONFIRM_S):
                await self._attempt.wait()
                async with self._writing:
                    if self._pubsub is None:  # a Redis that is gone fails at once, never waits
                        raise RedisConnectionError(f"the Redis pub/sub connection is down: {self._failure}")
                    self._pongs[token] = pong
                    await self._pubsub.ping(token)
                await pong
        except TimeoutError:
            raise RedisConnectionError(f"Redis did not answer on the pub/sub connection within {CONFIRM_S} s") from None
        finally:
            self._pongs.pop(token, None)

    async def _read(self) -> None:
        """Connect, hand every message to its topic's listeners, and connect again when the
        connection drops, for as long as the store lives."""
        wait = RETRY_FIRST_S
        while True:
            if self._attempt.is_set():
                self._attempt = asyncio.Event()
            pubsub = self._client.pubsub()
            try:
                async with self._writing:
                    # Its own topic keeps the connection subscribed even when nobody listens:
                    # redis-py then never checks its health inline, which would read a reply
                    # meant for this reader.
                    await pubsub.subscribe(self._own, *self._listeners)
                    self._pubsub, self._failure = pubsub, None
                    self._attempt.set()
                if wait > RETRY_FIRST_S:
                    logger.info("The Redis pub/sub connection is back.")
                wait = RETRY_FIRST_S
                await self._read_until_dropped(pubsub)
            except Exception as error:  # whatever broke the connection, the store needs another
                if not isinstance(error, (RedisError, OSError)):
                    logger.exception("The Redis pub/sub reader failed; connecting again.")
                elif wait == RETRY_FIRST_S:
                    logger.warning("The Redis pub/sub connection dropped (%s); connecting again.", error)
                self._failure = error
                self._attempt.set()
                self._fail_waiting(error)
            finally:
                self._pubsub = None
                # Typed here: redis-py before 8.2 leaves `aclose` unannotated, later ones do not.
                close: Callable[[], Awaitable[None]] = pubsub.aclose
                with anyio.CancelScope(shield=True):
                    await close()
            await asyncio.sleep(wait)
            wait = min(wait * 2, RETRY_CAP_S)

    async def _read_until_dropped(self, pubsub: PubSub) -> None:
        loop = asyncio.get_running_loop()
        heard, probed = loop.time(), False
        while True:
            message = await pubsub.get_message(timeout=HEARTBEAT_S)
            now = loop.time()
            if message is not None:
                heard, probed = now, False
                self._deliver(message)
            elif now - heard >= HEARTBEAT_S:
                if probed:
                    raise RedisConnectionError(f"no answer to a PING within {HEARTBEAT_S} s")
                heard, probed = now, True
                async with self._writing:
                    await pubsub.ping(_HEARTBEAT)

    def _deliver(self, message: dict[str, Any]) -> None:
        if message["type"] == "pong":
            pong = self._pongs.get(message["data"])
            if pong is not None and not pong.done():
                pong.set_result(None)
        elif message["type"] == "message":
            for send in list(self._listeners.get(message["channel"], ())):
                # A listener that does not read loses the message; it never blocks the others.
                with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    send.send_nowait(message["data"])

    def _fail_waiting(self, error: BaseException) -> None:
        for pong in self._pongs.values():
            if not pong.done():
                pong.set_exception(RedisConnectionError(f"the Redis pub/sub connection dropped: {error}"))

    async def aclose(self) -> None:
        """Stop the reader, which closes the connection."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
