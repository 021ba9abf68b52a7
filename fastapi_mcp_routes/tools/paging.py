"""List pages: every MCP list (tools, resources, templates, prompts) is cut into pre-encoded
pages of `Limits.page_size` entries, named by an opaque cursor."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from fastapi_mcp_routes.wire.json import RawJSON, dumps

_CURSOR: Final = re.compile(r"p[1-9][0-9]{0,6}")


def pages(key: str, definitions: list[Mapping[str, Any]], size: int) -> tuple[RawJSON, ...]:
    """A list's pages, pre-encoded, each but the last with a `nextCursor`."""
    starts = range(0, max(len(definitions), 1), size)
    encoded = []
    for start in starts:
        page: dict[str, Any] = {key: definitions[start : start + size]}
        if start + size < len(definitions):
            page["nextCursor"] = encode_cursor(start // size + 1)
        encoded.append(RawJSON(dumps(page)))
    return tuple(encoded)


def encode_cursor(page: int) -> str:
    """An opaque list cursor naming a page."""
    return f"p{page}"


def decode_cursor(cursor: object, page_count: int) -> int | None:
    """The page index a cursor names, or `None` when it names no page."""
    if not isinstance(cursor, str) or not _CURSOR.fullmatch(cursor):
        return None
    index = int(cursor[1:])
    return index if index < page_count else None
