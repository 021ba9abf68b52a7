"""Routes that answer with MCP content blocks: text, images, audio and embedded resources.

A route returns `ContentResponse([...])`; a tool call passes the blocks through as the result's
`content`, and a REST client receives the same JSON (`{"content": [...]}`) under the media type
`application/vnd.mcp.content+json`. Plain `image/*` and `audio/*` responses need none of this:
they become image and audio blocks by themselves.

A prompt route returns a `PromptResponse` (or a list of `PromptMessage`s), each message one of
these blocks; a REST client receives it as JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel
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


def resource_link(
    uri: str, name: str, *, mime_type: str | None = None, description: str | None = None
) -> dict[str, Any]:
    """A link to a resource the client may read (`resources/read`), not its contents."""
    link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    if mime_type is not None:
        link["mimeType"] = mime_type
    if description is not None:
        link["description"] = description
    return link


class PromptMessage(BaseModel):
    """One message of a prompt: a role and one content block (`text_content(...)`, ...)."""

    role: Literal["user", "assistant"]
    content: dict[str, Any]


class PromptResponse(BaseModel):
    """What a prompt route returns: its messages, and optionally a description."""

    messages: list[PromptMessage]
    description: str | None = None
