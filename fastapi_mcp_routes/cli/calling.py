"""`call`: one `tools/call` through the app's own MCP endpoint, in process, as a client of the
stateless revision (2026-07-28) makes it, so everything a client meets applies: the endpoint's
checks, the route's guards and validation, confirmation of mutations, the app's exception
handlers.

Each round is a real JSON-RPC request POSTed over the app's ASGI interface: the revision and the
client's capabilities in `params._meta`, the routing headers (`MCP-Protocol-Version`,
`Mcp-Method`, `Mcp-Name`, and `Mcp-Param-*` for the arguments the tool mirrors in headers), and
the caller's own headers. A round that ends `input_required` is answered (`questions.py`) and
retried with the answers and its `requestState`, as the revision's Multi Round-Trip Requests
go; progress and log notifications on the response stream are handed on as they arrive.
"""

from __future__ import annotations

import base64
import difflib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

from starlette.types import ASGIApp

from fastapi_mcp_routes.cli.asgi import post
from fastapi_mcp_routes.cli.errors import CliError
from fastapi_mcp_routes.cli.printable import printable
from fastapi_mcp_routes.server.envelope import (
    HEADER_METHOD,
    HEADER_NAME,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MODERN_VERSIONS,
)
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.tools.streams import SseParser
from fastapi_mcp_routes.wire import constants as c

PROTOCOL_VERSION: Final = MODERN_VERSIONS[-1]
METHOD: Final = "tools/call"
# A tool whose route keeps asking is stopped after this many rounds of questions.
MAX_ROUNDS: Final = 20
_REQUEST_ID: Final = 1
# Asking for progress lets the endpoint answer on an SSE stream, so it shows while the call runs.
_PROGRESS_TOKEN: Final = "call"
# The route's log messages shown on stderr: from info up (debug is for the route's author, who
# reads the server's log).
LOG_LEVEL: Final = "info"
# Form-mode elicitation only: a terminal can show a message and ask for typed values.
ELICITATION: Final[Mapping[str, Any]] = {"elicitation": {"form": {}}}
_ACCEPT: Final = f"{c.MEDIA_JSON}, {c.MEDIA_SSE}"
_BASE64_SENTINEL: Final = ("=?base64?", "?=")  # 2026-07-28, a header value that is not plain ASCII
_ERROR_BODY_CHARS: Final = 300

