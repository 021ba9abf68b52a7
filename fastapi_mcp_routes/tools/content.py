"""Routes that answer with MCP content blocks: text, images, audio and embedded resources.

A route returns `ContentResponse([...])`; a tool call passes the blocks through as the result's
`content`, and a REST client receives the same JSON (`{"content": [...]}`) under the media type
`application/vnd.mcp.content+json`. Plain `image/*` and `audio/*` responses need none of this:
they become image and audio blocks by themselves.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final

from starlette.responses import Response

from fastapi_mcp_routes.wire.json import dumps

MEDIA_CONTENT: Final = "application/vnd.mcp.content+json"


class ContentResponse(Response):
    """A response whose body is a list of MCP content blocks."""

    media_type = MEDIA_CONTENT

    def __init__(
        self, content: Sequence[Mapping[str, Any]], status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        for block in content:
            if not isinstance(block.get("type"), str):
                raise ValueError(f"every content block needs a string 'type', got {block!r}")
        super().__init__(dumps({"content": list(content)}), status_code, headers)


def text_content(text: str) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": text}


def image_content(data: bytes, mime_type: str) -> dict[str, Any]:
    """An image block (the bytes are sent base64-encoded)."""
    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def audio_content(data: bytes, mime_type: str) -> dict[str, Any]:
    """An audio block (the bytes are sent base64-encoded)."""
    return {"type": "audio", "data": base64.b64encode(data).decode("ascii"), "mimeType": mime_type}


def resource_content(uri: str, mime_type: str, *, text: str | None = None, blob: bytes | None = None) -> dict[str, Any]:
    """An embedded resource block: exactly one of `text` or `blob`."""
    if (text is None) == (blob is None):
        raise ValueError(f"an embedded resource needs exactly one of text or blob, for {uri!r}")
    resource: dict[str, Any] = {"uri": uri, "mimeType": mime_type}
    if text is not None:
        resource["text"] = text
    else:
        resource["blob"] = base64.b64encode(blob or b"").decode("ascii")
    return {"type": "resource", "resource": resource}
