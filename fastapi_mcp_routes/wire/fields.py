"""HTTP field values as the endpoint reads them."""

from __future__ import annotations

from collections.abc import Sequence


def field_value(raw: bytes) -> str:
    """A header's value without the whitespace around it, which is not part of it (RFC 9110
    section 5.5). h11 strips it before the app sees the header; httptools (uvicorn[standard])
    passes it on, so `Mcp-Name:  get_item ` must be read here as `get_item`."""
    return raw.decode("latin-1").strip(" \t")


def field_table(headers: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """ASGI headers by lower-case name, each value as `field_value` reads it; where a name
    repeats, the first value wins. One pass over the list, so the endpoint's lookups are cheap."""
    return {key.decode("latin-1"): field_value(value) for key, value in reversed(headers)}
