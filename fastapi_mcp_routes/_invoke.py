"""A tool call as an HTTP request to the app itself: build the scope, call the app, capture.

The call goes through the app's ASGI interface, in process, so the route runs exactly as it
does for REST: middleware, routing, validation, dependencies, exception handlers and the
response model (DESIGN.md, decision 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import anyio
from starlette.types import ASGIApp, Message, Scope

from fastapi_mcp_routes import _constants as c
from fastapi_mcp_routes._errors import ToolArgumentError
from fastapi_mcp_routes._json import dumps
from fastapi_mcp_routes._registry import Tool
from fastapi_mcp_routes._schema import BodyMode

_JSON_HEADERS = ((b"content-type", c.MEDIA_JSON.encode()), (b"accept", c.MEDIA_JSON.encode()))
_FORM_HEADERS = ((b"content-type", c.MEDIA_FORM.encode()), (b"accept", c.MEDIA_JSON.encode()))
# RFC 6265 4.1.1 cookie-octets: no whitespace, quote, comma, semicolon or backslash.
_COOKIE_VALUE = re.compile(r"[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")
_ACCEPT_ONLY = ((b"accept", c.MEDIA_JSON.encode()),)


@dataclass(frozen=True, slots=True)
class Caller:
    """The MCP caller as the route must see it: credentials, address, and the outer request."""

    headers: tuple[tuple[bytes, bytes], ...]
    client: tuple[str, int] | None
    server: tuple[str, int | None] | None
    scheme: str
    root_path: str
    http_version: str
    state: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class CapturedResponse:
    """What the route answered, as a REST client would have received it."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: bytes) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value.decode("latin-1")
        return None


def caller_from_scope(scope: Scope, forward_headers: frozenset[bytes]) -> Caller:
    """Pick the parts of the outer request that the route's request inherits."""
    headers = tuple((k, v) for k, v in scope["headers"] if k in forward_headers)
    return Caller(
        headers=headers,
        client=scope.get("client"),
        server=scope.get("server"),
        scheme=scope.get("scheme", "http"),
        root_path=scope.get("root_path", ""),
        http_version=scope.get("http_version", "1.1"),
        state=scope.get("state"),
    )


async def invoke(app: ASGIApp, tool: Tool, arguments: Mapping[str, Any], caller: Caller) -> CapturedResponse:
    """Run the tool's route with these arguments as the caller's HTTP request."""
    scope, body = build_request(tool, arguments, caller)
    return await call_app(app, scope, body)


def build_request(tool: Tool, arguments: Mapping[str, Any], caller: Caller) -> tuple[Scope, bytes]:
    """The ASGI scope and body of the route's request for one tool call."""
    _check_argument_names(tool, arguments)
    path, raw_path = _path(tool, arguments)
    query: list[tuple[str, str]] = []
    extra_headers: list[tuple[bytes, bytes]] = []
    cookies: list[tuple[str, str]] = []
    body_fields: dict[str, Any] = {}
    whole_body: Any = None
    for name, value in arguments.items():
        argument = tool.schema.arguments[name]
        if argument.location == "query":
            query.extend(_query_pairs(argument.wire_name, value))
        elif argument.location == "header" and value is not None:
            extra_headers.append((argument.wire_name.lower().encode(), _scalar(name, value).encode()))
        elif argument.location == "cookie" and value is not None:
            cookies.append((argument.wire_name, _scalar(name, value)))
        elif argument.location == "body":
            if tool.schema.body_mode is BodyMode.WHOLE:
                whole_body = value
            else:
                body_fields[name] = value
    body, content_headers = _body(tool, body_fields, whole_body)
    headers = [*caller.headers, *extra_headers, *content_headers]
    if body:
        headers.append((b"content-length", str(len(body)).encode()))
    if cookies:
        headers = _merge_cookies(headers, cookies)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": caller.http_version,
        "method": tool.method,
        "scheme": caller.scheme,
        "path": caller.root_path + path,
        "raw_path": (caller.root_path + raw_path).encode(),
        "root_path": caller.root_path,
        "query_string": urlencode(query).encode() if query else b"",
        "headers": headers,
        "client": caller.client,
        "server": caller.server,
        "extensions": {},
    }
    if caller.state is not None:
        # Lifespan state is shallow-copied per request, as servers do.
        scope["state"] = dict(caller.state)
    return scope, body


