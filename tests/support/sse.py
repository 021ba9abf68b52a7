"""Reading server-sent events: the JSON-RPC messages and event ids of a body, read whole or as
its lines arrive."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx


def _lines(body: str | Iterable[str]) -> Iterable[str]:
    return body.splitlines() if isinstance(body, str) else body


def iter_sse_messages(body: str | Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body (its text, or its lines as they arrive), in order;
    a priming event's empty data is no message."""
    for line in _lines(body):
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])


def sse_messages(body: str | Iterable[str]) -> list[dict[str, Any]]:
    """Every JSON-RPC message of an SSE body."""
    return list(iter_sse_messages(body))


def sse_ids(body: str | Iterable[str]) -> list[str]:
    """The event ids of an SSE body, in order."""
    return [line[len("id: ") :] for line in _lines(body) if line.startswith("id: ")]


def read_to_first_message(stream: httpx.Response) -> str | None:
    """Read a streamed answer up to its first JSON-RPC message, and no further; the id of the
    last event read (each read is bounded by the client's timeout)."""
    last_id = None
    got_message = False
    for line in stream.iter_lines():
        if line.startswith("id: "):
            last_id = line[len("id: ") :]
        got_message = got_message or line.startswith("data: {")
        if got_message and not line:
            break  # the event is whole: its fields may come in any order
    return last_id
