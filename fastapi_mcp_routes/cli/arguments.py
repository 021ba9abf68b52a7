"""What `call` takes from its command line: the tool's arguments (`key=value` pairs and
`--json-args`) and the caller's headers (`--header 'Name: value'`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi_mcp_routes.cli.errors import CliError
from fastapi_mcp_routes.wire import constants as c

_DEFINITIONS_REF: Final = "#/$defs/"
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 token
_HEADER_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # RFC 9110 field-value octets
_SHOWN_CHARS: Final = 16  # of a value named in a refusal: it may be megabytes
# Deeper JSON is refused before it is parsed: Python's own limit moves between releases (3.13's
# parser reads nesting that 3.12's stops at), and no peer reads such a value anyway.
_MAX_JSON_DEPTH: Final = 512  # the endpoint takes at most 128 (Limits.max_argument_depth)
_JSON_TOKEN: Final = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[{]|[\]}]')


class _Unsendable(ValueError):
    """JSON that parses, but that the command cannot send as it reads: a number beyond a 64-bit
    float (Python reads 1e999 as infinity, which JSON has not), or nesting deeper than the
    parser goes."""


def tool_arguments(pairs: Sequence[str], json_args: str | None, input_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The call's arguments: `--json-args` (a JSON object), then each `key=value` on top. A value
    is JSON where it parses as JSON (`1`, `true`, `["a"]`), else text; for an argument the tool
    declares as a string it is always the text as typed (`title=2024` is "2024")."""
    arguments = _json_object(json_args) if json_args is not None else {}
    properties = input_schema.get("properties", {})
    definitions = input_schema.get("$defs", {})
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise CliError(f"An argument must be key=value (say note_id=1, or title=Groceries); got {pair!r}.")
        if _is_text(properties.get(key), definitions):
            arguments[key] = value
            continue
        try:
            arguments[key] = _json_or_text(value)
        except _Unsendable as exc:
            raise CliError(f"{key}={_shown(value)} cannot be sent: {exc}.") from None
    return arguments


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = _loads(text)
    except _Unsendable as exc:
        raise CliError(f"--json-args cannot be sent: {exc}.") from None
    except ValueError as exc:
        raise CliError(f"--json-args is not valid JSON ({exc}); got {_shown(text)!r}.") from None
    if not isinstance(value, dict):
        raise CliError(f"--json-args must be a JSON object of arguments, got {type(value).__name__} {text!r}.")
    return value


def _json_or_text(value: str) -> Any:
    try:
        return _loads(value)
    except _Unsendable:
        raise
    except ValueError:
        return value


def _loads(text: str) -> Any:
    # Below this depth the parser's own recursion limit is never reached.
    if _nesting(text) > _MAX_JSON_DEPTH:
        raise _Unsendable("it is nested too deeply to read")
    return json.loads(text, parse_constant=_not_json, parse_float=_finite)


def _nesting(text: str) -> int:
    """How deeply the arrays and objects of JSON text nest at most, strings skipped."""
    deepest = depth = 0
    for token in _JSON_TOKEN.finditer(text):
        mark = token.group()
        if mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest


def _not_json(constant: str) -> Any:
    # Python's json reads NaN and Infinity, which JSON has not: such a value stays text.
    raise ValueError(f"{constant} is not JSON")


def _finite(literal: str) -> float:
    number = float(literal)
    if not math.isfinite(number):
        raise _Unsendable(f"{literal} is a number beyond a 64-bit float (RFC 7493)")
    return number


def _shown(value: str) -> str:
    return value if len(value) <= _SHOWN_CHARS else f"{value[:_SHOWN_CHARS]}…({len(value)} chars)"


def _is_text(node: Any, definitions: Mapping[str, Any]) -> bool:
    """Whether a schema takes strings only (a string, a string enum, or either or null)."""
    if not isinstance(node, Mapping):
        return False
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith(_DEFINITIONS_REF):
        return _is_text(definitions.get(reference.removeprefix(_DEFINITIONS_REF)), definitions)
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        kept = [option for option in options if not (isinstance(option, Mapping) and option.get("type") == "null")]
        return bool(kept) and all(_is_text(option, definitions) for option in kept)
    if node.get("type") == "string":
        return True
    values = node.get("enum")
    return isinstance(values, list) and bool(values) and all(isinstance(value, str) for value in values)


def caller_headers(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The `--header 'Name: value'` options, as (name, value) pairs: the caller's credentials,
    sent with the request as a client would send them."""
    headers = []
    for given in values:
        name, colon, value = given.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _HEADER_NAME.fullmatch(name):
            raise CliError(f"A header must be 'Name: value' (say 'X-API-Key: demo'); got {given!r}.")
        if not _HEADER_VALUE.fullmatch(value):
            held = next(char for char in value if not _HEADER_VALUE.fullmatch(char))
            raise CliError(
                f"The value of the header {name!r} holds {held!r}, which a header value cannot carry "
                "(tabs, spaces, visible ASCII and Latin-1 letters only)."
            )
        lowered = name.lower()
        if lowered in c.TRANSPORT_HEADERS or lowered.startswith(c.PARAM_HEADER_PREFIX):
            raise CliError(f"--header cannot set {name!r}: the command sets it on each request itself.")
        headers.append((name, value))
    return tuple(headers)
