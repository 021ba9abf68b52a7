"""`Topics`: every subscription of one `RedisStore`, over one pub/sub connection, with nothing
lost when that connection drops and comes back.

A process may hold a thousand long-lived streams, each listening on a topic of its own (a
session's end, a stream's next event), and a call waiting for a client's reply: one connection
each would exhaust Redis's clients. So one connection carries them all, one reader task hands
each message to the inboxes of its topic, and a topic is subscribed while at least one
local listener is on it (SUBSCRIBE when the first comes, UNSUBSCRIBE when the last leaves).

Entering a subscription returns once Redis has taken the SUBSCRIBE: a PING sent after it is
answered in order on the same connection, so its PONG means a message published from then on
is delivered. Leaving waits the same way for the UNSUBSCRIBE, so once the last listener has
left, a publisher anywhere is told nobody listens.

Nothing lost on a reconnect. Redis pub/sub forgets a message nobody was connected to hear, so
a connection that drops (a network blip, a proxy's idle timeout, Redis closing a subscriber over
its output buffer limit) would lose what was published until it is back: a client's answer to
a question, a cancellation, a resource update. So a message is also kept, briefly, where a
listener can read it again: `publish` is one script that appends it to its topic's log (a Redis
list of its last `KEEP_MESSAGES` messages that expires `KEEP_S` after the last one) and
publishes it with its id there (`lua/publish.lua`): Redis's clock in ms and a sequence. Each
listener remembers the id of the last message it was handed. When the connection comes back,
the reader subscribes again and then reads each listened topic's log after the oldest of its
listeners' ids, handing each listener what it has not had; live messages that arrive meanwhile
are compared by id, so none is handed over twice. A listener that has had nothing yet reads
from the moment it joined (on Redis's clock, as measured at each connection). What the logs
cannot give back: messages older than `KEEP_S` or `KEEP_MESSAGES` on their topic when the
connection returns (a reconnect takes at most `RETRY_CAP_S` once Redis answers again, and a
silent death is noticed within two heartbeats), and a message larger than `KEEP_MAX_BYTES`,
handed over live only (what a client sends must not fill Redis): a listener that missed one is
handed `MISSED` in its place, and learns so at once.

On a Redis Cluster, every topic and its log are under one hash tag (`{topics}`), so they live
on one node and the connection uses sharded pub/sub there (SSUBSCRIBE, SPUBLISH in the script);
the reader finds that node again after a failover or a slot's move.

An inbox holds a few messages (`INBOX_SIZE`, unless its listener asks for more); a listener
that does not read loses the next ones, never blocking the reader or the other listeners.
A PING after `HEARTBEAT_S` of silence notices a connection that died without a word; while
Redis is unreachable a subscription fails at once, and one Redis does not confirm within
`CONFIRM_S` raises instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from fastapi_mcp_routes.store.base import INBOX_SIZE, MISSED
from fastapi_mcp_routes.store.redis import scripts
from fastapi_mcp_routes.store.redis.connect import errors_of
from fastapi_mcp_routes.wire.errors import StoreUnavailable

logger = logging.getLogger(__name__)

# Silence on the connection after which a PING checks it is alive; no answer by the next
# period, and it is taken for dead and made again.
HEARTBEAT_S: Final = 3.0
# How long a subscription waits for Redis to confirm it before it raises.
CONFIRM_S: Final = 10.0
# Waits between attempts to reach Redis again after the connection dropped: doubling to the cap.
RETRY_FIRST_S: Final = 0.05
RETRY_CAP_S: Final = 2.0
# What a topic's log keeps for a listener whose connection dropped: its last `KEEP_MESSAGES`
# messages of at most `KEEP_MAX_BYTES` each, all of it gone `KEEP_S` after the last one came.
# Long enough for a silent death (two heartbeats) and a reconnect's wait.
KEEP_MESSAGES: Final = 1024
KEEP_S: Final = 60.0
KEEP_MAX_BYTES: Final = 64 * 1024
# Attempts to connect that may fail before a subscription waiting for the connection fails too:
# a connection dropped under load (Redis closing it, a reconnect cut short) is waited out,
# a Redis that cannot be reached fails within a second.
GIVE_UP_AFTER: Final = 3
_HEARTBEAT: Final = b"heartbeat"
_TAG: Final = "{topics}"  # the hash tag every topic and log share (one Cluster slot)

MessageId = tuple[int, int]  # a log entry's id: milliseconds, then a sequence within them


def _entry(raw: bytes) -> tuple[MessageId, bytes | None] | None:
    """A log entry or a published message, "<ms>-<seq> <message>": its id and message (`None`
    for an entry that only holds an id, its message too large to keep); `None` when malformed."""
    head, space, data = raw.partition(b" ")
    ms, _, seq = head.partition(b"-")
    if not (ms.isdigit() and seq.isdigit()):
        return None
    return (int(ms), int(seq)), data if space else None


class _Listener:
    """One subscription: its inbox, when it joined (the loop's clock), and the id of the last
    message it was handed, so a replay hands it only what it has not had."""

    __slots__ = ("confirmed", "joined", "send", "since")

    def __init__(self, send: MemoryObjectSendStream[bytes], joined: float) -> None:
        self.send = send
        self.joined = joined
        self.since: MessageId | None = None
        # Redis took its subscription: owed what it misses from then on, and not before (a
        # replay while it waits for that could hand it what came just before it joined).
        self.confirmed = False

    def hand(self, number: MessageId, data: bytes) -> None:
        if self.since is not None and number <= self.since:
            return  # had it already, live or from a log
        self.since = number
        # A listener that does not read loses the message; it never blocks the others.
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.send.send_nowait(data)


class Topics:
    """The subscriptions of one store, multiplexed over one pub/sub connection."""

    def __init__(self, client: Any, prefix: str, own: str, *, cluster: bool = False) -> None:
        """`client`: the store's (redis-py or valkey-py asyncio, standalone or Cluster).
        `prefix`: put before every channel and log. `own`: a topic nobody publishes on, that
        keeps the connection subscribed. `cluster`: sharded pub/sub on the node of the tag."""
        self._client = client
        self._cluster = cluster
        self._base = f"{prefix}{_TAG}:"
        self._own = self.channel(own)
        self._listeners: dict[bytes, list[_Listener]] = {}
        self._pubsub: Any = None  # the connection, while it is up
        # Set once the current attempt to connect has an outcome: up, or `_failure`.
        self._attempt = asyncio.Event()
        self._failure: BaseException | None = None
        # One writer at a time: a topic's SUBSCRIBE and UNSUBSCRIBE go out in the order its
        # listeners came and went, and a reconnection subscribes to what is listened to then.
        self._writing = asyncio.Lock()
        self._tokens = itertools.count(1)
        self._pongs: dict[bytes, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._publish = client.register_script(scripts.PUBLISH)
        self._time = client.register_script(scripts.REDIS_TIME)
        self._verb = "SPUBLISH" if cluster else "PUBLISH"
        # Redis's clock in ms is the loop's clock (s) * 1000 + `_offset_ms`, measured at each
        # connection within `_slack_ms` (its round trip): when a listener joined, on Redis's clock.
        self._offset_ms = 0.0
        self._slack_ms = 0.0
        self._node_client: Any = None  # on a Cluster: a client of the node that has the topics
        self._node_name = ""
        self._errors: tuple[type[BaseException], ...] = (RedisError, *errors_of(client))
        self._reader_only = _ReaderReconnects()  # kept: the client holds its callback by a weak reference

    def channel(self, topic: str) -> bytes:
        return f"{self._base}{topic}".encode()

    def _log(self, channel: bytes) -> bytes:
        return b"%slog:%s" % (self._base.encode(), channel[len(self._base) :])

    async def publish(self, topic: str, message: bytes) -> int:
        """Keep `message` in the topic's log and hand it to every connection listening;
        how many connections were handed it."""
        channel = self.channel(topic)
        keep_ms = int(KEEP_S * 1000)
        listening: int = await self._publish(
            keys=[self._log(channel)], args=[channel, message, KEEP_MESSAGES, keep_ms, self._verb, KEEP_MAX_BYTES]
        )
        return listening

    @asynccontextmanager
    async def listen(self, topic: str, capacity: int = INBOX_SIZE) -> AsyncIterator[MemoryObjectReceiveStream[bytes]]:
        """Listen on `topic` while the context is open, keeping up to `capacity` messages not
        read yet; entered once Redis confirmed it."""
        channel = self.channel(topic)
        send, receive = anyio.create_memory_object_stream[bytes](capacity)
        listener = _Listener(send, asyncio.get_running_loop().time())
        with send, receive:
            try:
                try:
                    await self._enter(channel, listener)
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
                    await self._leave(channel, listener)

    async def _enter(self, channel: bytes, listener: _Listener) -> None:
        if self._reader is None:
            self._reader = asyncio.get_running_loop().create_task(self._read(), name="redis-store-pubsub")
        async with self._writing:
            listeners = self._listeners.setdefault(channel, [])
            # What the topic's listeners were handed came before this one joined: exact, where
            # the clock's measure is not.
            listener.since = max((other.since for other in listeners if other.since is not None), default=None)
            listeners.append(listener)
            if len(listeners) == 1 and self._pubsub is not None:
                # A connection that dropped meanwhile fails this; the next one subscribes to what
                # is listened to, and `_confirmed` waits for it.
                with contextlib.suppress(Exception):
                    await self._subscribe(self._pubsub, channel)
        await self._confirmed()
        listener.confirmed = True

    async def _leave(self, channel: bytes, listener: _Listener) -> None:
        async with self._writing:
            listeners = self._listeners.get(channel)
            if listeners is None or listener not in listeners:
                return
            listeners.remove(listener)
            if listeners:
                return
            del self._listeners[channel]
            if self._pubsub is None:
                return  # the connection is down: it subscribes again only to what is listened to
            if self._cluster:
                await self._pubsub.execute_command("SUNSUBSCRIBE", channel)
            else:
                await self._pubsub.unsubscribe(channel)
        await self._confirmed()

    async def _subscribe(self, pubsub: Any, *channels: bytes) -> None:
        if not self._cluster:
            await pubsub.subscribe(*channels)
        elif channels:
            # Sent as it is: valkey-py's pub/sub has no sharded subscribe of its own, and both
            # clients hand over what comes of it (`smessage`). The reader subscribes a new
            # connection to every topic listened to.
            await pubsub.execute_command("SSUBSCRIBE", *channels)

    async def _confirmed(self) -> None:
        """Returns once Redis has answered every command sent on the connection before. A
        connection that drops meanwhile is waited out: the next one subscribes again to what is
        listened to, and is asked in turn; a Redis that cannot be reached fails at once."""
        try:
            with anyio.fail_after(CONFIRM_S):
                while not await self._pinged():
                    await asyncio.sleep(RETRY_FIRST_S)  # until the reader has seen the drop too
        except TimeoutError:
            raise RedisConnectionError(f"Redis did not answer on the pub/sub connection within {CONFIRM_S} s") from None

    async def _pinged(self) -> bool:
        """Whether a PING went out and came back on one connection; `False` when the
        connection dropped before its answer."""
        await self._attempt.wait()
        token = str(next(self._tokens)).encode()
        pong: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            async with self._writing:
                if self._pubsub is None:
                    if self._attempt.is_set():  # Redis could not be reached: fails, never waits
                        raise RedisConnectionError(f"the Redis pub/sub connection is down: {self._failure}")
                    return False  # dropped a moment ago; the next connection is on its way
                self._pongs[token] = pong
                try:
                    await self._pubsub.ping(token)
                except Exception:  # however the send failed, the reader makes the next connection
                    return False
            try:
                await pong
            except _Dropped:
                return False
            return True
        finally:
            self._pongs.pop(token, None)
            if pong.done() and not pong.cancelled():
                pong.exception()  # failed after its waiter left: seen, not reported as never retrieved

    async def _read(self) -> None:
        """Connect, hand every message to its topic's listeners, and connect again when the
        connection drops, for as long as the store lives."""
        wait = RETRY_FIRST_S
        failures = 0  # attempts to connect that failed in a row
        while True:
            if self._attempt.is_set():
                self._attempt = asyncio.Event()
            pubsub: Any = None
            try:
                await self._measure_clock()
                pubsub = await self._connection()
                pubsub.on_connect = self._reader_only.on_connect
                async with self._writing:
                    # Its own topic keeps the connection subscribed even when nobody listens:
                    # redis-py then never checks its health inline, which would read a reply
                    # meant for this reader.
                    if self._cluster:  # the client's own bookkeeping: its reads wait for a subscription
                        await pubsub.subscribe(self._own)
                        await self._subscribe(pubsub, *self._listeners)
                    else:
                        await self._subscribe(pubsub, self._own, *self._listeners)
                    pubsub.connection.retry = self._reader_only
                    self._pubsub, self._failure = pubsub, None
                    self._attempt.set()
                # What was published while no connection listened (or before this one did).
                await self._replay()
                if wait > RETRY_FIRST_S:
                    logger.info("The Redis pub/sub connection is back.")
                wait, failures = RETRY_FIRST_S, 0
                await self._read_until_dropped(pubsub)
            except Exception as error:  # whatever broke the connection, the store needs another
                if not isinstance(error, self._errors):
                    logger.exception("The Redis pub/sub reader failed; connecting again.")
                elif wait == RETRY_FIRST_S:
                    logger.warning("The Redis pub/sub connection dropped (%s); connecting again.", error)
                self._failure = error
                if self._pubsub is not None:
                    # A connection that was up dropped: the next attempt comes at once, and a
                    # subscription on its way waits for it rather than failing.
                    self._attempt = asyncio.Event()
                else:
                    failures += 1
                    if failures >= GIVE_UP_AFTER:  # Redis cannot be reached: subscriptions fail
                        self._attempt.set()
                self._fail_waiting(error)
            finally:
                self._pubsub = None
                if pubsub is not None:
                    # Typed here: redis-py before 8.2 leaves `aclose` unannotated, later ones do not.
                    close: Callable[[], Awaitable[None]] = pubsub.aclose
                    with anyio.CancelScope(shield=True):
                        await close()
            await asyncio.sleep(wait)
            wait = min(wait * 2, RETRY_CAP_S)

    async def _measure_clock(self) -> None:
        """Redis's clock against the loop's, within the round trip it took (on a Cluster, the
        node that has the topics: the script's key routes it there, and finds it again after a
        failover)."""
        loop = asyncio.get_running_loop()
        asked = loop.time()
        seconds, micros = await self._time(keys=[self._log(self._own)])
        answered = loop.time()
        redis_ms = int(seconds) * 1000 + int(micros) / 1000
        self._offset_ms = redis_ms - (asked + answered) / 2 * 1000
        self._slack_ms = (answered - asked) * 1000 / 2 + 1

    async def _connection(self) -> Any:
        """A pub/sub connection: the client's own, or on a Cluster one to the node that has
        the topics' slot (made again when that node changed)."""
        if not self._cluster:
            return self._client.pubsub()
        node = self._client.get_node_from_key(self._own)
        if self._node_client is None or self._node_name != node.name:
            if self._node_client is not None:
                await self._node_client.aclose()
            self._node_client, self._node_name = _node_client(self._client, node), node.name
        return self._node_client.pubsub()

    async def _replay(self) -> None:
        """Hand each listener what its topic's log has after the last message it was handed
        (or after it joined): everything published while no connection listened for it."""
        owed = (
            (channel, [one for one in listeners if one.confirmed]) for channel, listeners in self._listeners.items()
        )
        topics = [(channel, listeners) for channel, listeners in owed if listeners]
        if not topics:
            return
        starts = [min(self._since(listener) for listener in listeners) for _, listeners in topics]
        pipe = self._client.pipeline(transaction=False)
        for channel, _ in topics:
            pipe.lrange(self._log(channel), 0, -1)
        logs = await pipe.execute(raise_on_error=False)
        for (channel, listeners), (ms, seq), entries in zip(topics, starts, logs, strict=True):
            if isinstance(entries, Exception):  # not a log (garbage in its key): nothing to give back
                logger.warning("the log of topic %r cannot be read: %s", channel.decode(errors="replace"), entries)
                continue
            read = [entry for entry in map(_entry, entries) if entry is not None]
            kept = [entry for entry in read if entry[0] > (ms, seq)]
            if len(entries) >= KEEP_MESSAGES and read and read[0][0] > (ms, seq):
                logger.warning(
                    "topic %r may have lost messages while the pub/sub connection was down: its log is full",
                    channel.decode(errors="replace"),
                )
            for number, data in kept:
                for listener in list(listeners):
                    # Too large to keep: the listener learns it missed one rather than waiting.
                    listener.hand(number, MISSED if data is None else data)

    def _since(self, listener: _Listener) -> MessageId:
        if listener.since is not None:
            return listener.since
        # When it joined, on Redis's clock, less the measure's error: a message from just
        # before it joined may be handed to it, none from after is missed.
        return int(self._offset_ms + listener.joined * 1000 - self._slack_ms), 0

    async def _read_until_dropped(self, pubsub: Any) -> None:
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
        kind = message["type"]
        if kind == "pong":
            pong = self._pongs.get(message["data"])
            if pong is not None and not pong.done():
                pong.set_result(None)
        elif kind in ("message", "smessage"):
            listeners = self._listeners.get(message["channel"])
            if listeners:
                entry = _entry(message["data"])
                if entry is None or entry[1] is None:  # not published by a store: dropped, the reader goes on
                    return
                number, data = entry[0], entry[1]
                for listener in list(listeners):
                    listener.hand(number, data)

    def _fail_waiting(self, error: BaseException) -> None:
        for pong in self._pongs.values():
            if not pong.done():
                pong.set_exception(_Dropped(f"the Redis pub/sub connection dropped: {error}"))

    async def aclose(self) -> None:
        """Stop the reader, which closes the connection."""
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._node_client is not None:
            await self._node_client.aclose()
            self._node_client = None


class _Dropped(RedisConnectionError):
    """The connection dropped before Redis answered a PING on it."""


class _ReaderReconnects:
    """The pub/sub connection is made again by the reader alone, under its lock: as the
    connection's retry policy, none (a retry would reconnect within a send, reading the handshake
    while the reader reads); as the client's callback once it connected again by itself (a send
    on a dropped connection), a refusal."""

    async def call_with_retry(self, do: Callable[[], Awaitable[Any]], fail: Any, *_: Any, **__: Any) -> Any:
        return await do()

    def get_retries(self) -> int:
        return 0

    def update_supported_errors(self, *_: Any) -> None:
        return None

    async def on_connect(self, connection: Any) -> None:
        raise RedisConnectionError("the pub/sub connection dropped; the store connects again itself")


def _node_client(cluster: Any, node: Any) -> Any:
    """A standalone client of one Cluster node, with the Cluster's connection settings (its
    password, TLS...), made with the Cluster client's own family (redis-py or valkey-py)."""
    family = importlib.import_module(f"{type(cluster).__module__.split('.')[0]}.asyncio")
    client_class = getattr(family, "Redis", None) or family.Valkey
    pool = family.ConnectionPool(connection_class=node.connection_class, **node.connection_kwargs)
    return client_class(connection_pool=pool)
