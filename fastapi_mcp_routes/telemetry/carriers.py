"""The trace context a request carries, read within the W3C bounds before any propagator sees it.

A caller puts `traceparent`, `tracestate` and `baggage` in `params._meta` (SEP-414; the MCP
conventions' context propagation) or in the HTTP headers. Values from the wire are untrusted:
one that is not a string, or a `traceparent` longer than any version writes, is dropped; a
long `tracestate` is cut as W3C Trace Context 3.3.1.5 says (entries over 128 characters first,
then from the end); a long `baggage` keeps only its whole leading members (W3C Baggage 3.3.2);
a value with anything but printable ASCII is dropped.
The propagator the app configured then parses what is left, and drops what it cannot parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

TRACEPARENT: Final = "traceparent"
TRACESTATE: Final = "tracestate"
BAGGAGE: Final = "baggage"
FIELDS: Final = (TRACEPARENT, TRACESTATE, BAGGAGE)
FIELD_BYTES: Final = frozenset(name.encode() for name in FIELDS)

# Version 00 is 55 characters; a later version may append fields, never this many.
_TRACEPARENT_CHARS: Final = 256
# W3C Trace Context 3.3.1.5: at least 512 characters are propagated; 32 entries at most.
_TRACESTATE_CHARS: Final = 512
_TRACESTATE_ENTRY_CHARS: Final = 128
_TRACESTATE_ENTRIES: Final = 32
# W3C Baggage 3.3.2: at least 64 members and 8192 bytes are propagated.
_BAGGAGE_CHARS: Final = 8192
_BAGGAGE_MEMBERS: Final = 64
# Printable ASCII, spaces and tabs: what a W3C trace context or baggage header may hold.
_PRINTABLE: Final = re.compile(r"[\x20-\x7e\t]*")


def from_meta(meta: object) -> dict[str, str] | None:
    """The trace context in a request's `params._meta`, bounded; `None` when it names no
    `traceparent` (a `tracestate` or `baggage` alone has no parent to belong to)."""
    if not isinstance(meta, Mapping) or TRACEPARENT not in meta:
        return None
    return bounded((name, meta.get(name)) for name in FIELDS)


def from_headers(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str] | None:
    """The trace context in the HTTP headers the request's caller sent, bounded."""
    found = [(key.decode("latin-1"), value.decode("latin-1")) for key, value in headers if key in FIELD_BYTES]
    if not found:
        return None
    return bounded(found)


def bounded(fields: Iterable[tuple[str, Any]]) -> dict[str, str] | None:
    carrier: dict[str, str] = {}
    for name, value in fields:
        # The W3C fields are printable ASCII: anything else (a line break, a control) is dropped
        # before a propagator would log it as it came.
        if not isinstance(value, str) or not value or not _PRINTABLE.fullmatch(value):
            continue
        if name == TRACEPARENT:
            if len(value) <= _TRACEPARENT_CHARS:
                carrier[name] = value
        elif name == TRACESTATE:
            kept = tracestate(value)
            if kept:
                carrier[name] = kept
        elif name == BAGGAGE:
            kept = baggage(value)
            if kept:
                carrier[name] = kept
    return carrier if TRACEPARENT in carrier else None


def tracestate(value: str) -> str:
    """A `tracestate` within 512 characters and 32 entries: one that fits is kept as sent;
    past 32 entries it is invalid and dropped whole; else its long entries go first, then the
    last ones."""
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    if len(entries) > _TRACESTATE_ENTRIES:
        return ""
    if len(value) <= _TRACESTATE_CHARS:
        return value
    kept: list[str] = []
    size = 0
    for entry in entries:
        if len(entry) > _TRACESTATE_ENTRY_CHARS:
            continue
        grown = size + len(entry) + (1 if kept else 0)
        if grown > _TRACESTATE_CHARS:
            break
        kept.append(entry)
        size = grown
    return ",".join(kept)


def baggage(value: str) -> str:
    """A `baggage` within 8192 characters and 64 members, whole members only."""
    if len(value) <= _BAGGAGE_CHARS and value.count(",") < _BAGGAGE_MEMBERS:
        return value
    kept: list[str] = []
    size = 0
    for member in value.split(","):
        grown = size + len(member) + (1 if kept else 0)
        if grown > _BAGGAGE_CHARS or len(kept) == _BAGGAGE_MEMBERS:
            break
        kept.append(member)
        size = grown
    return ",".join(kept)
