"""`Fanout`: which of this process's streams watch which keys (a resource's URI digest, a task
id), so news of a key wakes the streams watching it and no other.

Each stream holds one `Watcher`: its pending notices, at most one per key, in the order their
keys were first heard, woken by one event. A notice names a key, not what changed: the stream
reads what is current when it sends (`notifications/resources/updated` carries no payload, a
task is read as `tasks/get` shows it), so a key heard ten times while the stream was busy
writing is sent once, and the last news of a key is never lost to a full queue. A watcher's
pending notices are bounded by the keys it watches.

Deliberate choice: news is handed over synchronously (`notify` sets an event, never awaits), so
the one task that reads a topic for the whole process keeps up with its publishers, and an
update costs a dict lookup plus one wake-up per stream that watches its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import anyio


class Watcher:
    """One stream's pending notices, by key."""

    __slots__ = ("_fanout", "_keys", "_pending", "_woken")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._keys: frozenset[str] = frozenset(keys)
        self._fanout: Fanout | None = None
        self._pending: dict[str, str] = {}
        self._woken = anyio.Event()

    @property
    def keys(self) -> frozenset[str]:
        return self._keys

    def watch(self, keys: Iterable[str]) -> None:
        """Watch `keys` from now on, instead of those watched so far."""
        keys = frozenset(keys)
        if keys == self._keys:
            return
        if self._fanout is not None:
            self._fanout.moved(self, self._keys, keys)
        self._keys = keys
        for key in [key for key in self._pending if key not in keys]:
            del self._pending[key]

    def indexed_by(self, fanout: Fanout | None) -> None:
        """Have `fanout` follow the keys this watcher watches from now on (`None`: nobody)."""
        self._fanout = fanout

    def notice(self, key: str, value: str) -> None:
        """`key` changed: one notice of it waits (the first `value` heard), and the stream wakes."""
        if key not in self._pending:
            self._pending[key] = value
            self._woken.set()

    async def taken(self) -> list[str]:
        """The values of the notices pending, in order, once there is one; none are left."""
        await self._woken.wait()
        taken = list(self._pending.values())
        self._pending.clear()
        self._woken = anyio.Event()
        return taken


class Fanout:
    """The watchers of this process, by the keys they watch."""

    def __init__(self) -> None:
        self._watching: dict[str, set[Watcher]] = {}

    def __bool__(self) -> bool:
        """Whether any watcher watches a key."""
        return bool(self._watching)

    def watched(self, key: str) -> int:
        """How many watchers watch `key`."""
        return len(self._watching.get(key, ()))

    @contextmanager
    def watching(self, watcher: Watcher) -> Iterator[Watcher]:
        """Index `watcher` under its keys (and those it watches later) while the context is open."""
        self.moved(watcher, frozenset(), watcher.keys)
        watcher.indexed_by(self)
        try:
            yield watcher
        finally:
            watcher.indexed_by(None)
            self.moved(watcher, watcher.keys, frozenset())

    def notify(self, key: str, value: str) -> None:
        """`key` changed: each watcher of it gets a notice carrying `value`."""
        for watcher in self._watching.get(key, ()):
            watcher.notice(key, value)

    def moved(self, watcher: Watcher, before: frozenset[str], after: frozenset[str]) -> None:
        for key in before - after:
            watchers = self._watching.get(key)
            if watchers is not None:
                watchers.discard(watcher)
                if not watchers:
                    del self._watching[key]
        for key in after - before:
            self._watching.setdefault(key, set()).add(watcher)
