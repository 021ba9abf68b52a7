"""Resumable SSE streams (spec 2025-11-25, basic/transports "Resumability and Redelivery").

Every event of a POST stream in a 2025-11-25 session carries an id `<stream>.<seq>`, unique in
the session and naming its stream. The stream's events are kept in a bounded log until the
client has had them all; a client whose connection dropped sends GET with `Last-Event-ID`
and receives what followed that event on that stream, and only that stream, up to the answer.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

# Per session: how many unfinished or undelivered streams are kept, and how many events each.
MAX_KEPT_STREAMS: Final = 8
MAX_EVENTS_PER_STREAM: Final = 256
# What clients wait before reconnecting, sent in each stream's priming event (milliseconds).
RETRY_MS: Final = 1000


class StreamLog:
    """The events one stream has sent so far; `complete` once its answer is among them."""

    __slots__ = ("complete", "events", "overflowed")

    def __init__(self) -> None:
        self.events: list[bytes] = []  # framed SSE events, seq 1 first
        self.complete = False
        self.overflowed = False  # too long to keep whole: it can no longer be resumed

    def record(self, event: bytes) -> None:
        if len(self.events) < MAX_EVENTS_PER_STREAM:
            self.events.append(event)
        else:
            self.overflowed = True


class StreamLogs:
    """A session's resumable streams, numbered in the order they started, oldest dropped first."""

    __slots__ = ("_logs", "_next")

    def __init__(self) -> None:
        self._logs: OrderedDict[int, StreamLog] = OrderedDict()
        self._next = 1

    def start(self) -> tuple[int, StreamLog]:
        number, self._next = self._next, self._next + 1
        log = self._logs[number] = StreamLog()
        while len(self._logs) > MAX_KEPT_STREAMS:
            self._logs.popitem(last=False)
        return number, log

    def forget(self, number: int) -> None:
        self._logs.pop(number, None)

    def find(self, last_event_id: str) -> tuple[StreamLog, int] | None:
        """The stream an event id names and how many of its events the client has seen."""
        number, _, seq = last_event_id.partition(".")
        if not (number.isdigit() and seq.isdigit()):
            return None
        log = self._logs.get(int(number))
        if log is None or log.overflowed or int(seq) > len(log.events):
            return None
        return log, int(seq)


def event_id(stream: int, seq: int) -> bytes:
    return f"{stream}.{seq}".encode()


def priming_event(stream: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, and the retry delay."""
    return b"id: " + event_id(stream, 0) + b"\nretry: " + str(RETRY_MS).encode() + b"\ndata: \n\n"
