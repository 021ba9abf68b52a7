"""`RedisStore`: the `Store` that every process serving the endpoint shares, once one process is not enough.

    store = RedisStore.from_url("redis://localhost:6379/0")

Every method is one round trip: a Lua script (store/redis/scripts.py, sent once and then run
by its digest) or a single command, so each step is atomic however many processes share the
store. `find_session`, on every request's path, is one script that returns the record and
restarts its idle time. Every key lives under `prefix`, so several apps can share one Redis
(6.2 or later): a single Redis, a primary with replicas (Sentinel-managed or not), or a Redis
Cluster, with redis-py's or valkey-py's client. Every script names its keys in `KEYS`, and each
record family keeps to one hash tag, so a Cluster runs each script on one node
(store/redis/scripts.py).

Time: by default the scripts read Redis's own clock (`TIME`). Every process then measures idle
time and expiry on one clock, whatever the skew between their hosts, and it is the clock by
which Redis expires keys: a record's key gets a time to live (`PEXPIRE`) equal to its logical
life, so Redis forgets an idle session with its event log, an expired token, a lapsed claim or
slot on its own once nothing renews it, even when every process died. A `clock` passed in (tests
pass a fake one; processes would need one clock they agree on, such as `time.time`) is sent with
each call instead; keys then still expire by Redis's clock, and records by the one passed in.

Publish/subscribe goes through one pub/sub connection per store (store/redis/pubsub.py); a
message is kept briefly in its topic's log, so one published while that connection is down
reaches its listeners once it is back. A Redis outage surfaces as
`StoreUnavailable` from the method that needed it (answered 503, or as a JSON-RPC error);
`from_url` bounds connecting and each reply so nothing waits long on a Redis that is gone.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final

try:
    import redis  # noqa: F401 - imported first, to say which extra is missing
except ModuleNotFoundError as error:  # pragma: no cover - the extra is installed for tests
    raise ModuleNotFoundError(
        "RedisStore needs the redis package: pip install 'fastapi-mcp-routes[redis]'", name=error.name
    ) from error
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from fastapi_mcp_routes.store.base import (
    INBOX_SIZE,
    USED,
    Holder,
    Inbox,
    LogBounds,
    Refusal,
    ResultBounds,
    SessionBounds,
    SessionRecord,
    StoreFull,
    StreamEvents,
    TaskBounds,
    TaskRecord,
    Trust,
)
from fastapi_mcp_routes.store.policy import result_admission, session_admission, task_admission, token_admission
from fastapi_mcp_routes.store.redis import scripts
from fastapi_mcp_routes.store.redis.connect import RedisClient, connect, errors_of, shown
from fastapi_mcp_routes.store.redis.pubsub import Topics
from fastapi_mcp_routes.store.redis.records import UnreadableRecord, read_session, read_task
from fastapi_mcp_routes.wire.errors import StoreUnavailable
from fastapi_mcp_routes.wire.jsonrpc import truncate

logger = logging.getLogger("fastapi_mcp_routes")

DEFAULT_PREFIX: Final = "fastapi-mcp-routes:"
# `from_url`'s bounds, unless given: a Redis that does not answer is an error within seconds.
DEFAULT_SOCKET_TIMEOUT_S: Final = 5.0
DEFAULT_CONNECT_TIMEOUT_S: Final = 5.0


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))  # a time to live of 0 would delete the key at once


def _dump_record(record: SessionRecord) -> bytes:
    fields: dict[str, Any] = {
        "id": record.id,
        "owner": record.owner.hex(),
        "protocol_version": record.protocol_version,
        "client_info": record.client_info,
        "client_capabilities": record.client_capabilities,
        "log_level": record.log_level,
        "trust": int(record.trust),
    }
    if record.subscriptions:
        # Only when there are some: a record kept by a release without subscriptions dumps to the
        # bytes it was kept as, which `save_session` compares.
        fields["subscriptions"] = list(record.subscriptions)
    return json.dumps(fields, separators=(",", ":")).encode()


def _dump_task(record: TaskRecord) -> bytes:
    fields: dict[str, Any] = {
        "id": record.id,
        "owner": record.owner.hex(),
        "trust": int(record.trust),
        "tool": record.tool,
        "runner": record.runner,
        "status": record.status,
        "created_ms": record.created_ms,
        "updated_ms": record.updated_ms,
        "ttl_ms": record.ttl_ms,
        "message": record.message,
        "questions": record.questions,
        "answers": record.answers,
        "outcome": record.outcome,
        "caller": record.caller.hex(),
    }
    if record.released is not None:
        fields["released"] = record.released
    return json.dumps(fields, separators=(",", ":")).encode()


class RedisStore:
    """Keeps every record in Redis, shared by every process; see `Store` for what each method
    promises."""

    shared = True

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """`client`: an asyncio client that returns bytes (`decode_responses=False`): redis-py's
        `Redis`, `RedisCluster` or a Sentinel-managed primary (`Sentinel(...).master_for(name)`),
        or valkey-py's `Valkey` or `ValkeyCluster`. It stays open at `aclose`, for whoever made
        it to close. `prefix`: put before every key and topic; no braces (Cluster hash tags).
        `clock`: seconds, sent with each call instead of Redis's own `TIME`."""
        if client.get_connection_kwargs().get("decode_responses"):
            raise ValueError("RedisStore needs a client that returns bytes, got one made with decode_responses=True")
        self._keys = scripts.Keys.under(prefix)  # ValueError for an empty prefix, or one with braces
        self._redis = client
        self._prefix = prefix
        self._clock = clock
        # A Cluster client routes each command by its keys (every script names them in KEYS);
        # both redis-py's and valkey-py's have a nodes manager, and no other client has.
        self._cluster = hasattr(client, "nodes_manager")
        self._errors = errors_of(client)
        self._url: str | None = None  # set by from_url, which owns its client
        self._closing: tuple[Any, ...] = ()  # what from_url made and aclose closes
        self._topics = Topics(client, prefix, f"own:{secrets.token_hex(8)}", cluster=self._cluster)
        register = client.register_script
        self._open_session = register(scripts.OPEN_SESSION)
        self._find_session = register(scripts.FIND_SESSION)
        self._save_session = register(scripts.SAVE_SESSION)
        self._close_session = register(scripts.CLOSE_SESSION)
        self._claim = register(scripts.CLAIM)
        self._release = register(scripts.RELEASE)
        self._claim_once = register(scripts.CLAIM_ONCE)
        self._take_slots = register(scripts.TAKE_SLOTS)
        self._free_slots = register(scripts.FREE_SLOTS)
        self._holds_slot = register(scripts.HOLDS_SLOT)
        self._start_stream = register(scripts.START_STREAM)
        self._append_event = register(scripts.APPEND_EVENT)
        self._complete_stream = register(scripts.COMPLETE_STREAM)
        self._read_stream = register(scripts.READ_STREAM)
        self._forget_stream = register(scripts.FORGET_STREAM)
        self._put_token = register(scripts.PUT_TOKEN)
        self._adopt_token = register(scripts.ADOPT_TOKEN)
        self._use_token = register(scripts.USE_TOKEN)
        self._revoke_token = register(scripts.REVOKE_TOKEN)
        self._put_task = register(scripts.PUT_TASK)
        self._find_task = register(scripts.FIND_TASK)
        self._save_task = register(scripts.SAVE_TASK)
        self._end_task = register(scripts.END_TASK)
        self._running_tasks = register(scripts.RUNNING_TASKS)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Callable[[], float] | None = None,
        **options: Any,
    ) -> RedisStore:
        """A store on the Redis that `url` names, with a client of its own that `aclose` closes:

        - `redis://[user:password@]host:port/db` (`rediss://` for TLS, `unix://` a socket): one
          Redis, or a primary with replicas;
        - `redis+cluster://[user:password@]host:port[,host:port...]` (`rediss+cluster://`): a
          Redis Cluster, found from any of the nodes named;
        - `redis+sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]`
          (`rediss+sentinel://` for TLS to the primary): the primary that the Sentinels at
          those addresses name, followed through failovers. The credentials are the primary's;
          a Sentinel's own go in `sentinel_kwargs`.

        `options` go to the client (`redis.asyncio.Redis.from_url`, `RedisCluster`, or
        `Sentinel`, whose `sentinel_kwargs` option reaches the Sentinels)."""
        options.setdefault("socket_timeout", DEFAULT_SOCKET_TIMEOUT_S)
        options.setdefault("socket_connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
        # One retry, on a dropped connection only (a pooled one Redis closed while idle): a
        # timed-out script may have run, and running a token's use twice would answer "used".
        # redis-py's Cluster client retries a timeout too, whatever this says.
        options.setdefault("retry", Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)))
        client, closing = connect(url, options)
        store = cls(client, prefix=prefix, clock=clock)
        store._url, store._closing = url, closing
        return store

    @property
    def url(self) -> str | None:
        """The Redis URL the store was made from (`from_url`), else `None`."""
        return self._url

    @property
    def client(self) -> RedisClient:
        """The client the store runs its commands on (one of `from_url`'s own, or the one
        given); the endpoint's rate limit counts there too."""
        return self._redis

    @property
    def cluster(self) -> bool:
        """Whether the client is a Redis Cluster client (redis-py's or valkey-py's)."""
        return self._cluster

    @property
    def prefix(self) -> str:
        """What every key of the store starts with."""
        return self._prefix

    async def aclose(self) -> None:
        await self._topics.aclose()
        for made in self._closing:
            await made.aclose()

    async def _run(self, script: Any, keys: list[str], *args: str | bytes | int) -> Any:
        now = "" if self._clock is None else int(self._clock() * 1000)
        try:
            return await script(keys=keys, args=[now, *args])
        except self._errors as error:  # down, too slow, or out of memory: no step can be taken
            raise StoreUnavailable(str(error)) from error

    # -- sessions --------------------------------------------------------------------------

    async def open_session(self, record: SessionRecord, bounds: SessionBounds) -> tuple[str, ...]:
        full, gone = await self._run(
            self._open_session,
            self._keys.new_session(record.id, record.owner.hex()),
            record.id,
            _dump_record(record),
            record.owner.hex(),
            int(record.trust),
            _ms(bounds.idle_s),
            *session_admission(record, bounds).terms(),
        )
        ids = tuple(session_id.decode() for session_id in gone)
        if full:
            raise StoreFull(ids)
        return ids

    async def adopt_session(self, record: SessionRecord, bounds: SessionBounds) -> bool:
        """Adopts nothing: this store has every session of every process, so one it lacks has
        ended (closed, pushed out or idle past its time)."""
        return False

    async def find_session(self, session_id: str, idle_s: float) -> SessionRecord | None:
        raw = await self._run(self._find_session, self._keys.session(session_id), session_id, _ms(idle_s))
        if raw is None:
            return None
        try:
            return read_session(raw)
        except UnreadableRecord as unreadable:
            # A fresh start: the client is told its session is gone and opens another.
            logger.warning(
                "closed session %r: its record in Redis cannot be read (%s)", truncate(session_id), unreadable
            )
            await self.close_session(session_id)
            return None

    async def save_session(self, record: SessionRecord, replacing: SessionRecord) -> bool:
        # A record read back dumps to the bytes it was kept as (JSON gives back what it wrote),
        # so the script compares bytes.
        keys = self._keys.session(record.id)
        return bool(await self._run(self._save_session, keys, record.id, _dump_record(record), _dump_record(replacing)))

    async def close_session(self, session_id: str) -> bool:
        return bool(await self._run(self._close_session, self._keys.session(session_id), session_id))

    # -- claims ----------------------------------------------------------------------------

    async def claim(self, name: str, holder: str, ttl_s: float) -> bool:
        return bool(await self._run(self._claim, [self._keys.claim(name)], holder, _ms(ttl_s)))

    async def release(self, name: str, holder: str) -> None:
        await self._run(self._release, [self._keys.claim(name)], holder)

    async def claim_once(
        self, name: str, ttl_s: float, max_kept: int, *, owner: str | None = None, max_per_owner: int = 0
    ) -> bool | None:
        keys = self._keys.once(owner)
        kept = await self._run(self._claim_once, keys, name, _ms(ttl_s), max_kept, max_per_owner)
        return None if kept < 0 else bool(kept)

    # -- slots -----------------------------------------------------------------------------

    async def take_slots(self, pools: Sequence[tuple[str, int]], holder: str, ttl_s: float) -> str | None:
        keys = self._keys.slots(name for name, _ in pools)
        full = await self._run(self._take_slots, keys, holder, _ms(ttl_s), *(limit for _, limit in pools))
        return pools[full - 1][0] if full else None

    async def free_slots(self, pools: Sequence[str], holder: str) -> None:
        if pools:
            await self._run(self._free_slots, self._keys.slots(pools), holder)

    async def holds_slot(self, pool: str, holder: str) -> bool:
        return bool(await self._run(self._holds_slot, self._keys.slots([pool]), holder))

    # -- resumable streams -----------------------------------------------------------------

    async def start_stream(self, session_id: str, max_kept: int, trust: Trust = Trust.ANONYMOUS) -> int | None:
        number = await self._run(self._start_stream, self._keys.session(session_id), session_id, max_kept, int(trust))
        return None if number is None else int(number)

    async def append_event(self, session_id: str, stream: int, event: bytes, bounds: LogBounds) -> None:
        await self._run(
            self._append_event,
            self._keys.session(session_id),
            session_id,
            stream,
            event,
            bounds.max_events,
            bounds.max_session_bytes,
            bounds.max_total_bytes,
        )

    async def complete_stream(self, session_id: str, stream: int) -> None:
        await self._run(self._complete_stream, self._keys.session(session_id), session_id, stream)

    async def read_stream(self, session_id: str, stream: int, after: int) -> StreamEvents | None:
        found = await self._run(self._read_stream, self._keys.session(session_id), session_id, stream, after)
        if found is None:
            return None
        complete, events = found
        return StreamEvents(tuple(events), bool(complete))

    async def forget_stream(self, session_id: str, stream: int) -> None:
        await self._run(self._forget_stream, self._keys.session(session_id), session_id, stream)

    # -- tokens ----------------------------------------------------------------------------

    async def put_token(self, key: str, value: bytes, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> None:
        keys = self._keys.new_token(key, holder.owner.hex())
        if not await self._run(self._put_token, keys, key, value, *self._token_terms(ttl_s, holder, bounds)):
            raise StoreFull

    async def use_token(self, key: str, expected: bytes) -> bytes | None:
        found: bytes | None = await self._run(self._use_token, self._keys.token(key), key, expected, USED)
        return found

    async def adopt_token(self, key: str, ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> bool:
        keys = self._keys.new_token(key, holder.owner.hex())
        adopted = await self._run(self._adopt_token, keys, key, USED, *self._token_terms(ttl_s, holder, bounds))
        if adopted < 0:
            raise StoreFull
        return bool(adopted)

    async def revoke_token(self, key: str) -> None:
        await self._run(self._revoke_token, self._keys.token(key), key, USED)

    @staticmethod
    def _token_terms(ttl_s: float, holder: Holder, bounds: tuple[int, int]) -> tuple[int | str, ...]:
        return _ms(ttl_s), holder.owner.hex(), int(holder.trust), *token_admission(holder, bounds).terms()

    # -- tasks -----------------------------------------------------------------------------

    async def put_task(self, record: TaskRecord, bounds: TaskBounds) -> str | None:
        full = await self._run(
            self._put_task,
            self._keys.new_task(record.id, record.owner.hex()),
            record.id,
            _dump_task(record),
            record.owner.hex(),
            int(record.trust),
            max(1, record.ttl_ms),
            int(record.ended),
            *task_admission(record, bounds).terms(),
        )
        return (None, "owner", "total")[full]

    async def find_task(self, task_id: str) -> TaskRecord | None:
        raw = await self._run(self._find_task, self._keys.task(task_id), task_id)
        if raw is None:
            return None
        try:
            return read_task(raw)
        except UnreadableRecord as unreadable:
            # Answered as an unknown task; its key expires with its time to live.
            logger.warning(
                "ignored task %s: its record in Redis cannot be read (%s)", repr(truncate(task_id)), unreadable
            )
            return None

    async def save_task(self, record: TaskRecord, replacing: TaskRecord) -> bool:
        # As for sessions: a record read back dumps to the bytes it was kept as.
        saved = await self._run(
            self._save_task,
            self._keys.task(record.id),
            record.id,
            _dump_task(record),
            _dump_task(replacing),
            int(record.trust),
            int(record.ended),
        )
        return bool(saved)

    async def end_task(
        self, record: TaskRecord, replacing: TaskRecord, size: int, bounds: ResultBounds
    ) -> bool | Refusal:
        saved: int = await self._run(
            self._end_task,
            self._keys.ended_task(record.id, record.owner.hex()),
            record.id,
            _dump_task(record),
            _dump_task(replacing),
            record.owner.hex(),
            int(record.trust),
            int(record.ended),
            size,
            *result_admission(record, size, bounds).terms(),
        )
        ends: tuple[bool | Refusal, ...] = (False, True, "owner", "total")
        return ends[saved]

    async def running_tasks(self, owner: bytes | None, limit: int) -> tuple[str, ...]:
        keys = self._keys.running_tasks(owner.hex() if owner is not None else None)
        ids = await self._run(self._running_tasks, keys, limit)
        return tuple(task_id.decode() for task_id in ids)

    # -- messages --------------------------------------------------------------------------

    async def publish(self, topic: str, message: bytes) -> bool:
        try:
            listening = await self._topics.publish(topic, message)
        except self._errors as error:
            raise StoreUnavailable(str(error)) from error
        return listening > 0

    @asynccontextmanager
    async def subscribe(self, topic: str, *, capacity: int = INBOX_SIZE) -> AsyncIterator[Inbox]:
        async with self._topics.listen(topic, capacity) as inbox:  # StoreUnavailable
            yield inbox

    def __repr__(self) -> str:
        where = f"{shown(self._url)}, " if self._url is not None else ""
        return f"RedisStore({where}prefix={self._prefix!r})"
