"""JSON in and out, through pydantic-core (already a dependency, and much faster than `json`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pydantic_core

from fastapi_mcp_routes.wire.errors import ParseError


@dataclass(frozen=True, slots=True)
class RawJSON:
    """A value already encoded as JSON, spliced into a response as is (warm `tools/list`)."""

    data: bytes


def loads(data: bytes | str) -> Any:
    """Decode JSON; anything malformed, NaN or nested too deep becomes a `ParseError`."""
    try:
        return pydantic_core.from_json(data, allow_inf_nan=False)
    except ValueError as exc:
        # pydantic-core's messages name the position only, never echo the input.
        raise ParseError(f"Parse error: the body is not valid JSON ({exc}).") from None


def dumps(value: Any) -> bytes:
    """Encode a JSON-compatible value."""
    return pydantic_core.to_json(value)
