"""Records read back from Redis, checked before the library uses them.

Redis holds what any process (or anyone with access to it) wrote: a record from a release that
spelled a field otherwise, a half-edited key, plain garbage. A session or task record whose JSON
does not have the shape this release writes is `UnreadableRecord`, never a `KeyError` halfway
through a request: the store then treats it as gone (server/sessions, server/tasks answer as for
an unknown id) and logs it, and a task's status is one of the tasks extension's before any
client sees it. Fields this release does not know are ignored, so a newer release's record
still reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from fastapi_mcp_routes.store.base import TASK_STATUSES, SessionRecord, TaskRecord, Trust
from fastapi_mcp_routes.wire.jsonrpc import truncate


class UnreadableRecord(ValueError):
    """A record in the store does not have the shape this release writes."""


def read_session(raw: bytes) -> SessionRecord:
    """A session record from its JSON; `UnreadableRecord` when it is not one."""
    fields = _object(raw)
    return SessionRecord(
        id=_field(fields, "id", _string),
        owner=_field(fields, "owner", _hex),
        protocol_version=_field(fields, "protocol_version", _string),
        client_info=_field(fields, "client_info", _optional_object),
        client_capabilities=_field(fields, "client_capabilities", _optional_object),
        log_level=_field(fields, "log_level", _optional_string),
        trust=_field(fields, "trust", _trust),
        subscriptions=_field(fields, "subscriptions", _strings, ()),
    )


def read_task(raw: bytes) -> TaskRecord:
    """A task record from its JSON; `UnreadableRecord` when it is not one, its status included."""
    fields = _object(raw)
    return TaskRecord(
        id=_field(fields, "id", _string),
        owner=_field(fields, "owner", _hex),
        trust=_field(fields, "trust", _trust),
        tool=_field(fields, "tool", _string),
        runner=_field(fields, "runner", _string),
        status=_field(fields, "status", _status),
        created_ms=_field(fields, "created_ms", _integer),
        updated_ms=_field(fields, "updated_ms", _integer),
        ttl_ms=_field(fields, "ttl_ms", _integer),
        message=_field(fields, "message", _optional_string, None),
        questions=_field(fields, "questions", _optional_object, None),
        answers=_field(fields, "answers", _optional_object, None),
        outcome=_field(fields, "outcome", _optional_object, None),
        caller=_field(fields, "caller", _hex, b""),
        released=_field(fields, "released", _released, None),
    )


_REQUIRED: Final = object()
_SHOWN_CHARS: Final = 40  # of a field's value in the log line that names it


def _object(raw: bytes) -> Mapping[str, Any]:
    try:
        fields = json.loads(raw)
    except ValueError as error:  # not JSON, or not UTF-8
        raise UnreadableRecord(f"not JSON ({error})") from None
    except RecursionError:  # arrays nested deeper than the decoder goes
        raise UnreadableRecord("JSON nested too deeply") from None
    if not isinstance(fields, dict):
        raise UnreadableRecord(f"a JSON {type(fields).__name__}, not an object")
    return fields


def _field(fields: Mapping[str, Any], name: str, check: Callable[[Any], Any], default: Any = _REQUIRED) -> Any:
    if name not in fields:
        if default is _REQUIRED:
            raise UnreadableRecord(f"no {name!r}")
        return default
    try:
        return check(fields[name])
    except (TypeError, ValueError):
        raise UnreadableRecord(f"{name!r} is {truncate(repr(fields[name]), _SHOWN_CHARS)}") from None


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def _optional_string(value: object) -> str | None:
    return None if value is None else _string(value)


def _optional_object(value: object) -> Mapping[str, Any] | None:
    if value is not None and not isinstance(value, dict):
        raise TypeError
    return value


def _strings(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise TypeError
    return tuple(_string(item) for item in value)


def _hex(value: object) -> bytes:
    return bytes.fromhex(_string(value))


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError
    return value


def _trust(value: object) -> Trust:
    return Trust(_integer(value))


def _released(value: object) -> str | None:
    if value is not None and value not in ("owner", "total"):
        raise ValueError
    return _optional_string(value)


def _status(value: object) -> str:
    if _string(value) not in TASK_STATUSES:
        raise ValueError
    return str(value)
