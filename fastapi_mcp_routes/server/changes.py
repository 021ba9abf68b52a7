"""`ChangeFeed`: waiting for a value of this process to move, without one timer per waiter.

A listener (a GET stream, a `subscriptions/listen` stream) waits for the next change of what
it listens to. Some values say when they move; the tool list does not: a route added to the
app at runtime changes only the app's route table, which nothing announces. So someone must
look. One waiter at a time looks, every `interval_s`; when the value moves, every waiter wakes.
However many listen, idle listeners cost one look per interval for the whole process, and a
listener that is woken costs nothing until then. Whoever reads the value anyway (a
`tools/list`) reports it with `note`, which wakes the waiters at once when it moved.

When the waiter that looks leaves (its stream closed), one other waiter is woken to look in its
place; nobody looks while nobody waits.

Values that live in the `Store` (events of a resumable stream, the end of a session) move in
any process; those are awaited through the Store's publish/subscribe instead (transport/).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import anyio

_V = TypeVar("_V")


class ChangeFeed(Generic[_V]):
    """Wakes whoever waits for the value that `look` returns to move."""

    def __init__(self, look: Callable[[], _V], interval_s: float) -> None:
        self._look = look
        self._interval_s = interval_s
        self._value: _V | None = None
        self._looking = False
        # One event per waiter, made in the waiter's own task (so in its own event loop), in
        # the order they came: the first takes over the looking when the looker leaves.
        self._waiting: dict[anyio.Event, None] = {}

    def now(self) -> _V:
        """The value now (one look)."""
        value = self._look()
        self.note(value)
        return value

    def note(self, value: _V) -> None:
        """The value as someone just read it; waiters wake if it moved."""
        if value == self._value:
            return
        moved = self._value is not None
        self._value = value
        if moved:
            for waiter in self._waiting:
                waiter.set()
            self._waiting.clear()

    async def after(self, seen: _V) -> _V:
        """The value, once it is no longer `seen`."""
        while self._value is None or self._value == seen:
            woken = anyio.Event()
            self._waiting[woken] = None
            looks = not self._looking  # nobody looks yet: this waiter will
            self._looking = True
            try:
                await (self._look_until(woken) if looks else woken.wait())
            finally:
                self._waiting.pop(woken, None)
                if looks:
                    self._looking = False
                    if self._waiting and self._value == seen:
                        # Left before the value moved (its stream closed): the next one looks.
                        next(iter(self._waiting)).set()
        return self._value

    async def _look_until(self, woken: anyio.Event) -> None:
        """Look every interval until woken: by a move this look or someone else's found."""
        while True:
            with anyio.move_on_after(self._interval_s):
                await woken.wait()
                return
            self.note(self._look())