async def call_app(app: ASGIApp, scope: Scope, body: bytes) -> CapturedResponse:
    """Call the app with one request and collect its whole response."""
    delivered = False
    status = 500
    headers: tuple[tuple[bytes, bytes], ...] = ()
    chunks: list[bytes] = []

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The caller is still there until the tool call itself is cancelled.
        await anyio.sleep_forever()
        raise AssertionError("unreachable")  # pragma: no cover

    async def send(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = tuple(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return CapturedResponse(status, headers, b"".join(chunks))


def _check_argument_names(tool: Tool, arguments: Mapping[str, Any]) -> None:
    unknown = [name for name in arguments if name not in tool.schema.arguments]
    if unknown:
        known = ", ".join(sorted(tool.schema.arguments)) or "no arguments"
        raise ToolArgumentError(
            f"Unknown argument(s) {', '.join(map(repr, sorted(unknown)))}; the tool {tool.name!r} takes: {known}."
        )
    missing = sorted(tool.required.difference(arguments))
    if missing:
        raise ToolArgumentError(f"Missing required argument(s): {', '.join(map(repr, missing))}.")


def _path(tool: Tool, arguments: Mapping[str, Any]) -> tuple[str, str]:
    """The decoded and the percent-encoded path, each placeholder filled exactly once."""
    decoded: list[str] = []
    encoded: list[str] = []
    for literal, quoted_literal, placeholder in tool.path_parts:
        decoded.append(literal)
        encoded.append(quoted_literal)
        if placeholder is None:
            continue
        value = _scalar(placeholder, arguments[placeholder])
        slash_allowed = placeholder in tool.slash_params
        if not value or ("/" in value and not slash_allowed):
            # An empty segment or a "/" would make the request reach another route.
            raise ToolArgumentError(f"Argument {placeholder!r} must be a non-empty path segment without '/'.")
        decoded.append(value)
        encoded.append(quote(value, safe="/" if slash_allowed else ""))
    return "".join(decoded), "".join(encoded)


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ToolArgumentError(f"Argument {name!r} must be a string, number or boolean, got {type(value).__name__}.")


def _query_pairs(name: str, value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    if isinstance(value, list):
        return [(name, _scalar(name, item)) for item in value if item is not None]
    return [(name, _scalar(name, value))]


def _body(tool: Tool, fields: dict[str, Any], whole: Any) -> tuple[bytes, tuple[tuple[bytes, bytes], ...]]:
    mode = tool.schema.body_mode
    if mode is BodyMode.NONE or (mode is BodyMode.WHOLE and whole is None):
        return b"", _ACCEPT_ONLY
    payload = whole if mode is BodyMode.WHOLE else fields
    if tool.schema.body_media_type == c.MEDIA_JSON:
        return dumps(payload), _JSON_HEADERS
    if not isinstance(payload, dict):
        raise ToolArgumentError("Argument 'body' must be an object of form fields.")
    pairs = [p for key, value in payload.items() for p in _query_pairs(key, value)]
    return urlencode(pairs).encode(), _FORM_HEADERS


def _merge_cookies(headers: list[tuple[bytes, bytes]], cookies: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    # The caller's own cookies come last so they win over an argument of the same name.
    caller_cookie = b"; ".join(v for k, v in headers if k == b"cookie")
    for name, value in cookies:
        if not _COOKIE_VALUE.fullmatch(value):
            raise ToolArgumentError(f"Argument {name!r} is not a valid cookie value (RFC 6265).")
    model = "; ".join(f"{k}={v}" for k, v in cookies).encode()
    merged = b"; ".join(part for part in (model, caller_cookie) if part)
    return [(k, v) for k, v in headers if k != b"cookie"] + [(b"cookie", merged)]
