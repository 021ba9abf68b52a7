"""A route's HTTP response as a `tools/call` result, the way a model can best use it."""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

from fastapi_mcp_routes.tools.content import MEDIA_CONTENT
from fastapi_mcp_routes.tools.invoke import CapturedResponse, planned_path
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.schema import BodyMode
from fastapi_mcp_routes.wire.constants import MEDIA_JSON
from fastapi_mcp_routes.wire.errors import ParseError
from fastapi_mcp_routes.wire.failures import crash_result, error_result, failed_result
from fastapi_mcp_routes.wire.json import dumps, loads
from fastapi_mcp_routes.wire.jsonrpc import truncate

# Error text from a route is cut to this many characters: enough for a model to act on.
_MAX_ERROR_TEXT: Final = 2000
# Validation problems named in one error text; about what fits in it, the rest are counted.
_MAX_PROBLEMS: Final = 20
_LOCATIONS: Final = frozenset({"path", "query", "header", "cookie"})


def tool_result(tool: Tool, response: CapturedResponse, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Map the route's response to a `CallToolResult`; `arguments` name the request an empty
    answer reports."""
    if 200 <= response.status < 300:
        return _success(tool, response, arguments)
    if response.status >= 500:
        return failed_result(
            f"The tool failed with HTTP {response.status}",
            "tool %s: the route answered HTTP %d: %r",
            tool.name,
            response.status,
            response.body[:_MAX_ERROR_TEXT],
            level=logging.WARNING,
        )
    return error_result(client_error_text(tool, response))


def _media_type(response: CapturedResponse) -> str:
    content_type = response.header(b"content-type") or ""
    return content_type.split(";", 1)[0].strip().lower()


def _success(tool: Tool, response: CapturedResponse, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    media_type = _media_type(response)
    body = response.body
    if not body:
        return {"content": [{"type": "text", "text": _done(tool, response.status, arguments)}]}
    if media_type == MEDIA_CONTENT:
        return _content_blocks(tool, body)
    if media_type == MEDIA_JSON or media_type.endswith("+json"):
        text = body.decode("utf-8", "replace")
        result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
        if tool.schema.output_schema is not None:
            try:
                data = loads(body)
            except ParseError:
                # Malformed, or not JSON this server can pass on (NaN, a number beyond a 64-bit
                # float: wire/json.py). Clients reject a result without the structured content
                # its outputSchema promises, so say what happened instead.
                return error_result(f"The route's response is not valid JSON: {text}"[:_MAX_ERROR_TEXT])
            if tool.schema.output_wrapped:
                result["structuredContent"] = {"result": data}
            elif isinstance(data, dict):
                result["structuredContent"] = data
            else:
                # The route bypassed its response model; clients reject a result without the
                # structured content its outputSchema promises, so say what happened instead.
                return error_result(f"The route's response does not match its response model: {text}"[:_MAX_ERROR_TEXT])
        return result
    kind = media_type.split("/", 1)[0]
    if kind in ("image", "audio"):
        data64 = base64.b64encode(body).decode("ascii")
        return {"content": [{"type": kind, "data": data64, "mimeType": media_type}]}
    try:
        return {"content": [{"type": "text", "text": body.decode("utf-8")}]}
    except UnicodeDecodeError:
        blob = base64.b64encode(body).decode("ascii")
        resource = {"uri": tool.path_format, "mimeType": media_type or "application/octet-stream", "blob": blob}
        return {"content": [{"type": "resource", "resource": resource}]}


def _done(tool: Tool, status: int, arguments: Mapping[str, Any] | None) -> str:
    """What an empty answer (a 204 to a DELETE) tells the model: which request, and that it
    succeeded. An empty `content` left models unsure whether anything happened."""
    path = planned_path(tool, arguments) if arguments is not None else tool.path_format
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:  # a 2xx code HTTP does not name
        phrase = "Success"
    return f"{tool.method} {path}: {status} {phrase}"


def _content_blocks(tool: Tool, body: bytes) -> dict[str, Any]:
    try:
        content = loads(body).get("content")
    except (ParseError, AttributeError):
        content = None
    if not isinstance(content, list) or not all(isinstance(b, dict) and "type" in b for b in content):
        return crash_result(tool.name)  # a ContentResponse always holds blocks; someone forged one
    return {"content": content}


def client_error_text(tool: Tool, response: CapturedResponse) -> str:
    prefix = f"HTTP {response.status}"
    retry_after = response.header(b"retry-after")
    if retry_after:
        when = f"{retry_after} seconds" if retry_after.strip().isdigit() else retry_after
        prefix += f" (retry after {when})"
    elif response.status == 429:
        prefix += " (rate limited: retry later)"  # the route's limiter sent no Retry-After
    try:
        payload = loads(response.body) if response.body else None
    except ParseError:
        payload = None
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if response.status == 422 and isinstance(detail, list):
        items = [item for item in detail if isinstance(item, dict)]
        problems = "; ".join(_validation_problem(tool, item) for item in items[:_MAX_PROBLEMS])
        if len(items) > _MAX_PROBLEMS:
            problems += f"; and {len(items) - _MAX_PROBLEMS:,} more"
        return f"{prefix}: invalid arguments: {problems}"[:_MAX_ERROR_TEXT]
    if detail is None:
        text = response.body.decode("utf-8", "replace") if payload is None else dumps(payload).decode()
    else:
        text = detail if isinstance(detail, str) else str(detail)
    return (f"{prefix}: {text}" if text else prefix)[:_MAX_ERROR_TEXT]


def _validation_problem(tool: Tool, error: dict[str, Any]) -> str:
    """One FastAPI validation error, named by the tool argument a model sent."""
    loc = [str(part) for part in error.get("loc", ())]
    if (loc and loc[0] in _LOCATIONS) or (loc and loc[0] == "body" and tool.schema.body_mode is BodyMode.FIELDS):
        loc = loc[1:]
    # The names and the input are what the model sent: each is cut short.
    name = truncate(".".join(loc) or "arguments")
    message = error.get("msg", "is invalid")
    if "input" in error and error.get("type") != "missing":
        return f"{name!r}: {message} (got {truncate(repr(error['input']))})"
    return f"{name!r}: {message}"
