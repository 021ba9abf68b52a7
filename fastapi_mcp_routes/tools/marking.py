"""Opt-in MCP metadata on a route: the `mcp_tool` decorator and `openapi_extra={"x-mcp": ...}`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, TypeVar

from fastapi_mcp_routes.tools.visibility import Visible, read_visible

# The attribute `mcp_tool` sets on the endpoint function. An attribute (not a registry) is what
# lets the decorator sit above or below `@app.get`: both see the same function object.
ENDPOINT_ATTRIBUTE: Final = "__mcp_tool__"
# The `openapi_extra` key for the decorator-free form.
OPENAPI_EXTRA_KEY: Final = "x-mcp"
# The attribute `auth_guard` sets on a dependency.
AUTH_GUARD_ATTRIBUTE: Final = "__mcp_auth_guard__"

_F = TypeVar("_F", bound=Callable[..., Any])
# Whether a call may run as a task (2026-07-28 tasks extension): never, when the client
# declared the extension, or only then (other clients are refused with -32021).
TASK_MODES: Final = ("never", "optional", "required")


@dataclass(frozen=True, slots=True)
class ToolOptions:
    """What a route's author said about its tool; `None` means "derive it"."""

    name: str | None = None
    title: str | None = None
    description: str | None = None
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    meta: Mapping[str, Any] | None = None
    # A pure predicate of the caller's principal (and its credentials, where it takes them):
    # whether tools/list shows the tool. Never authorization: a hidden tool called by name
    # still runs every guard of its route.
    visible: Visible | None = None
    # Whether a call must be confirmed before it runs; `None` follows the endpoint's
    # `require_confirmation_for_mutations` for tools that are not read-only.
    confirm: bool | None = None
    # Whether a call may run as a task the client polls (`TASK_MODES`).
    task: str = "never"
    # Whether the route streams (SSE, JSON Lines): a call samples it for a window. `None`
    # follows the route's response class.
    stream: bool | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> ToolOptions:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{where}: unknown MCP tool option(s) {unknown!r}; the options are {sorted(known)!r}")
        options = cls(**values)
        options.check(where)
        return options

    def check(self, where: str) -> None:
        for key in ("name", "title", "description"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{where}: MCP tool option {key!r} must be a string, got {value!r}")
        for key in ("read_only", "destructive", "idempotent", "open_world", "confirm", "stream"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{where}: MCP tool option {key!r} must be a bool, got {value!r}")
        if self.meta is not None and not isinstance(self.meta, Mapping):
            raise ValueError(f"{where}: MCP tool option 'meta' must be a mapping, got {self.meta!r}")
        if self.task not in TASK_MODES:
            raise ValueError(f"{where}: MCP tool option 'task' must be one of {TASK_MODES!r}, got {self.task!r}")
        read_visible(self.visible, where, "tool")


def mcp_tool(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    read_only: bool | None = None,
    destructive: bool | None = None,
    idempotent: bool | None = None,
    open_world: bool | None = None,
    meta: Mapping[str, Any] | None = None,
    visible: Visible | None = None,
    confirm: bool | None = None,
    task: str = "never",
    stream: bool | None = None,
) -> Callable[[_F], _F]:
    """Mark a route's endpoint as an MCP tool; works above or below `@app.get(...)`.

    Args:
        name: the tool name; defaults to the route's name (the function name).
        title: a human-readable title; defaults to the route's summary.
        description: defaults to the route's description (its docstring, unless the route sets
            `description=`), else its summary.
        read_only, destructive, idempotent, open_world: override the annotation hints that
            are otherwise derived from the HTTP method.
        meta: extra `_meta` entries published with the tool.
        visible: a pure predicate deciding whether `tools/list` shows the tool (with
            `list_visible_only`): `visible(principal)`, or `visible(principal, credentials)`
            where `credentials[scheme]` is what one of the app's security schemes reads from
            the caller (`Credentials`); it never authorizes a call.
        confirm: `True` makes every call wait for confirmation, `False` never; by default
            tools that are not read-only wait when `require_confirmation_for_mutations` is on.
        task: `"optional"` lets a call run as a task the client polls, when the client declared
            the tasks extension (2026-07-28) and the route takes longer than `Tasks.after_s`;
            `"required"` also refuses clients without the extension (-32021); `"never"` (the
            default) always answers directly. Session-era clients always get a direct answer.
        stream: `True` samples the route's response as a stream (SSE or JSON Lines) for a
            window the call chooses (`durationMs`, `maxFrames`); by default a route is sampled
            when its response class streams (`EventSourceResponse`, `StreamingResponse`) or
            FastAPI streams its generator as JSON Lines; `False` reads the response whole.
    """
    options = ToolOptions(
        name=name,
        title=title,
        description=description,
        read_only=read_only,
        destructive=destructive,
        idempotent=idempotent,
        open_world=open_world,
        meta=dict(meta) if meta is not None else None,
        visible=visible,
        confirm=confirm,
        task=task,
        stream=stream,
    )
    options.check("mcp_tool()")

    def mark(endpoint: _F) -> _F:
        setattr(endpoint, ENDPOINT_ATTRIBUTE, options)
        return endpoint

    return mark


def read_tool_options(
    endpoint: Callable[..., Any] | None, openapi_extra: Mapping[str, Any] | None, where: str
) -> ToolOptions | None:
    """The route's MCP options, or `None` when the route is not marked as a tool."""
    decorated = getattr(endpoint, ENDPOINT_ATTRIBUTE, None)
    extra = (openapi_extra or {}).get(OPENAPI_EXTRA_KEY)
    if extra is None or extra is False:
        return decorated if isinstance(decorated, ToolOptions) else None
    if decorated is not None:
        raise ValueError(f"{where}: marked both by @mcp_tool and openapi_extra['x-mcp']; keep one")
    if extra is True:
        return ToolOptions()
    if isinstance(extra, Mapping):
        return ToolOptions.from_mapping(extra, where)
    raise ValueError(f"{where}: openapi_extra['x-mcp'] must be True or a mapping, got {extra!r}")


def auth_guard(dependency: _F) -> _F:
    """Mark a FastAPI dependency as an authentication guard, like a `fastapi.security` scheme.

    A tool whose route depends on it is left out of `tools/list` for a caller that presents
    no credential (with `list_visible_only`). It changes nothing else: the dependency still
    runs, and decides, on every call. Use it as a decorator on the dependency function, or
    call it on a dependency object.
    """
    if not callable(dependency):
        raise ValueError(f"auth_guard marks a FastAPI dependency (a callable), got {dependency!r}")
    setattr(dependency, AUTH_GUARD_ATTRIBUTE, True)
    return dependency


def is_auth_guard(dependency: object) -> bool:
    return getattr(dependency, AUTH_GUARD_ATTRIBUTE, False) is True
