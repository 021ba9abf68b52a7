"""URL arguments: where a tool's arguments hold URLs, found once in its `inputSchema`.

A value is a URL where its schema says `format: uri` (what pydantic's `AnyUrl` and `HttpUrl`
produce), `uri-reference`, `iri` or `iri-reference`: at the top level, or anywhere below it
through properties, array items, map values, `anyOf`/`oneOf`/`allOf`, `if`/`then`/`else` and
`$defs` references, recursive models included. The places are worked out when the tool table
is built (`url_arguments`); a call only walks its arguments along them (`UrlArguments.values`).

Alternatives are merged: where `anyOf` offers an object whose `href` is a URL and another whose
`href` is plain text, `href` is treated as a URL in both. That may refuse a value the route
would have read as text; it never lets a URL through unchecked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

URL_FORMATS: Final = frozenset({"uri", "uri-reference", "iri", "iri-reference"})
_DEFS_PREFIX: Final = "#/$defs/"
# Keywords whose subschemas describe the same value as the schema holding them.
_SAME_VALUE: Final = ("anyOf", "oneOf", "allOf")
_SAME_VALUE_ONE: Final = ("then", "else")


@dataclass(frozen=True, slots=True)
class UrlShape:
    """Where URLs sit in one value of a schema; only the parts that lead to a URL are kept."""

    is_url: bool = False
    properties: Mapping[str, UrlShape] = field(default_factory=dict)
    items: UrlShape | None = None  # every item of an array
    positions: tuple[tuple[int, UrlShape], ...] = ()  # `prefixItems`, by index
    values: UrlShape | None = None  # every value of a map under a key not in `declared`
    declared: frozenset[str] = frozenset()  # every name in `properties`, URL or not
    refs: tuple[str, ...] = ()  # `$defs` whose shapes apply to this same value


@dataclass(frozen=True, slots=True)
class UrlArguments:
    """The URL places of one tool's arguments: the arguments object's shape, and the shapes
    of the `$defs` it reaches (by name, so recursive models need no infinite tree)."""

    root: UrlShape
    defs: Mapping[str, UrlShape]

    def values(self, arguments: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
        """Each string at a URL place of `arguments`, with where it is (`links[0].href`).

        A list at a URL place counts too, item by item: a query or form parameter sends every
        item of a list, and the route reads one of them. Values of any other type are left to
        the route's own validation."""
        pending: list[tuple[Any, UrlShape, str, frozenset[str]]] = [(arguments, self.root, "", frozenset())]
        while pending:
            value, shape, where, followed = pending.pop()
            if shape.is_url:
                if isinstance(value, str):
                    yield where, value
                elif isinstance(value, list):
                    yield from ((f"{where}[{i}]", item) for i, item in enumerate(value) if isinstance(item, str))
            if isinstance(value, dict):
                for key, item in value.items():
                    inner = shape.values if key not in shape.declared else shape.properties.get(key)
                    if inner is not None:
                        pending.append((item, inner, f"{where}.{key}" if where else str(key), frozenset()))
            elif isinstance(value, list):
                if shape.items is not None:
                    pending.extend((item, shape.items, f"{where}[{i}]", frozenset()) for i, item in enumerate(value))
                for index, inner in shape.positions:
                    if index < len(value):
                        pending.append((value[index], inner, f"{where}[{index}]", frozenset()))
            # A reference applies to the same value; `followed` stops a cycle of references
            # that never descends into the value.
            for name in shape.refs:
                referenced = self.defs.get(name)
                if referenced is not None and name not in followed:
                    pending.append((value, referenced, where, followed | {name}))

    def places(self) -> tuple[str, ...]:
        """Where the URLs go, for people (`links[].href`, `extra.*`); a recursive model's
        places are named once, at their first level."""
        return tuple(sorted(set(_places(self.root, "", self.defs, frozenset()))))


def _places(shape: UrlShape, where: str, defs: Mapping[str, UrlShape], followed: frozenset[str]) -> Iterator[str]:
    if shape.is_url:
        yield where
    for name, inner in shape.properties.items():
        yield from _places(inner, f"{where}.{name}" if where else name, defs, followed)
    if shape.items is not None:
        yield from _places(shape.items, f"{where}[]", defs, followed)
    for index, inner in shape.positions:
        yield from _places(inner, f"{where}[{index}]", defs, followed)
    if shape.values is not None:
        yield from _places(shape.values, f"{where}.*", defs, followed)
    for name in shape.refs:
        if name in defs and name not in followed:
            yield from _places(defs[name], where, defs, followed | {name})


