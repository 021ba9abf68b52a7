"""Opt-in MCP metadata for resources, prompts and completions: `mcp_resource`, `mcp_prompt`,
`mcp_completion`, and their `openapi_extra` forms.

As with `mcp_tool` (tools/marking.py), each decorator sets an attribute on the endpoint
function, so it works above or below `@app.get(...)`, and a route may carry several marks (a
tool and a resource at once). The decorator-free forms are `openapi_extra` keys holding the
same options: `{"x-mcp-resource": {"uri": "notes://{note_id}"}}`, `{"x-mcp-prompt": True}`,
`{"x-mcp-completion": {"prompt": "summarize_note", "argument": "note_id"}}`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, Literal, TypeVar

from fastapi_mcp_routes.tools.catalog.uri_template import UriTemplate
from fastapi_mcp_routes.tools.visibility import Visible, read_visible

RESOURCE_ATTRIBUTE: Final = "__mcp_resource__"
PROMPT_ATTRIBUTE: Final = "__mcp_prompt__"
COMPLETION_ATTRIBUTE: Final = "__mcp_completion__"
RESOURCE_EXTRA_KEY: Final = "x-mcp-resource"
PROMPT_EXTRA_KEY: Final = "x-mcp-prompt"
COMPLETION_EXTRA_KEY: Final = "x-mcp-completion"
# The roles a resource's `audience` annotation may name (spec 2025-11-25, server/resources).
ROLES: Final = ("user", "assistant")

_F = TypeVar("_F", bound=Callable[..., Any])
Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class ResourceOptions:
    """What a route's author said about its resource; `None` means "derive it"."""

    uri: str
    name: str | None = None
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    audience: tuple[Role, ...] | None = None
    priority: float | None = None
    last_modified: str | None = None  # ISO 8601, as the annotation carries it
    meta: Mapping[str, Any] | None = None
    visible: Visible | None = None  # as `mcp_tool(visible=...)`: never authorization

    def __post_init__(self) -> None:
        if isinstance(self.audience, list):  # as `openapi_extra` and callers write it
            object.__setattr__(self, "audience", tuple(self.audience))

    def check(self, where: str) -> UriTemplate:
        """Check every option; the parsed URI template."""
        try:
            template = UriTemplate.parse(self.uri)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        _strings(self, ("name", "title", "description", "mime_type", "last_modified"), where, "resource")
        if self.size is not None and (isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 0):
            raise ValueError(f"{where}: MCP resource option 'size' must be a number of bytes, got {self.size!r}")
        if self.audience is not None and (
            isinstance(self.audience, str) or not all(role in ROLES for role in self.audience)
        ):
            raise ValueError(f"{where}: MCP resource option 'audience' must list {ROLES}, got {self.audience!r}")
        priority = self.priority
        number = isinstance(priority, (int, float)) and not isinstance(priority, bool)
        if priority is not None and not (number and 0 <= priority <= 1):
            raise ValueError(f"{where}: MCP resource option 'priority' must be a number from 0 to 1, got {priority!r}")
        _common(self.meta, self.visible, where, "resource")
        return template


@dataclass(frozen=True, slots=True)
class PromptOptions:
    """What a route's author said about its prompt; `None` means "derive it"."""

    name: str | None = None
    title: str | None = None
    description: str | None = None
    meta: Mapping[str, Any] | None = None
    visible: Visible | None = None

    def check(self, where: str) -> None:
        _strings(self, ("name", "title", "description"), where, "prompt")
        _common(self.meta, self.visible, where, "prompt")


@dataclass(frozen=True, slots=True)
class CompletionOptions:
    """Which argument a completion route completes: a prompt's argument, or a variable of a
    resource template (named by its URI template)."""

    argument: str
    prompt: str | None = None
    resource: str | None = None

    def check(self, where: str) -> None:
        if (self.prompt is None) == (self.resource is None):
            raise ValueError(f"{where}: mcp_completion needs exactly one of prompt= or resource=")
        _strings(self, ("argument", "prompt", "resource"), where, "completion")
        if not self.argument:
            raise ValueError(f"{where}: mcp_completion needs the name of the argument it completes")


def mcp_resource(
    uri: str,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    audience: tuple[Role, ...] | list[Role] | None = None,
    priority: float | None = None,
    last_modified: str | None = None,
    meta: Mapping[str, Any] | None = None,
    visible: Visible | None = None,
) -> Callable[[_F], _F]:
    """Mark a GET route as an MCP resource: `resources/read` of `uri` runs the route.

    Args:
        uri: the resource's URI, or an RFC 6570 template (levels 1 to 3: `notes://{note_id}`,
            `files:///{+path}`, `search://notes{?q,limit}`) whose variables are the route's
            path and query parameters, by name. A URI without variables is listed by
            `resources/list`, a template by `resources/templates/list`.
        name: defaults to the route's name (the function name).
        title, description: default to the route's summary and description (or docstring).
        mime_type: defaults to the media type of the route's response class.
        size: the size in bytes, when known in advance.
        audience, priority, last_modified: the resource's annotations.
        meta: extra `_meta` entries published with it.
        visible: a pure predicate of the caller's principal (and credentials, where it takes
            them, as `mcp_tool`'s) deciding whether lists show it.
    """
    options = ResourceOptions(
        uri,
        name,
        title,
        description,
        mime_type,
        size,
        audience,  # type: ignore[arg-type]  # a list becomes a tuple
        priority,
        last_modified,
        _copied(meta),
        visible,
    )
    options.check("mcp_resource()")
    return _marker(RESOURCE_ATTRIBUTE, options)


