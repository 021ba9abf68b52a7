"""A tool call as an HTTP request to the app itself: build the scope, call the app, capture.

The call goes through the app's ASGI interface, in process, so the route runs exactly as it
does for REST: middleware, routing, validation, dependencies, exception handlers and the
response model, and never through FastAPI's private internals, which change between releases.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import quote, quote_plus, urlencode

import anyio
from starlette.types import ASGIApp, Message, Scope

from fastapi_mcp_routes.auth.dpop import DPOP_SCOPE_KEY, ProofSource, carried_source
from fastapi_mcp_routes.options import DEFAULT_MAX_RESPONSE_BYTES
from fastapi_mcp_routes.telemetry.current import carried
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.schema import BodyMode
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import ToolError
from fastapi_mcp_routes.wire.json import dumps
from fastapi_mcp_routes.wire.jsonrpc import some

logger = logging.getLogger("fastapi_mcp_routes")

_JSON_HEADERS = ((b"content-type", c.MEDIA_JSON.encode()), (b"accept", c.MEDIA_JSON.encode()))
_FORM_HEADERS = ((b"content-type", c.MEDIA_FORM.encode()), (b"accept", c.MEDIA_JSON.encode()))
# RFC 9110 5.5 field values as a REST client could send them: visible ASCII, spaces and tabs.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
_ACCEPT_ONLY = ((b"accept", c.MEDIA_JSON.encode()),)
# What percent-encoding leaves as it is, in a path segment and in a query (RFC 3986 section 2.3).
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")

# The longest path and query a tool call builds: what nginx accepts in a request line by default.
MAX_TARGET_BYTES: Final = 8 * 1024

# Holds bytes of a response for the caller: `None` when held, else the reason it may not be.


class Hold(Protocol):
    """Holds a response's bytes for its caller while it is built (the process's answer budget)."""

    # Up to this size a response is held without asking (cheaper than asking each time).
    uncounted: int

    def hold(self, total: int) -> str | None:
        """The response is `total` bytes now: `None` once they are held, else why not."""
        ...


# Per-request values, built on every call: not frozen, since a frozen dataclass sets each
# field through object.__setattr__ (`benchmarks/profile_tool_call.py` shows the cost).
@dataclass(slots=True)
class Caller:
    """The MCP caller as the route must see it: credentials, address, and the outer request."""

    headers: tuple[tuple[bytes, bytes], ...]
    client: tuple[str, int] | None
    server: tuple[str, int | None] | None
    scheme: str
    root_path: str
    http_version: str
    state: dict[str, Any] | None
    # The HTTP request a DPoP proof came with: the route checks the proof against it, once.
    proof: ProofSource | None = None


@dataclass(slots=True)
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
    headers = tuple([pair for pair in scope["headers"] if pair[0] in forward_headers])
    return Caller(
        headers=headers,
        client=scope.get("client"),
        server=scope.get("server"),
        scheme=scope.get("scheme", "http"),
        root_path=scope.get("root_path", ""),
        http_version=scope.get("http_version", "1.1"),
        state=scope.get("state"),
        proof=carried_source(scope),
    )


async def invoke(
    app: ASGIApp,
    tool: Tool,
    arguments: Mapping[str, Any],
    caller: Caller,
    extra_scope: Mapping[str, Any] | None = None,
    *,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    on_answered: Callable[[], None] | None = None,
    stop: Callable[[BaseException], None] | None = None,
    hold: Hold | None = None,
) -> CapturedResponse:
    """Run the tool's route with these arguments as the caller's HTTP request; `extra_scope`
    holds our own scope keys (the running call a route's `ToolContext` reaches)."""
    scope, body = build_request(tool, arguments, caller)
    if extra_scope:
        scope.update(extra_scope)
    return await call_app(app, scope, body, max_response_bytes, on_answered, stop, hold)


def planned_path(tool: Tool, arguments: Mapping[str, Any]) -> str:
    """The path a call with these arguments would request; `ToolError` for arguments that
    cannot make a request at all."""
    _check_argument_names(tool, arguments)
    return _path(tool, arguments)[1]


def build_request(tool: Tool, arguments: Mapping[str, Any], caller: Caller) -> tuple[Scope, bytes]:
    """The ASGI scope and body of the route's request for one tool call."""
    _check_argument_names(tool, arguments)
    path, raw_path = _path(tool, arguments)
    query: list[tuple[str, str]] = []
    extra_headers: list[tuple[bytes, bytes]] = []
    body_fields: dict[str, Any] = {}
    whole_body: Any = None
    known = tool.schema.arguments
    for name, value in arguments.items():
        argument = known[name]
        location = argument.location
        if location == "query":
            query.extend(_query_pairs(argument.wire_name, value))
        elif location == "header" and value is not None:
            extra_headers.append((argument.wire_name.lower().encode(), _header_value(name, value)))
        elif location == "body":
            if tool.schema.body_mode is BodyMode.WHOLE:
                whole_body = value
            else:
                body_fields[name] = value
    query_string = _query_string(query)
    if len(raw_path) + len(query_string) > MAX_TARGET_BYTES:
        # Over REST the server refuses such a request line; built here, it would reach the route.
        raise ToolError(
            f"The arguments make the route's URL {len(raw_path) + len(query_string):,} bytes long, "
            f"past the {MAX_TARGET_BYTES:,} a server accepts in a request line; send shorter values."
        )
    body, content_headers = _body(tool, body_fields, whole_body)
    headers = [*extra_headers, *content_headers]
    if body:
        headers.append((b"content-length", str(len(body)).encode()))
    return caller_request(caller, tool.method, path, raw_path, query_string, headers), body


def caller_request(
    caller: Caller,
    method: str,
    path: str,
    raw_path: str,
    query_string: bytes = b"",
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> Scope:
    """The ASGI scope of a request the caller makes of the app in process: its credentials and
    address, the trace context carried on, lifespan state, and the DPoP proof already checked;
    `path` and `raw_path` below the app's root path."""
    # The trace context of the MCP request goes on with it, where telemetry observes it.
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": caller.http_version,
        "method": method,
        "scheme": caller.scheme,
        "path": caller.root_path + path,
        "raw_path": (caller.root_path + raw_path).encode(),
        "root_path": caller.root_path,
        "query_string": query_string,
        "headers": [*carried(caller.headers), *headers],
        "client": caller.client,
        "server": caller.server,
        "extensions": {},
    }
    if caller.state is not None:
        # Lifespan state is shallow-copied per request, as servers do.
        scope["state"] = dict(caller.state)
    if caller.proof is not None:
        scope[DPOP_SCOPE_KEY] = caller.proof
    return scope


async def call_app(
    app: ASGIApp,
    scope: Scope,
    body: bytes,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    on_answered: Callable[[], None] | None = None,
    stop: Callable[[BaseException], None] | None = None,
    hold: Hold | None = None,
) -> CapturedResponse:
    """Call the app with one request and collect its whole response, up to `max_response_bytes`.
    `on_answered` is told when the response is whole (the route's background tasks run after);
    `hold` is asked to hold each chunk's bytes for the caller (the process's answer budget).

    Past the cap, or once `hold` refuses, nothing more is kept, and `stop` (the running call's)
    is handed the `ToolError` to end the call with: it stops the app the way a cancellation
    does. Raising in `send` would instead travel back through the app's middleware, wrapped in
    exception groups by those built on task groups. Without `stop`, the app runs to its end and
    then the `ToolError` is raised."""
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

    size = 0
    complete = False
    refused: ToolError | None = None

    async def send(message: Message) -> None:
        nonlocal status, headers, size, complete, refused
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = tuple(message.get("headers", ()))
        elif message["type"] == "http.response.body" and refused is None:
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_response_bytes:
                refused = _too_large(max_response_bytes)
            elif hold is not None and size > hold.uncounted and (reason := hold.hold(size)) is not None:
                refused = ToolError(f"The route's response was not kept: {reason}. Try again later.")
            if refused is not None:
                chunks.clear()
                if stop is not None:
                    stop(refused)
                return
            chunks.append(chunk)
            complete = not message.get("more_body", False)
            if complete and on_answered is not None:
                on_answered()

    try:
        await app(scope, receive, send)
    except Exception:
        # Starlette answers a crash with a whole 500 and then re-raises, so only a failure after
        # a whole non-5xx response comes from the route's background tasks: a REST client would
        # have had that response, and so does the model.
        if not complete or status >= 500:
            raise
        logger.exception("a background task of %s %s failed after its response", scope["method"], scope["path"])
    if refused is not None:
        raise refused
    return CapturedResponse(status, headers, b"".join(chunks))


def _too_large(limit: int) -> ToolError:
    return ToolError(f"The route's response is larger than {limit} bytes.")


def _check_argument_names(tool: Tool, arguments: Mapping[str, Any]) -> None:
    known = tool.schema.arguments
    if tool.required <= arguments.keys() <= known.keys():
        # Every call that can make a request: two set tests, no list and no sort, the cheapest
        # check (`benchmarks/profile_tool_call.py` under callgrind shows the saving).
        return
    unknown = [name for name in arguments if name not in known]
    if unknown:
        takes = ", ".join(sorted(known)) or "no arguments"
        raise ToolError(f"Unknown argument(s) {some(unknown)}; the tool {tool.name!r} takes: {takes}.")
    missing = sorted(tool.required.difference(arguments))
    if missing:
        raise ToolError(f"Missing required argument(s): {', '.join(map(repr, missing))}.")


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
            raise ToolError(f"Argument {placeholder!r} must be a non-empty path segment without '/'.")
        decoded.append(value)
        encoded.append(value if _UNRESERVED.fullmatch(value) else quote(value, safe="/" if slash_allowed else ""))
    return "".join(decoded), "".join(encoded)


def _query_string(pairs: list[tuple[str, str]]) -> bytes:
    """The pairs as `urlencode` writes them. Most names and values need no escaping at all,
    so each is tested first and quoted only when it must be, which spares most of the quoting
    (`benchmarks/step_costs.py` times `build_request`)."""
    if not pairs:
        return b""
    return "&".join(f"{_query_part(name)}={_query_part(value)}" for name, value in pairs).encode("ascii")


def _query_part(text: str) -> str:
    return text if _UNRESERVED.fullmatch(text) else quote_plus(text)


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ToolError(f"Argument {name!r} must be a string, number or boolean, got {type(value).__name__}.")


def _header_value(name: str, value: Any) -> bytes:
    text = _scalar(name, value)
    if not _HEADER_VALUE.fullmatch(text):
        raise ToolError(f"Argument {name!r} must be printable ASCII: it is sent as an HTTP header.")
    return text.encode("ascii")


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
        raise ToolError("Argument 'body' must be an object of form fields.")
    pairs = [p for key, value in payload.items() for p in _query_pairs(key, value)]
    return urlencode(pairs).encode(), _FORM_HEADERS