Message = Mapping[str, Any]
Answer = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One call as the command line gave it."""

    tool: Tool
    arguments: Mapping[str, Any]
    headers: tuple[tuple[str, str], ...]  # the caller's (credentials), as `--header` gave them
    can_ask: bool  # declare the elicitation capability: the command can answer questions


async def call_tool(
    app: ASGIApp,
    state: Mapping[str, Any],
    path: str,
    request: CallRequest,
    answer: Answer,
    on_notification: Callable[[Message], None],
) -> Message:
    """The call's final JSON-RPC message (a result or an error), after answering its questions
    with `answer` (input requests by key -> responses by key)."""
    retry: dict[str, Any] = {}
    for _ in range(MAX_ROUNDS):
        message = await _round(app, state, path, request, retry, on_notification)
        result = message.get("result")
        if not isinstance(result, Mapping) or result.get("resultType") != "input_required":
            return message
        asked = result.get("inputRequests")
        retry = {
            "inputResponses": answer(asked if isinstance(asked, Mapping) else {}),
            "requestState": result.get("requestState"),
        }
    raise CliError(f"The tool {request.tool.name!r} asked more than {MAX_ROUNDS} rounds of questions; stopped there.")


async def _round(
    app: ASGIApp,
    state: Mapping[str, Any],
    path: str,
    request: CallRequest,
    retry: Mapping[str, Any],
    on_notification: Callable[[Message], None],
) -> Message:
    params = {"name": request.tool.name, "arguments": dict(request.arguments), **retry, "_meta": _meta(request)}
    body = json.dumps({"jsonrpc": c.JSONRPC_VERSION, "id": _REQUEST_ID, "method": METHOD, "params": params})
    reader = _Reader(on_notification)
    await post(app, state, path, _headers(request), body.encode(), reader)
    return reader.answer()


def _meta(request: CallRequest) -> dict[str, Any]:
    return {
        META_VERSION: PROTOCOL_VERSION,
        META_CAPABILITIES: dict(ELICITATION) if request.can_ask else {},
        META_CLIENT_INFO: {"name": "fastapi-mcp-routes", "version": _version()},
        META_LOG_LEVEL: LOG_LEVEL,
        "progressToken": _PROGRESS_TOKEN,
    }


def _version() -> str:
    try:
        return version("fastapi-mcp-routes")
    except PackageNotFoundError:
        return "0"


def _headers(request: CallRequest) -> list[tuple[str, str]]:
    headers = [
        (c.HEADER_CONTENT_TYPE, c.MEDIA_JSON),
        (c.HEADER_ACCEPT, _ACCEPT),
        (c.HEADER_PROTOCOL_VERSION, PROTOCOL_VERSION),
        (HEADER_METHOD, METHOD),
        (HEADER_NAME, request.tool.name),
    ]
    for argument, header, _ in request.tool.header_params:
        value = request.arguments.get(argument)
        if value is not None:
            headers.append((header, _header_value(value)))
    return [*headers, *request.headers]


def _header_value(value: Any) -> str:
    """An argument as its `Mcp-Param-*` header carries it: booleans in lower case, text that is
    not plain visible ASCII (or has blanks at its ends) base64-encoded in the sentinel form."""
    text = ("true" if value else "false") if isinstance(value, bool) else str(value)
    if text.isascii() and text.isprintable() and text == text.strip():
        return text
    start, end = _BASE64_SENTINEL
    return start + base64.b64encode(text.encode()).decode("ascii") + end


class _Reader:
    """The endpoint's answer to one round: JSON, or SSE whose notifications are handed on as
    they come and whose response to our request is the answer."""

    def __init__(self, on_notification: Callable[[Message], None]) -> None:
        self._on_notification = on_notification
        self._status = 0
        self._sse: SseParser | None = None
        self._body: list[bytes] = []
        self._answer: Message | None = None

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        self._status = status
        if headers.get(c.HEADER_CONTENT_TYPE, "").startswith(c.MEDIA_SSE):
            self._sse = SseParser()

    def feed(self, chunk: bytes) -> None:
        if self._sse is None:
            self._body.append(chunk)
            return
        for frame in self._sse.feed(chunk):
            self._take(frame.get("data"))

    def _take(self, message: Any) -> None:
        if not isinstance(message, Mapping):
            return
        if "id" in message and ("result" in message or "error" in message):
            self._answer = message
        elif isinstance(message.get("method"), str):
            self._on_notification(message)

    def answer(self) -> Message:
        if self._sse is None:
            self._take(_json(b"".join(self._body)))
        if self._answer is None:
            body = b"".join(self._body).decode("utf-8", "replace")[:_ERROR_BODY_CHARS]
            raise CliError(f"The endpoint answered HTTP {self._status} without a JSON-RPC answer: {body!r}.")
        return self._answer


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def notification_line(message: Message, *, frames: bool = False) -> str | None:
    """A progress or log notification as one printable line for stderr; None for any other.
    With `frames` (a streaming tool's call), progress counts the frames received."""
    line = _notification_text(message, frames)
    return None if line is None else printable(line)


def _notification_text(message: Message, frames: bool) -> str | None:
    params = message.get("params")
    params = params if isinstance(params, Mapping) else {}
    if message.get("method") == "notifications/progress" and frames:
        # A stream's total is the window's frame cap (`maxFrames`), which the sample rarely
        # reaches: "1/200" would read as 0.5% done.
        text = params.get("message")
        received = f"frames received: {params.get('progress')}"
        return f"{received} - {text}" if text else received
    if message.get("method") == "notifications/progress":
        total = params.get("total")
        done = f"{params.get('progress')}/{total}" if total is not None else f"{params.get('progress')}"
        text = params.get("message")
        return f"progress {done}: {text}" if text else f"progress {done}"
    if message.get("method") == "notifications/message":
        data = params.get("data")
        shown = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        origin = f" {params['logger']}" if isinstance(params.get("logger"), str) else ""
        return f"log {params.get('level')}{origin}: {shown}"
    return None


def tool_named(table: ToolTable, name: str) -> Tool:
    """The tool called `name`; `CliError` naming the closest names for one the table lacks."""
    found = table.by_name.get(name)
    if found is None:
        close = difflib.get_close_matches(name, list(table.by_name), n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else " `list` shows the tools."
        raise CliError(f"The endpoint has no tool named {name!r}.{hint}")
    return found
