"""Tool schemas from a route's OpenAPI operation: `inputSchema`, `outputSchema`, argument places.

The route's OpenAPI operation is FastAPI's public description of what the route takes and
returns, so a tool's schema is exactly what the REST docs promise. Component references
(`#/components/schemas/X`) become `#/$defs/X`, carrying every definition they reach; then each
model is written out where it is used, but for recursive ones, which stay in `$defs`
(tools/inline.py: strict clients refuse a bare reference).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from fastapi_mcp_routes.tools.inline import DEFS_PREFIX, inline_models
from fastapi_mcp_routes.wire import constants as c

_COMPONENT_PREFIX: Final = "#/components/schemas/"
# The property that holds the whole request body when its fields cannot sit at the top level.
BODY_ARGUMENT: Final = "body"

Location = Literal["path", "query", "header", "cookie", "body"]


class BodyMode(enum.Enum):
    NONE = "none"  # the route takes no body
    FIELDS = "fields"  # the body object's properties are top-level arguments
    WHOLE = "whole"  # the body is the single argument named `body`


@dataclass(frozen=True, slots=True)
class Argument:
    """Where one tool argument goes in the HTTP request."""

    location: Location
    wire_name: str


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What a tool takes and returns, read from its route's OpenAPI operation."""

    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    output_wrapped: bool
    arguments: Mapping[str, Argument]
    body_mode: BodyMode
    body_media_type: str | None
    # The schemas ("inputSchema", "outputSchema") whose models stay in `$defs` because written
    # out in place they would be too large (tools/inline.py); discovery warns of each.
    oversized: tuple[str, ...] = ()


# Component schemas rewritten to `$defs` form, with the names they reference, by name. One per
# table build: tools share models, and rewriting each once keeps discovery of 1,000 routes fast.
Definitions = dict[str, tuple[Any, tuple[str, ...]]]


def build_tool_schema(
    operation: Mapping[str, Any],
    components: Mapping[str, Any],
    caller_headers: frozenset[str],
    where: str,
    definitions: Definitions | None = None,
) -> ToolSchema:
    """Build a tool's schemas and argument places from one OpenAPI operation."""
    definitions = {} if definitions is None else definitions
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: dict[str, Argument] = {}
    for parameter in operation.get("parameters", ()):
        location = parameter["in"]
        wire_name = parameter["name"]
        if location == "cookie" or (location == "header" and wire_name.lower() in caller_headers):
            # Credentials (the whole Cookie header among them) and the headers that describe the
            # caller's request come from that request, never from the model.
            continue
        if wire_name in arguments:
            raise ValueError(
                f"{where}: two parameters are named {wire_name!r} ({arguments[wire_name].location} and "
                f"{location}); give one of them another alias"
            )
        properties[wire_name] = _parameter_schema(parameter)
        arguments[wire_name] = Argument(location, wire_name)
        if parameter.get("required"):
            required.append(wire_name)

    body_mode, media_type = BodyMode.NONE, None
    keywords: dict[str, Any] = {}  # the body schema's own keywords, kept when its fields move up
    request_body = operation.get("requestBody")
    if request_body:
        media_type, body_schema = next(iter(request_body["content"].items()))
        body_schema = body_schema.get("schema", {})
        body_required = bool(request_body.get("required"))
        if media_type not in (c.MEDIA_JSON, c.MEDIA_FORM, c.MEDIA_MULTIPART):
            raise ValueError(f"{where}: a request body of type {media_type!r} cannot be a tool argument")
        _refuse_file_fields(body_schema, components, where)
        fields = _flattenable_fields(body_schema, components, set(properties), body_required)
        if fields is not None:
            body_mode = BodyMode.FIELDS
            field_properties, field_required = fields
            if not properties:
                # The body's own keywords constrain its fields; they can describe the whole
                # input only when nothing else is in it.
                keywords = _schema_keywords(_resolve(body_schema, components), components, where)
            properties.update(field_properties)
            required.extend(field_required)
            arguments.update((name, Argument("body", name)) for name in field_properties)
        elif BODY_ARGUMENT in properties:
            raise ValueError(
                f"{where}: the request body cannot be a tool argument because a parameter is "
                f"already named {BODY_ARGUMENT!r}"
            )
        else:
            body_mode = BodyMode.WHOLE
            properties[BODY_ARGUMENT] = body_schema
            arguments[BODY_ARGUMENT] = Argument("body", BODY_ARGUMENT)
            if body_required:
                required.append(BODY_ARGUMENT)

    # `required` even when empty: pydantic-ai sends a tool to OpenAI as strict only when its
    # schema lists every property there, and an absent list is not an empty one to it.
    input_schema: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    input_schema["additionalProperties"] = False
    # A hand-written body schema (openapi_extra) may use all of JSON Schema 2020-12: its
    # $schema, $defs, allOf/anyOf and if/then/else stay with the fields they constrain.
    input_schema, inlined = _with_models({**keywords, **input_schema}, components, definitions)
    output_schema, wrapped, output_inlined = _output_schema(operation, components, definitions)
    oversized = tuple(which for which, ok in (("inputSchema", inlined), ("outputSchema", output_inlined)) if not ok)
    return ToolSchema(input_schema, output_schema, wrapped, arguments, body_mode, media_type, oversized)


def _parameter_schema(parameter: Mapping[str, Any]) -> dict[str, Any]:
    schema = dict(parameter.get("schema", {}))
    if "description" in parameter:
        schema.setdefault("description", parameter["description"])
    if "example" in parameter:
        schema.setdefault("examples", [parameter["example"]])
    elif isinstance(parameter.get("examples"), Mapping):
        # An OpenAPI examples map of Example Objects; JSON Schema wants a list of values.
        values = [e["value"] for e in parameter["examples"].values() if "value" in e]
        if values:
            schema.setdefault("examples", values)
    if parameter.get("deprecated"):
        schema["deprecated"] = True
    return schema


