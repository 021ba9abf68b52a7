"""A route's HTTP response as a resource read, a prompt, or completion values.

The tool result mapping (tools/results.py) answers errors with `isError` results a model can
correct itself from; these features have no such result, so a route that refuses (4xx) or fails
(5xx) is a `RouteFailed` here, which the server layer raises as a JSON-RPC error.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

from fastapi_mcp_routes.tools.content import MEDIA_CONTENT
from fastapi_mcp_routes.tools.invoke import CapturedResponse
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.results import client_error_text
from fastapi_mcp_routes.wire.constants import MEDIA_JSON
from fastapi_mcp_routes.wire.errors import ParseError
from fastapi_mcp_routes.wire.json import loads

# At most this many completion values in one answer (spec, server/utilities/completion).
MAX_COMPLETION_VALUES: Final = 100
# Media types whose bodies are text though their type is not `text/*`.
_TEXT_TYPES: Final = frozenset({MEDIA_JSON, "application/xml", "application/javascript", "application/yaml"})
_ROLES: Final = frozenset({"user", "assistant"})


class RouteFailed(Exception):
    """The route answered with an error status: `status`, and a text saying what it said."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


class UnusableResponse(Exception):
    """A route answered something its feature cannot use (a bug in the route): the message says what."""


def check_status(call: Tool, response: CapturedResponse) -> None:
    """`RouteFailed` unless the route succeeded (2xx)."""
    if not 200 <= response.status < 300:
        text = f"HTTP {response.status}" if response.status >= 500 else client_error_text(call, response)
        raise RouteFailed(response.status, text)


def media_type(response: CapturedResponse) -> str:
    content_type = response.header(b"content-type") or ""
    return content_type.split(";", 1)[0].strip().lower()


def resource_contents(uri: str, response: CapturedResponse, declared: str | None) -> list[dict[str, Any]]:
    """`resources/read` contents: the body as text when its media type is text and it decodes,
    else as a base64 blob."""
    kind = media_type(response) or declared or "application/octet-stream"
    contents: dict[str, Any] = {"uri": uri, "mimeType": kind}
    if _is_text(kind):
        try:
            contents["text"] = response.body.decode("utf-8")
            return [contents]
        except UnicodeDecodeError:
            pass
    contents["blob"] = base64.b64encode(response.body).decode("ascii")
    return [contents]


def _is_text(kind: str) -> bool:
    return kind.startswith("text/") or kind in _TEXT_TYPES or kind.endswith(("+json", "+xml"))


def prompt_result(response: CapturedResponse) -> dict[str, Any]:
    """`prompts/get`'s result: a string is one user message; a list holds messages; an object
    with `messages` is the result itself (`PromptResponse`); content blocks are user messages."""
    kind = media_type(response)
    if kind.startswith("text/"):
        return {"messages": [_user(response.body.decode("utf-8", "replace"))]}
    try:
        data = loads(response.body)
    except ParseError:
        raise UnusableResponse("the prompt route's response is not JSON") from None
    if kind == MEDIA_CONTENT and isinstance(data, Mapping):
        data = [{"role": "user", "content": block} for block in data.get("content", ())]
    if isinstance(data, str):
        return {"messages": [_user(data)]}
    result: dict[str, Any] = {}
    if isinstance(data, Mapping):
        if isinstance(data.get("description"), str):
            result["description"] = data["description"]
        data = data.get("messages")
    if not isinstance(data, list):
        raise UnusableResponse("the prompt route must return a string, a list of messages or a PromptResponse")
    result["messages"] = [_message(item) for item in data]
    return result


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": {"type": "text", "text": text}}


def _message(item: Any) -> dict[str, Any]:
    if isinstance(item, str):
        return _user(item)
    content = item.get("content") if isinstance(item, Mapping) else None
    if not isinstance(item, Mapping) or item.get("role") not in _ROLES or not isinstance(content, Mapping):
        raise UnusableResponse("each prompt message needs a role ('user' or 'assistant') and one content block")
    if not isinstance(content.get("type"), str):
        raise UnusableResponse("each prompt message's content block needs a 'type'")
    return {"role": item["role"], "content": _without_nulls(content)}


def _without_nulls(block: Mapping[str, Any]) -> dict[str, Any]:
    """A content block as a pydantic model dumps it, without the optional fields left unset."""
    return {key: value for key, value in block.items() if value is not None}


def completion_values(response: CapturedResponse) -> list[str]:
    """The values a completion route returned: a list of strings (or `{"values": [...]}`)."""
    try:
        data = loads(response.body)
    except ParseError:
        data = None
    if isinstance(data, Mapping):
        data = data.get("values")
    if not isinstance(data, list) or not all(isinstance(value, str) for value in data):
        raise UnusableResponse("a completion route must return a list of strings")
    return data


def completion(values: list[str]) -> dict[str, Any]:
    """`completion/complete`'s result: the first values, how many there are, whether more."""
    return {
        "completion": {
            "values": values[:MAX_COMPLETION_VALUES],
            "total": len(values),
            "hasMore": len(values) > MAX_COMPLETION_VALUES,
        }
    }
