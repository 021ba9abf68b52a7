"""JSON in and out, through pydantic-core (already a dependency, and much faster than `json`).

Numbers are finite both ways. JSON has no NaN or Infinity (RFC 8259 section 6), but pydantic-core
reads a number too large for a 64-bit float, say `1e400`, as infinity even with
`allow_inf_nan=False`, and writes infinity as the bare word `Infinity`. Such a number is refused
as a parse error: it is grammatical JSON, but not JSON that can be exchanged (I-JSON, RFC 7493
section 2.2: no number beyond IEEE 754 double precision), and this server could neither hold it
as sent nor write it back. Nothing the server writes holds NaN or an infinity either: `dumps`
refuses such a value rather than send text a JSON parser rejects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import pydantic_core

from fastapi_mcp_routes.wire.errors import ParseError

# The words pydantic-core writes for NaN and the infinities ("constants" mode, the default).
_INFINITY: Final = b"Infinity"
_NAN: Final = b"NaN"


@dataclass(frozen=True, slots=True)
class RawJSON:
    """A value already encoded as JSON, spliced into a response as is (warm `tools/list`)."""

    data: bytes


def loads(data: bytes | str) -> Any:
    """Decode JSON; anything malformed, NaN, out of a double's range or nested too deep
    becomes a `ParseError`."""
    try:
        value = pydantic_core.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        # pydantic-core's messages name the position only, never echo the input.
        raise ParseError(f"Parse error: the body is not valid JSON ({exc}).") from None
    # An overflowed number is found by encoding the value again, in Rust, for less than the
    # decoding cost: scanning the bytes for exponents first costs more, and a walk of the value
    # in Python matches it only for small bodies (`benchmarks/step_costs.py` times `parse`).
    if _holds_non_finite(value, pydantic_core.to_json(value)):
        raise ParseError("Parse error: the body holds a number too large for a 64-bit float (RFC 7493 section 2.2).")
    return value


def dumps(value: Any) -> bytes:
    """Encode a JSON-compatible value; `ValueError` for one holding NaN or an infinity."""
    encoded = pydantic_core.to_json(value)
    if _holds_non_finite(value, encoded):
        raise ValueError("JSON cannot carry NaN or an infinity, and the value to encode holds one")
    return encoded


def _holds_non_finite(value: Any, encoded: bytes) -> bool:
    """Whether `encoded` (the value written in pydantic-core's default mode) holds NaN or an
    infinity. Only when one of their words appears, in a string or not, is the value written
    again with those numbers as `null`: the two encodings differ exactly when one is there."""
    if _INFINITY not in encoded and _NAN not in encoded:
        return False
    return encoded != pydantic_core.to_json(value, inf_nan_mode="null")
