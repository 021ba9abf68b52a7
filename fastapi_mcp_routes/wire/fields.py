"""HTTP field values as the endpoint reads them."""

from __future__ import annotations


def field_value(raw: bytes) -> str:
    """A header's value without the whitespace around it, which is not part of it (RFC 9110
    section 5.5). h11 strips it before the app sees the header; httptools (uvicorn[standard])
    passes it on, so `Mcp-Name:  get_item ` must be read here as `get_item`."""
    return raw.decode("latin-1").strip(" \t")