def mcp_prompt(
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    meta: Mapping[str, Any] | None = None,
    visible: Visible | None = None,
) -> Callable[[_F], _F]:
    """Mark a route as an MCP prompt: `prompts/get` runs it with the prompt's arguments.

    The route's path, query and body fields are the prompt's arguments (strings on the wire,
    converted by the route's own validation). It returns a `str` (one user message), a list of
    messages, or a `PromptResponse`.

    Args:
        name: defaults to the route's name (the function name).
        title, description: default to the route's summary and description (or docstring).
        meta: extra `_meta` entries published with it.
        visible: a pure predicate of the caller's principal (and credentials, where it takes
            them, as `mcp_tool`'s) deciding whether lists show it.
    """
    options = PromptOptions(name, title, description, _copied(meta), visible)
    options.check("mcp_prompt()")
    return _marker(PROMPT_ATTRIBUTE, options)


def mcp_completion(*, argument: str, prompt: str | None = None, resource: str | None = None) -> Callable[[_F], _F]:
    """Mark a route as the completion of one argument: a prompt's (`prompt=` its name) or a
    resource template's variable (`resource=` the template, as `mcp_resource` gave it).

    `completion/complete` runs the route with `value` (what the user typed so far) and the
    other arguments already given, where the route takes them by name. It returns a list of
    strings; the first 100 are sent, with the total.
    """
    options = CompletionOptions(argument, prompt, resource)
    options.check("mcp_completion()")
    return _marker(COMPLETION_ATTRIBUTE, options)


def read_resource_options(endpoint: Any, openapi_extra: Mapping[str, Any] | None, where: str) -> ResourceOptions | None:
    extra = _extra(openapi_extra, RESOURCE_EXTRA_KEY)
    if isinstance(extra, str):
        extra = {"uri": extra}
    return _read(endpoint, RESOURCE_ATTRIBUTE, RESOURCE_EXTRA_KEY, extra, ResourceOptions, where, allow_true=False)


def read_prompt_options(endpoint: Any, openapi_extra: Mapping[str, Any] | None, where: str) -> PromptOptions | None:
    extra = _extra(openapi_extra, PROMPT_EXTRA_KEY)
    return _read(endpoint, PROMPT_ATTRIBUTE, PROMPT_EXTRA_KEY, extra, PromptOptions, where, allow_true=True)


def read_completion_options(
    endpoint: Any, openapi_extra: Mapping[str, Any] | None, where: str
) -> CompletionOptions | None:
    extra = _extra(openapi_extra, COMPLETION_EXTRA_KEY)
    kind = CompletionOptions
    return _read(endpoint, COMPLETION_ATTRIBUTE, COMPLETION_EXTRA_KEY, extra, kind, where, allow_true=False)


_O = TypeVar("_O", ResourceOptions, PromptOptions, CompletionOptions)


def _read(
    endpoint: Any, attribute: str, key: str, extra: object, kind: type[_O], where: str, *, allow_true: bool
) -> _O | None:
    decorated = getattr(endpoint, attribute, None)
    if extra is None or extra is False:
        return decorated if isinstance(decorated, kind) else None
    if decorated is not None:
        raise ValueError(f"{where}: marked both by a decorator and openapi_extra[{key!r}]; keep one")
    if extra is True and allow_true:
        return kind()  # type: ignore[call-arg]  # only PromptOptions has no required field
    if not isinstance(extra, Mapping):
        wanted = "True or a mapping" if allow_true else "a mapping"
        raise ValueError(f"{where}: openapi_extra[{key!r}] must be {wanted}, got {extra!r}")
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(extra) - known)
    if unknown:
        raise ValueError(
            f"{where}: unknown option(s) {unknown!r} in openapi_extra[{key!r}]; the options are {sorted(known)!r}"
        )
    try:
        options = kind(**extra)
    except TypeError:
        raise ValueError(f"{where}: openapi_extra[{key!r}] lacks a required option, got {dict(extra)!r}") from None
    options.check(where)
    return options


def _extra(openapi_extra: Mapping[str, Any] | None, key: str) -> object:
    return (openapi_extra or {}).get(key)


def _copied(meta: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    # A copy, so later changes to the caller's mapping are not published; anything that is not
    # a mapping is left for `check` to refuse with a sentence.
    return dict(meta) if isinstance(meta, Mapping) else meta


def _marker(attribute: str, options: object) -> Callable[[_F], _F]:
    def mark(endpoint: _F) -> _F:
        setattr(endpoint, attribute, options)
        return endpoint

    return mark


def _strings(options: object, keys: tuple[str, ...], where: str, kind: str) -> None:
    for key in keys:
        value = getattr(options, key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{where}: MCP {kind} option {key!r} must be a string, got {value!r}")


def _common(meta: object, visible: object, where: str, kind: str) -> None:
    if meta is not None and not isinstance(meta, Mapping):
        raise ValueError(f"{where}: MCP {kind} option 'meta' must be a mapping, got {meta!r}")
    read_visible(visible, where, kind)