def url_arguments(input_schema: Mapping[str, Any]) -> UrlArguments | None:
    """The URL places of a tool's arguments, or `None` when it takes no URL."""
    if not _mentions_url(input_schema):
        # Most tools mention no URL: one look at the schema spares them the full walk, which
        # costs several times more at startup (timed on benchmarks/bench_app.py's 1,000 tools).
        return None
    defs = input_schema.get("$defs")
    defs = defs if isinstance(defs, Mapping) else {}
    with_urls = _defs_with_urls(defs)
    root = _shape(input_schema, with_urls)
    if root is None:
        return None
    shapes = {name: _shape(defs[name], with_urls) for name in sorted(with_urls)}
    return UrlArguments(root, {name: shape for name, shape in shapes.items() if shape is not None})


def _mentions_url(node: Any) -> bool:
    if isinstance(node, dict):
        return node.get("format") in URL_FORMATS or any(map(_mentions_url, node.values()))
    return isinstance(node, list) and any(map(_mentions_url, node))


def _defs_with_urls(defs: Mapping[str, Any]) -> frozenset[str]:
    """The `$defs` that hold a URL themselves or through the definitions they reference."""
    found = {name for name, schema in defs.items() if _shape(schema, frozenset()) is not None}
    references = {name: set(_references(schema)) & set(defs) for name, schema in defs.items()}
    grown = True
    while grown:
        reaching = {name for name, names in references.items() if name not in found and names & found}
        found |= reaching
        grown = bool(reaching)
    return frozenset(found)


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_PREFIX):
                yield value[len(_DEFS_PREFIX) :]
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)


def _shape(node: Any, with_urls: frozenset[str]) -> UrlShape | None:
    """The URL places of one schema, following only references into `with_urls`."""
    if not isinstance(node, Mapping):
        return None
    ref = node.get("$ref")
    name = ref[len(_DEFS_PREFIX) :] if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX) else None
    properties = node.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    own = UrlShape(
        is_url=node.get("format") in URL_FORMATS,
        properties=_properties(properties, with_urls),
        items=_shape(node.get("items"), with_urls),
        positions=_positions(node.get("prefixItems"), with_urls),
        values=_map_values(node, with_urls),
        refs=(name,) if name in with_urls else (),
        declared=frozenset(properties),
    )
    merged: UrlShape | None = own if _leads_to_url(own) else None
    alternatives = [sub for key in _SAME_VALUE if isinstance(node.get(key), list) for sub in node[key]]
    alternatives.extend(node.get(key) for key in _SAME_VALUE_ONE)
    for alternative in alternatives:
        merged = _merge(merged, _shape(alternative, with_urls))
    return merged


def _properties(properties: Mapping[str, Any], with_urls: frozenset[str]) -> dict[str, UrlShape]:
    shapes = {name: _shape(schema, with_urls) for name, schema in properties.items()}
    return {name: shape for name, shape in shapes.items() if shape is not None}


def _positions(prefix_items: Any, with_urls: frozenset[str]) -> tuple[tuple[int, UrlShape], ...]:
    if not isinstance(prefix_items, list):
        return ()
    shapes = [(index, _shape(schema, with_urls)) for index, schema in enumerate(prefix_items)]
    return tuple((index, shape) for index, shape in shapes if shape is not None)


def _map_values(node: Mapping[str, Any], with_urls: frozenset[str]) -> UrlShape | None:
    # `patternProperties` apply to the keys matching them: to every key here, which may check
    # more than the schema asks, never less.
    patterns = node.get("patternProperties")
    schemas = [node.get("additionalProperties"), *(patterns.values() if isinstance(patterns, Mapping) else ())]
    merged: UrlShape | None = None
    for schema in schemas:
        merged = _merge(merged, _shape(schema, with_urls))
    return merged


def _leads_to_url(shape: UrlShape) -> bool:
    return bool(shape.is_url or shape.properties or shape.items or shape.positions or shape.values or shape.refs)


def _merge(a: UrlShape | None, b: UrlShape | None) -> UrlShape | None:
    """One shape for a value that may match either schema: a URL place in either is one here."""
    if a is None or b is None:
        return a or b
    properties = dict(a.properties)
    for name, shape in b.properties.items():
        properties[name] = _merge(properties.get(name), shape) or shape
    positions = dict(a.positions)
    for index, shape in b.positions:
        positions[index] = _merge(positions.get(index), shape) or shape
    return UrlShape(
        is_url=a.is_url or b.is_url,
        properties=properties,
        items=_merge(a.items, b.items),
        positions=tuple(sorted(positions.items())),
        values=_merge(a.values, b.values),
        refs=tuple(dict.fromkeys((*a.refs, *b.refs))),
        # A key is exempt from `values` only if every alternative declares it: the value may
        # match the one that does not.
        declared=a.declared & b.declared,
    )
