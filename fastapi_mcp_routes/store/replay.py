"""Resumable SSE streams (spec 2025-11-25, basic/transports "Resumability and Redelivery").

Every event of a POST stream in a 2025-11-25 session carries an id `<stream>.<seq>`, unique in
the session and naming its stream. A stream's events are kept in a bounded log, whether or not
the client seemed to receive them (a server often cannot tell a dropped connection from a slow
one), so a client whose connection dropped can send GET with `Last-Event-ID` and receive what
followed that event on that stream, and only that stream, up to the answer. A log is dropped
once a resume has delivered it whole, or when newer streams push it out.

Events are framed by FastAPI's own SSE encoder (`fastapi.sse.format_sse_event`), which writes
`event`, `data`, `id`, `retry` in that order, each line ending in LF. Field order within an
event does not matter to SSE parsers (WHATWG HTML, "Interpreting an event stream").
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Final

from fastapi.sse import format_sse_event

# Per session: how many streams are kept, and how many events of each.
MAX_KEPT_STREAMS: Final = 8
MAX_EVENTS_PER_STREAM: Final = 256
# What clients wait before reconnecting, sent in each stream's priming event (milliseconds).
RETRY_MS: Final = 1000
MESSAGE_EVENT: Final = "message"  # the event type every MCP message is sent as
_EVENT_ID: Final = re.compile(r"([0-9]{1,9})\.([0-9]{1,9})")


class StreamLog:
    """The events one stream has sent so far; `complete` once its answer is among them."""

    __slots__ = ("complete", "events", "number", "overflowed", "sent")

    def __init__(self, number: int) -> None:
        self.number = number
        self.events: list[bytes] = []  # framed SSE events, seq 1 first
        self.sent = 0  # events numbered so far, kept or not
        self.complete = False
        self.overflowed = False  # too long to keep whole: it can no longer be resumed

    def record(self, data: bytes) -> bytes:
        """Frame a message as this stream's next event, keeping it while there is room."""
        self.sent += 1
        framed = message_event(data, f"{self.number}.{self.sent}")
        if len(self.events) < MAX_EVENTS_PER_STREAM:
            self.events.append(framed)
        else:
            self.overflowed = True
        return framed


class StreamLogs:
    """A session's resumable streams, in the order they started."""

    __slots__ = ("_logs", "_next")

    def __init__(self) -> None:
        self._logs: OrderedDict[int, StreamLog] = OrderedDict()
        self._next = 1

    def start(self) -> StreamLog:
        log = self._logs[self._next] = StreamLog(self._next)
        self._next += 1
        if len(self._logs) > MAX_KEPT_STREAMS:
            # Push out the oldest finished stream; only if every one still runs, the oldest.
            oldest_done = next((n for n, kept in self._logs.items() if kept.complete), None)
            self._logs.pop(oldest_done if oldest_done is not None else next(iter(self._logs)))
        return log

    def forget(self, log: StreamLog) -> None:
        self._logs.pop(log.number, None)

    def find(self, last_event_id: str) -> tuple[StreamLog, int] | None:
        """The stream an event id names and how many of its events the client has seen."""
        match = _EVENT_ID.fullmatch(last_event_id.strip())
        if match is None:
            return None
        log = self._logs.get(int(match[1]))
        seen = int(match[2])
        if log is None or log.overflowed or seen > len(log.events):
            return None
        return log, seen


def message_event(data: bytes, event_id: str | None = None) -> bytes:
    """One SSE event carrying one JSON-RPC message (`data` is its JSON, on one line)."""
    return format_sse_event(data_str=data.decode(), event=MESSAGE_EVENT, id=event_id)


def priming_event(stream: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, the retry delay, and empty
    data (spec 2025-11-25, basic/transports "Resumability and Redelivery")."""
    return format_sse_event(data_str="", id=f"{stream}.0", retry=RETRY_MS)
