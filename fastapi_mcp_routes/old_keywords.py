"""`mcp_routes`' keywords of the previous release, now fields of its option groups.

Each still works for one release, with a `DeprecationWarning` naming its new spelling, also
logged as a WARNING (Python hides a DeprecationWarning raised outside `__main__`, so under
uvicorn nobody would see it): its value becomes that field of the group. A true-or-false
keyword takes what the old one took, any value read as true or false (a `0` from a
configuration file); a value the group refuses is refused naming the keyword given. Giving
both spellings of one setting (the old keyword, and the group with that field set) is a
`ValueError`; a keyword that was never an option is the `TypeError` Python gives for an
unexpected keyword.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from fastapi_mcp_routes.building import EndpointOptions
from fastapi_mcp_routes.options import Limits, Origins, ServerInfo, Streaming, ToolCalls
from fastapi_mcp_routes.server.sealing.secret import MIN_SECRET_BYTES


@dataclass(frozen=True, slots=True)
class Moved:
    """An old keyword: the `mcp_routes` keyword of the group that now holds it, the group's
    class, and its field there."""

    keyword: str
    group: str
    kind: type[Any]
    field: str

    def new_spelling(self) -> str:
        return f"mcp_routes({self.group}={self.kind.__name__}({self.field}=...))"

    def check_unset(self, group: Any, value: Any) -> None:
        """`ValueError` when the group given sets the field already (to other than its default)."""
        if getattr(group, self.field) != getattr(self.kind(), self.field):
            raise ValueError(
                f"mcp_routes({self.keyword}=...) is the old spelling of {self.new_spelling()}: give one of "
                f"them, got both ({self.keyword}={value!r} and {self.group}={group!r})"
            )


def _moved(group: str, kind: type[Any], fields: Mapping[str, str]) -> dict[str, Moved]:
    return {keyword: Moved(keyword, group, kind, field) for keyword, field in fields.items()}


def _same(*names: str) -> dict[str, str]:
    return {name: name for name in names}


MOVED: Final[Mapping[str, Moved]] = {
    **_moved(
        "server", ServerInfo, {"server_name": "name", "server_version": "version", "instructions": "instructions"}
    ),
    **_moved("origins", Origins, _same("allowed_origins", "allowed_hosts")),
    **_moved("limits", Limits, _same("rate_limit")),
    **_moved(
        "streaming",
        Streaming,
        _same("default_subscribe_ms", "max_subscribe_ms", "max_subscribe_frames", "max_stream_seconds"),
    ),
    **_moved(
        "tool_calls",
        ToolCalls,
        _same(
            "require_confirmation_for_mutations",
            "confirmation_ttl_s",
            "allowed_server_urls",
            "allow_arbitrary_urls",
            "allowed_server_urls_from_env",
            "on_tool_call",
        ),
    ),
}
logger = logging.getLogger("fastapi_mcp_routes")
# The old keywords that took any value as true or false, with what each takes as it is.
_TRUE_OR_FALSE: Final[Mapping[str, tuple[type, ...]]] = {
    "require_confirmation_for_mutations": (bool,),
    "allow_arbitrary_urls": (bool,),
    "allowed_server_urls_from_env": (bool, str),  # a string names the variable
}

# Renamed before: it sealed only `requestState`; `secret` seals session ids and tokens too.
REQUEST_STATE_KEY: Final = "request_state_key"


def fold_old_keywords(options: EndpointOptions, old: Mapping[str, Any]) -> EndpointOptions:
    """`options` with the old keywords `old` folded into their groups, each warned of."""
    unknown = [keyword for keyword in old if keyword not in MOVED and keyword != REQUEST_STATE_KEY]
    if unknown:
        raise TypeError(f"mcp_routes() got an unexpected keyword argument {unknown[0]!r}")
    fields: dict[str, dict[str, Any]] = {}
    given: dict[str, list[str]] = {}  # the old keywords of each group, for its refusal
    for keyword, value in old.items():
        if keyword == REQUEST_STATE_KEY:
            _warn(
                f"mcp_routes({REQUEST_STATE_KEY}=...) is deprecated; use mcp_routes(secret=...) (or set "
                "FASTAPI_MCP_ROUTES_SECRET), which seals requestState, session ids and confirmation tokens alike"
            )
            options = replace(options, secret=_request_state_key(value, options.secret))
            continue
        moved = MOVED[keyword]
        _warn(f"mcp_routes({keyword}=...) is deprecated; use {moved.new_spelling()}")
        moved.check_unset(getattr(options, moved.group), value)
        if moved.field in _TRUE_OR_FALSE and not isinstance(value, _TRUE_OR_FALSE[moved.field]):
            value = bool(value)  # the old keyword took any value as true or false
        fields.setdefault(moved.group, {})[moved.field] = value
        given.setdefault(moved.group, []).append(keyword)
    # A group's fields replaced together: each is checked against the others only once all are in.
    changed = {group: _group(options, group, values, given[group]) for group, values in fields.items()}
    return replace(options, **changed)


def _group(options: EndpointOptions, group: str, values: Mapping[str, Any], keywords: list[str]) -> Any:
    try:
        return replace(getattr(options, group), **values)
    except ValueError as refused:
        spelled = ", ".join(f"{keyword}=..." for keyword in keywords)
        raise ValueError(f"mcp_routes({spelled}): {refused}") from None


def _request_state_key(value: Any, secret: Any) -> bytes:
    if secret is not None:
        raise ValueError(
            f"mcp_routes({REQUEST_STATE_KEY}=...) is the old spelling of mcp_routes(secret=...): "
            "give one of them, got both"
        )
    if not isinstance(value, bytes) or len(value) < MIN_SECRET_BYTES:
        raise ValueError(
            f"{REQUEST_STATE_KEY} must be at least {MIN_SECRET_BYTES} bytes (bytes, not text), got {value!r:.20}"
        )
    return value


def _warn(message: str) -> None:
    # Attributed to the caller of `mcp_routes`: past this function, `fold_old_keywords` and it.
    warnings.warn(message, DeprecationWarning, stacklevel=4)
    logger.warning("%s", message)
