"""Resources, resource templates, prompts and completions: which routes serve them, as discovered.

The registry (tools/registry.py) finds the marked routes and their OpenAPI operations in one pass
for every feature; this module turns the resource, prompt and completion marks into a frozen
`Catalog`, checking at startup everything a misdeclared route would otherwise fail on at call
time: a template variable that names no parameter of the route, a required parameter the URI
cannot fill, a completion for an argument nothing has.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from starlette.routing import compile_path

from fastapi_mcp_routes.tools.access import Access, access_of
from fastapi_mcp_routes.tools.catalog.marks import CompletionOptions, PromptOptions, ResourceOptions
from fastapi_mcp_routes.tools.catalog.uri_template import UriTemplate
from fastapi_mcp_routes.tools.paging import pages
from fastapi_mcp_routes.tools.recipe import Tool, route_description
from fastapi_mcp_routes.tools.schema import BodyMode
from fastapi_mcp_routes.tools.scopes import with_scopes
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import ToolError
from fastapi_mcp_routes.wire.json import RawJSON

_NAME: Final = re.compile(c.TOOL_NAME_PATTERN)  # prompt names follow the tool names' rule
# The argument a completion route receives the typed text in.
COMPLETION_VALUE: Final = "value"
PROMPT_REF: Final = "ref/prompt"
RESOURCE_REF: Final = "ref/resource"
Kind = Literal["resource", "prompt", "completion"]


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource (a URI without variables) or a resource template, and the route that reads it."""

    template: UriTemplate
    call: Tool
    definition: Mapping[str, Any]  # the resources/list or resources/templates/list entry
    access: Access | None
    choices: Mapping[str, tuple[str, ...]]  # a variable's allowed values (enum, Literal)
    # The route's path, when every variable is a path parameter: a write to it names a URI.
    path: re.Pattern[str] | None

    def arguments(self, values: Mapping[str, str]) -> dict[str, str]:
        """The route's arguments for these variable values; `ToolError` for a value that could
        reach another path than the template means: a control character, a `.` or `..`
        segment, an absolute or empty path, or a "/" (sent percent-encoded) in a variable the
        template makes one segment (any but `{+path}` and `{#path}`), though the route's
        parameter is a `{name:path}`. Any other "/" is refused in invoke.py."""
        for name, value in values.items():
            if any(ord(character) < 0x20 or ord(character) == 0x7F for character in value):
                raise ToolError(f"The value of {name!r} holds a control character.")
            if name in self.call.slash_params:
                if "/" in value and not self.template.variable(name).reserved:
                    raise ToolError(f"The value of {name!r} must be one path segment, without '/'.")
                segments = value.split("/")
                if value.startswith("/") or any(segment in ("", ".", "..") for segment in segments):
                    raise ToolError(f"The value of {name!r} must be a relative path without empty, '.' or '..' parts.")
            elif value in (".", ".."):
                raise ToolError(f"The value of {name!r} cannot be {value!r}.")
        return dict(values)


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt, and the route that renders it."""

    name: str
    call: Tool
    definition: Mapping[str, Any]
    access: Access | None
    choices: Mapping[str, tuple[str, ...]]  # an argument's allowed values (enum, Literal)


@dataclass(frozen=True, slots=True)
class FeatureMark:
    """A route marked as a resource, a prompt or a completion, with its call recipe."""

    kind: Kind
    route: Any
    options: ResourceOptions | PromptOptions | CompletionOptions
    call: Tool
    where: str


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every resource, template, prompt and completion of one state of the route table."""

    resources: Mapping[str, Resource]  # by URI
    templates: tuple[Resource, ...]  # in the order the app declares them: the first match reads
    prompts: Mapping[str, Prompt]
    completions: Mapping[tuple[str, str, str], Tool]  # (ref type, prompt name or template, argument)
    resource_pages: tuple[RawJSON, ...]
    template_pages: tuple[RawJSON, ...]
    prompt_pages: tuple[RawJSON, ...]
    restricted: bool  # something is not listed for every caller

    @property
    def completes(self) -> bool:
        """Whether any argument can be completed (the `completions` capability)."""
        return (
            bool(self.completions)
            or any(p.choices for p in self.prompts.values())
            or any(t.choices for t in self.templates)
        )

    def resource(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource `uri` names and its variables' values: an exact URI first, then the
        templates in order."""
        exact = self.resources.get(uri)
        if exact is not None:
            return exact, {}
        for template in self.templates:
            values = template.template.match(uri)
            if values is not None:
                return template, values
        return None

    def written(self, path: str) -> list[str]:
        """The URIs a write to `path` changes: those of the resources read from that path."""
        uris = []
        for entry in (*self.resources.values(), *self.templates):
            found = entry.path.fullmatch(path) if entry.path is not None else None
            if found is not None:
                uri = entry.template.expand(found.groupdict())
                if uri not in uris:
                    uris.append(uri)
        return uris


def build_catalog(marks: Iterable[FeatureMark], page_size: int) -> Catalog:
    """The catalog of these marks; `ValueError` naming the route for a misdeclared one."""
    marks = list(marks)
    resources: dict[str, Resource] = {}
    templates: list[Resource] = []
    prompts: dict[str, Prompt] = {}
    for mark in marks:
        if isinstance(mark.options, ResourceOptions):
            entry = _resource(mark, mark.options)
            text = entry.template.text
            if text in resources or any(t.template.text == text for t in templates):
                raise ValueError(f"{mark.where}: another route already serves the resource {text!r}")
            if entry.template.variables:
                templates.append(entry)
            else:
                resources[text] = entry
        elif isinstance(mark.options, PromptOptions):
            prompt = _prompt(mark, mark.options)
            if prompt.name in prompts:
                raise ValueError(f"{mark.where}: another route already serves the prompt {prompt.name!r}")
            prompts[prompt.name] = prompt
    completions: dict[tuple[str, str, str], Tool] = {}
    for mark in marks:
        if isinstance(mark.options, CompletionOptions):
            key = _completion_key(mark, mark.options, prompts, templates)
            if key in completions:
                raise ValueError(f"{mark.where}: another route already completes {key[2]!r} of {key[1]!r}")
            completions[key] = mark.call
    listed = sorted(resources.values(), key=lambda entry: entry.template.text)
    return Catalog(
        resources=resources,
        templates=tuple(templates),
        prompts=dict(sorted(prompts.items())),
        completions=completions,
        resource_pages=pages("resources", [entry.definition for entry in listed], page_size),
        template_pages=pages("resourceTemplates", [entry.definition for entry in templates], page_size),
        prompt_pages=pages("prompts", [prompt.definition for prompt in sorted(prompts.values(), key=_name)], page_size),
        restricted=any(r.access is not None for r in (*resources.values(), *templates))
        or any(p.access is not None for p in prompts.values()),
    )


def _name(prompt: Prompt) -> str:
    return prompt.name


def _resource(mark: FeatureMark, options: ResourceOptions) -> Resource:
    route, call, where = mark.route, mark.call, mark.where
    if call.method != "GET":
        raise ValueError(f"{where}: only GET routes can be MCP resources (a read must change nothing)")
    template = options.check(where)
    arguments = call.schema.arguments
    for name in template.variables:
        argument = arguments.get(name)
        if argument is None or argument.location not in ("path", "query"):
            params = sorted(n for n, a in arguments.items() if a.location in ("path", "query")) or "none"
            raise ValueError(
                f"{where}: the variable {name!r} of {template.text!r} names no path or query parameter "
                f"of the route (its parameters: {params})"
            )
    unfilled = sorted(call.required - set(template.variables))
    if unfilled:
        headers = [name for name in unfilled if arguments[name].location == "header"]
        hint = (
            f"; a header the caller sends reaches the route when forward_headers names it ({headers})"
            if headers
            else ""
        )
        raise ValueError(
            f"{where}: the URI {template.text!r} cannot fill the route's required parameter(s) {unfilled}{hint}"
        )
    definition: dict[str, Any] = {"uriTemplate" if template.variables else "uri": template.text}
    definition["name"] = options.name or route.name
    _describe(definition, route, options.title, options.description)
    mime_type = options.mime_type or _media_type(route)
    if mime_type:
        definition["mimeType"] = mime_type
    if options.size is not None and not template.variables:
        definition["size"] = options.size
    annotations: dict[str, Any] = {}
    if options.audience is not None:
        annotations["audience"] = list(options.audience)
    if options.priority is not None:
        annotations["priority"] = options.priority
    if options.last_modified is not None:
        annotations["lastModified"] = options.last_modified
    if annotations:
        definition["annotations"] = annotations
    if options.meta:
        definition["_meta"] = dict(options.meta)
    with_scopes(definition, call.scopes)
    path_variables = all(arguments[name].location == "path" for name in template.variables)
    access = access_of(route, options.visible)
    return Resource(
        template,
        dataclasses.replace(call, access=access),  # its guards are asked before a subscription
        definition,
        access,
        _choices(call, template.variables),
        compile_path(route.path)[0] if path_variables else None,
    )


def _prompt(mark: FeatureMark, options: PromptOptions) -> Prompt:
    route, call, where = mark.route, mark.call, mark.where
    name = options.name or route.name
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"{where}: the prompt name {name!r} must be 1-128 characters of letters, digits, '_', '-', '.'"
        )
    if call.schema.body_mode is BodyMode.WHOLE:
        raise ValueError(
            f"{where}: a prompt's arguments are strings, so its route's body must be an object whose fields "
            "are the arguments: not a list or a single value, nor an object with a field named like one of "
            "its path or query parameters"
        )
    definition: dict[str, Any] = {"name": name}
    _describe(definition, route, options.title, options.description)
    properties: Mapping[str, Any] = call.schema.input_schema["properties"]
    arguments = []
    for argument, schema in properties.items():
        entry: dict[str, Any] = {"name": argument}
        if isinstance(schema, Mapping) and isinstance(schema.get("title"), str):
            entry["title"] = schema["title"]
        if isinstance(schema, Mapping) and isinstance(schema.get("description"), str):
            entry["description"] = schema["description"]
        entry["required"] = argument in call.required
        arguments.append(entry)
    if arguments:
        definition["arguments"] = arguments
    if options.meta:
        definition["_meta"] = dict(options.meta)
    with_scopes(definition, call.scopes)
    return Prompt(name, call, definition, access_of(route, options.visible), _choices(call, tuple(properties)))


def _completion_key(
    mark: FeatureMark, options: CompletionOptions, prompts: Mapping[str, Prompt], templates: list[Resource]
) -> tuple[str, str, str]:
    where, argument = mark.where, options.argument
    if COMPLETION_VALUE not in mark.call.schema.arguments:
        raise ValueError(f"{where}: a completion route takes the typed text as a parameter named {COMPLETION_VALUE!r}")
    if options.prompt is not None:
        prompt = prompts.get(options.prompt)
        if prompt is None:
            raise ValueError(f"{where}: mcp_completion names the prompt {options.prompt!r}, which no route serves")
        if argument not in prompt.call.schema.arguments:
            raise ValueError(f"{where}: the prompt {options.prompt!r} has no argument {argument!r}")
        return PROMPT_REF, options.prompt, argument
    resource = next((t for t in templates if t.template.text == options.resource), None)
    if resource is None:
        raise ValueError(
            f"{where}: mcp_completion names the resource template {options.resource!r}, which no route serves"
        )
    if argument not in resource.template.variables:
        raise ValueError(f"{where}: the resource template {options.resource!r} has no variable {argument!r}")
    return RESOURCE_REF, resource.template.text, argument


def _describe(definition: dict[str, Any], route: Any, title: str | None, description: str | None) -> None:
    title = title or route.summary
    if title:
        definition["title"] = title
    described = route_description(route, description)
    if described:
        definition["description"] = described


def _media_type(route: Any) -> str | None:
    response_class = getattr(route.response_class, "value", route.response_class)  # FastAPI's default wrapper
    media_type = getattr(response_class, "media_type", None)
    return media_type if isinstance(media_type, str) else None


def _choices(call: Tool, names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The allowed values of these arguments, where the schema lists them (an enum, a Literal)."""
    schema = call.schema.input_schema
    choices = {}
    for name in names:
        values = _enum(schema["properties"].get(name), schema.get("$defs", {}))
        if values:
            choices[name] = values
    return choices


def _enum(node: Any, definitions: Mapping[str, Any]) -> tuple[str, ...]:
    if not isinstance(node, Mapping):
        return ()
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        return _enum(definitions.get(reference.removeprefix("#/$defs/")), definitions)
    if isinstance(node.get("enum"), list):
        return tuple(str(value) for value in node["enum"] if value is not None)
    if "const" in node and node["const"] is not None:
        return (str(node["const"]),)
    for option in node.get("anyOf", ()):
        values = _enum(option, definitions)
        if values:
            return values
    return ()


EMPTY_CATALOG: Final = build_catalog((), 1)