def _resolve(schema: Mapping[str, Any], components: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_COMPONENT_PREFIX):
        resolved: Mapping[str, Any] = components[ref[len(_COMPONENT_PREFIX) :]]
        return resolved
    return schema


def _flattenable_fields(
    body_schema: Mapping[str, Any],
    components: Mapping[str, Any],
    taken: set[str],
    body_required: bool,
) -> tuple[dict[str, Any], list[str]] | None:
    """The body's properties and required names when they can be top-level arguments."""
    resolved = _resolve(body_schema, components)
    properties = resolved.get("properties")
    if resolved.get("type") != "object" or not isinstance(properties, Mapping) or not properties:
        return None
    if resolved.get("additionalProperties") not in (None, False) or not body_required:
        return None  # a free-form or optional body keeps its own shape under `body`
    if taken.intersection(properties) or BODY_ARGUMENT in taken:
        return None
    return dict(properties), list(resolved.get("required", ()))


# Keywords of a body schema that describe the fields, which the input schema states itself.
_FIELD_KEYWORDS: Final = frozenset({"type", "properties", "required", "additionalProperties", "title"})


def _schema_keywords(schema: Mapping[str, Any], components: Mapping[str, Any], where: str) -> dict[str, Any]:
    clashes = sorted(set(schema.get("$defs", {})) & set(components))
    if clashes:
        raise ValueError(f"{where}: the body schema's $defs {clashes!r} clash with the app's model names")
    return {key: value for key, value in schema.items() if key not in _FIELD_KEYWORDS}


def _refuse_file_fields(schema: Mapping[str, Any], components: Mapping[str, Any], where: str) -> None:
    resolved = _resolve(schema, components)
    for name, field in resolved.get("properties", {}).items():
        options = [field, *field.get("anyOf", ()), field.get("items", {})]
        if any(o.get("format") == "binary" or "contentMediaType" in o for o in options):
            raise ValueError(f"{where}: the file upload field {name!r} cannot be a tool argument")


def _output_schema(
    operation: Mapping[str, Any], components: Mapping[str, Any], definitions: Definitions
) -> tuple[dict[str, Any] | None, bool, bool]:
    """The output schema, whether the result is wrapped under `result`, and whether its models
    were written out."""
    schema = _success_json_schema(operation.get("responses", {}))
    if not schema:
        return None, False, True
    resolved = _resolve(schema, components)
    wrapped = resolved.get("type") != "object"
    if wrapped:
        resolved = {"type": "object", "properties": {"result": dict(schema)}, "required": ["result"]}
    output, inlined = _with_models(dict(resolved), components, definitions)
    return output, wrapped, inlined


def _success_json_schema(responses: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for status in sorted(responses):
        if status.startswith("2"):
            content = responses[status].get("content", {})
            media = content.get(c.MEDIA_JSON)
            return media.get("schema") if media else None
    return None


def _with_models(
    schema: dict[str, Any], components: Mapping[str, Any], definitions: Definitions
) -> tuple[dict[str, Any], bool]:
    """The schema with the models it references: written out where each is used, or, where that
    would make it too large, in `$defs`; and whether they were written out."""
    with_defs, models = _with_defs(schema, components, definitions)
    inlined = inline_models(with_defs, models)
    return (with_defs, False) if inlined is None else (inlined, True)


def _with_defs(
    schema: dict[str, Any], components: Mapping[str, Any], definitions: Definitions
) -> tuple[dict[str, Any], frozenset[str]]:
    """Rewrite component references to `$defs` and attach every definition they reach; the
    names of those definitions (the models, not the `$defs` the schema brings itself)."""
    rewritten: dict[str, Any] = _rewrite_refs(schema)
    own = rewritten.get("$defs", {})  # definitions the schema brings itself, not components
    pending = [name for name in _referenced_names(rewritten) if name not in own]
    defs: dict[str, Any] = dict(own)
    models: set[str] = set()
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        if name not in definitions:
            definition = _rewrite_refs(components[name])
            definitions[name] = (definition, tuple(_referenced_names(definition)))
        defs[name], references = definitions[name]
        models.add(name)
        pending.extend(n for n in references if n not in own)
    if defs:
        rewritten["$defs"] = {name: defs[name] for name in sorted(defs)}
    return rewritten, frozenset(models)


def _rewrite_refs(node: Any, in_mapping: bool = False) -> Any:
    if in_mapping and isinstance(node, Mapping):  # a discriminator's mapping holds bare refs
        return {
            key: DEFS_PREFIX + value[len(_COMPONENT_PREFIX) :] if str(value).startswith(_COMPONENT_PREFIX) else value
            for key, value in node.items()
        }
    if isinstance(node, Mapping):
        return {
            key: (
                DEFS_PREFIX + value[len(_COMPONENT_PREFIX) :]
                if key == "$ref" and isinstance(value, str) and value.startswith(_COMPONENT_PREFIX)
                else _rewrite_refs(value, in_mapping=key == "mapping")
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_rewrite_refs(item) for item in node]
    return node


def _referenced_names(node: Any) -> Iterable[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(DEFS_PREFIX):
                yield value[len(DEFS_PREFIX) :]
            elif key == "mapping" and isinstance(value, Mapping):  # a discriminator's mapping
                yield from (v[len(DEFS_PREFIX) :] for v in value.values() if str(v).startswith(DEFS_PREFIX))
            else:
                yield from _referenced_names(value)
    elif isinstance(node, list):
        for item in node:
            yield from _referenced_names(item)
