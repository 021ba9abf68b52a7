"""Models written out where they are used, so that a tool's schemas need no `$defs`.

Agents' frameworks turn a tool's `inputSchema` into their model's tool definition, and the strict
ones refuse what they cannot check: the strict converter of openai-agents (OpenAI's strict tool
calls) refuses a node that is only `{"$ref": ...}`, so a tool that took a list of models fell
back to non-strict. Each model is therefore written out in place, once per discovery. A model
that contains itself, directly or through others, cannot be: it stays in `$defs`, and so do the
references to it.

Deliberate choices:
- Only models are written out: the app's component schemas, a streamed item's models. `$defs`
  that a hand-written schema brings itself stay as written, with the references to them (a
  tool's schema keeps the keywords its author wrote, SEP-1613; the conformance suite checks it).
- A reference's own keywords stay beside the model's. A description, title or default given
  where the model is used wins over the model's own; where both hold the same validation
  keyword, the model goes under `allOf`, so that both still apply.
- A discriminator's `mapping` names its variants by reference. A variant that was written out is
  named by a JSON pointer to where it now is (`#/properties/pet/oneOf/0`); a model a mapping
  names that is not one of the discriminator's own variants stays in `$defs`.
- Writing a model out in every place that uses it can multiply a schema's size. A schema that
  would grow past `INLINED_SCHEMA_LIMIT` (or past its own size with `$defs`, when that is more)
  keeps its `$defs`, and discovery warns naming the tool; the work stops as soon as the bound
  is passed, so a model shared a million times over costs no more than the bound.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any, Final
from urllib.parse import quote

from fastapi_mcp_routes.wire.json import dumps

# Bytes of JSON. A tool's schemas travel in every `tools/list` and in the model's context; 64 KiB
# is room for hundreds of fields (the example app's largest inlined schema is about 2 KiB).
INLINED_SCHEMA_LIMIT: Final = 64 * 1024
DEFS_PREFIX: Final = "#/$defs/"
# Keywords that only describe a value: given where a model is used, they replace the model's own.
_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly", "$comment"}
)
# Keywords whose values are instances, not schemas: copied as they are, never read as references.
_VALUES: Final = frozenset({"const", "enum", "default", "examples"})
# Keywords whose values map names to schemas: a name there is never a keyword.
_NAMED_SCHEMAS: Final = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})
_UNIONS: Final = ("oneOf", "anyOf")
# What a JSON pointer may hold as is in a URI fragment (RFC 3986 section 3.5, with `/` for the pointer).
_FRAGMENT_SAFE: Final = "/!$&'()*+,;=:@"


class _TooLarge(Exception):
    """The schema written out passed its bound; raised to stop the work at once."""


def inline_models(
    schema: Mapping[str, Any], models: Collection[str], limit: int = INLINED_SCHEMA_LIMIT
) -> dict[str, Any] | None:
    """`schema` with each of `models` (names in its root `$defs`) written out where it is
    referenced, but for recursive ones; None when that would make it more than `limit` bytes of
    JSON and more than it is now."""
    definitions = schema.get("$defs")
    if not isinstance(definitions, Mapping):
        return dict(schema)
    graph = {name: set(_referenced(definition)) for name, definition in definitions.items()}
    inlined = {name for name in models if name in definitions} - _recursive(graph) - _pinned(schema)
    if not inlined:
        return dict(schema)
    bound = max(limit, len(dumps(schema)))
    writer = _SchemaWriter(definitions, inlined, bound)
    try:
        written: dict[str, Any] = writer.schema({k: v for k, v in schema.items() if k != "$defs"}, "")
        kept = {
            name: writer.schema(definition, f"/$defs/{_escape(name)}")
            for name, definition in definitions.items()
            if name not in inlined
        }
    except _TooLarge:
        return None
    if kept:
        written["$defs"] = kept
    return written if len(dumps(written)) <= bound else None


class _SchemaWriter:
    """Copies a schema, writing the inlined models out at their references, within a budget of
    bytes: counted short rather than long, so the budget never stops a schema that fits, and the
    caller measures the result exactly."""

    def __init__(self, definitions: Mapping[str, Any], inlined: set[str], bound: int) -> None:
        self._definitions = definitions
        self._inlined = inlined
        self._left = bound

    def schema(self, node: Any, path: str) -> Any:
        if not isinstance(node, Mapping):
            return self._other(node, path)
        name = self._inlined_name(node.get("$ref"))
        if name is not None:
            return self.schema(_merged(self._definitions[name], node), path)
        copied: dict[str, Any] = {}
        for key, value in self._items(node):
            where = f"{path}/{_escape(key)}"
            if key in _VALUES:
                copied[key] = self._value(value)
            elif key in _NAMED_SCHEMAS and isinstance(value, Mapping):
                copied[key] = {name: self.schema(sub, f"{where}/{_escape(name)}") for name, sub in self._items(value)}
            elif key == "discriminator" and isinstance(value, Mapping):
                copied[key] = self._discriminator(value, node, path)
            else:
                copied[key] = self._other(value, where)
        return copied

    def _other(self, node: Any, path: str) -> Any:
        """A keyword's value that may hold schemas: a schema, a list of them, or a scalar."""
        if isinstance(node, Mapping):
            return self.schema(node, path)
        if isinstance(node, list):
            return [self._other(item, f"{path}/{index}") for index, item in self._entries(node)]
        return self._value(node)

    def _value(self, value: Any) -> Any:
        """An instance, copied as it is."""
        if isinstance(value, Mapping):
            return {key: self._value(item) for key, item in self._items(value)}
        if isinstance(value, list):
            return [self._value(item) for _, item in self._entries(value)]
        self._spend(len(value) + 2 if isinstance(value, str) else len(str(value)))
        return value

    # What is spent is the compact JSON's length, a bracket and then each entry with its comma
    # (the last one's pays the closing bracket): exact for ASCII text, short for the rest.
    def _items(self, mapping: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
        self._spend(1)
        for key, value in mapping.items():
            self._spend(len(key) + 4)  # the key, its quotes, the colon and a comma
            yield key, value

    def _entries(self, items: list[Any]) -> Iterator[tuple[int, Any]]:
        self._spend(1)
        for index, item in enumerate(items):
            self._spend(1)
            yield index, item

    def _discriminator(self, discriminator: Mapping[str, Any], node: Mapping[str, Any], path: str) -> dict[str, Any]:
        copied: dict[str, Any] = self._value(discriminator)
        mapping = discriminator.get("mapping")
        if not isinstance(mapping, Mapping):
            return copied
        spots = _variant_spots(node)
        copied["mapping"] = {
            tag: f"#{quote(path + spots[target], safe=_FRAGMENT_SAFE)}" if self._inlined_name(target) else target
            for tag, target in mapping.items()
        }
        return copied

    def _inlined_name(self, ref: Any) -> str | None:
        name = _name(ref)
        return name if name in self._inlined else None

    def _spend(self, size: int) -> None:
        self._left -= size
        if self._left < 0:
            raise _TooLarge


def _merged(definition: Any, reference: Mapping[str, Any]) -> Any:
    """The model a reference names, with the reference's own keywords."""
    own = {key: value for key, value in reference.items() if key != "$ref"}
    if not own:
        return definition
    if isinstance(definition, Mapping) and not (own.keys() & definition.keys()) - _ANNOTATIONS:
        return {**definition, **own}
    return {"allOf": [definition], **own}


def _name(ref: Any) -> str | None:
    """The `$defs` entry a reference names as a whole; None for anything else."""
    if not isinstance(ref, str) or not ref.startswith(DEFS_PREFIX):
        return None
    token = ref[len(DEFS_PREFIX) :]
    if "/" in token:
        return None  # a place inside a definition
    return token.replace("~1", "/").replace("~0", "~")


def _escape(token: str) -> str:
    """A JSON pointer's reference token (RFC 6901 section 3)."""
    return token.replace("~", "~0").replace("/", "~1")


def _referenced(node: Any) -> Iterator[str]:
    """The `$defs` entries a schema refers to: by `$ref`, by a discriminator's mapping, or at a
    place inside them. Read everywhere, instances too: a name too many only keeps a model."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(DEFS_PREFIX):
                yield _entry(value)
            elif key == "mapping" and isinstance(value, Mapping):
                yield from (_entry(v) for v in value.values() if isinstance(v, str) and v.startswith(DEFS_PREFIX))
            else:
                yield from _referenced(value)
    elif isinstance(node, list):
        for item in node:
            yield from _referenced(item)


def _entry(ref: str) -> str:
    token = ref[len(DEFS_PREFIX) :].split("/", 1)[0]
    return token.replace("~1", "/").replace("~0", "~")


def _recursive(graph: Mapping[str, set[str]]) -> set[str]:
    """The names that reach themselves through their references."""
    recursive = set()
    for name in graph:
        seen: set[str] = set()
        pending = list(graph[name])
        while pending:
            current = pending.pop()
            if current == name:
                recursive.add(name)
                break
            if current not in seen:
                seen.add(current)
                pending.extend(graph.get(current, ()))
    return recursive


def _pinned(schema: Mapping[str, Any]) -> set[str]:
    """Models that must stay in `$defs` to keep a reference valid: one referred to at a place
    inside it, or named by a discriminator's mapping without being one of its variants."""
    pinned: set[str] = set()
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
            continue
        if not isinstance(node, Mapping):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(DEFS_PREFIX) and _name(ref) is None:
            pinned.add(_entry(ref))
        discriminator = node.get("discriminator")
        mapping = discriminator.get("mapping") if isinstance(discriminator, Mapping) else None
        if isinstance(mapping, Mapping):
            variants = _variant_spots(node)
            pinned.update(_entry(t) for t in mapping.values() if isinstance(t, str) and _name(t) and t not in variants)
        pending.extend(node.values())
    return pinned


def _variant_spots(node: Mapping[str, Any]) -> dict[str, str]:
    """Each reference among a schema's `oneOf`/`anyOf` variants, with the variant's pointer
    relative to the schema (the first, where a reference is listed twice)."""
    spots: dict[str, str] = {}
    for union in _UNIONS:
        variants = node.get(union)
        if isinstance(variants, list):
            for index, variant in enumerate(variants):
                if isinstance(variant, Mapping) and isinstance(variant.get("$ref"), str):
                    spots.setdefault(variant["$ref"], f"/{union}/{index}")
    return spots
