"""The HTTP side of a request to the endpoint: headers, media types, the body, its messages.

Each function is one named step of handling a POST, and refuses by raising `HttpError` with
the status and JSON-RPC error the spec names; the endpoint turns that into a response in one
place.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive

from fastapi_mcp_routes.server.envelope import is_modern
from fastapi_mcp_routes.tools.invoke import Caller, caller_from_scope
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import HttpError, InvalidRequest, McpError
from fastapi_mcp_routes.wire.json import loads
from fastapi_mcp_routes.wire.jsonrpc import (
    Message,
    ParamsNotObject,
    RequestId,
    classify,
    classify_one,
    request_id_of,
)

# What a refusal at a bound tells a client to wait: long enough for idle sessions, streams or
# questions to end, short enough for an agent waiting on a person.
RETRY_AFTER_S: Final = 30
# A shared store that cannot be reached is asked again by the client after this long.
STORE_RETRY_AFTER_S: Final = 2
# A call refused because too many run (Limits.max_calls*): running calls end within seconds.
BUSY_RETRY_AFTER_S: Final = 2
_JSON_TYPES: Final = frozenset({c.MEDIA_JSON, "application/*", "*/*"})
_SSE_TYPES: Final = frozenset({c.MEDIA_SSE, "text/*", "*/*"})


@dataclass(frozen=True, slots=True)
class Accepts:
    json: bool
    sse: bool


@dataclass(slots=True)
class Parsed:
    """A POST body, decoded and classified. Made for every POST: not frozen (see
    wire/jsonrpc.py `Request`); never changed."""

    messages: list[Message | McpError]
    batch: bool
    ids: list[RequestId | None]  # the request id of each entry, for errors
    methods: list[str | None]  # the method each entry names, if any
    first: Any  # the first message as decoded, before classification


Headers = Mapping[str, str]


@dataclass(slots=True)
class Posted:
    """What a POST says and who sent it, read in one step (`read_post`). Made for every POST:
    not frozen; never changed."""

    accepts: Accepts
    parsed: Parsed
    modern: bool  # a 2026-07-28 request: no session, everything in the request
    identity: bytes  # the caller's credentials, canonical (`caller_identity`)
    address: str  # the client's address (`client_address`)
    principal: Any  # what the endpoint's `auth` returned, if anything
    caller: Caller  # what the route's own request inherits


async def read_post(
    request: Request,
    headers: Headers,
    *,
    max_body_bytes: int,
    max_batch_length: int,
    credential_headers: frozenset[bytes],
    forward_headers: frozenset[bytes],
) -> Posted:
    """A POST's media types checked, its body read within its cap, its messages decoded and
    classified, and its caller's facts: the steps in order, each refusing with `HttpError`."""
    accepts = check_media_types(headers)
    parsed = parse(await read_body(request, headers, max_body_bytes), max_batch_length)
    scope = request.scope
    identity = caller_identity(request, credential_headers)
    address = client_address(request)
    principal = scope.get(c.PRINCIPAL_SCOPE_KEY)
    return Posted(
        accepts,
        parsed,
        is_modern(headers.get(c.HEADER_PROTOCOL_VERSION), parsed.first),
        identity,
        address,
        principal,
        caller_from_scope(scope, forward_headers),
    )


def check_media_types(headers: Headers) -> Accepts:
    content_type = headers.get(c.HEADER_CONTENT_TYPE) or ""
    if content_type.split(";", 1)[0].strip().lower() != c.MEDIA_JSON:
        raise HttpError(415, InvalidRequest("Unsupported Media Type: the body must be application/json."))
    accepts = _accepts(headers.get(c.HEADER_ACCEPT) or "")
    if not (accepts.json or accepts.sse):
        raise HttpError(406, InvalidRequest("Not Acceptable: accept application/json or text/event-stream."))
    return accepts


def accepts_sse(headers: Headers) -> bool:
    return _accepts(headers.get(c.HEADER_ACCEPT) or "").sse


@functools.lru_cache(maxsize=64)  # clients send the same few Accept values; bounded
def _accepts(accept: str) -> Accepts:
    accepted = _accepted_types(accept)
    return Accepts(json=not accepted.isdisjoint(_JSON_TYPES), sse=not accepted.isdisjoint(_SSE_TYPES))


def _accepted_types(accept: str) -> set[str]:
    """The media ranges an Accept header allows, leaving out those given `q=0`."""
    accepted = set()
    for part in accept.split(","):
        media_range, _, parameters = part.partition(";")
        refused = any(
            p.strip().replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in parameters.split(";")
        )
        if not refused:
            accepted.add(media_range.strip().lower())
    return accepted


class FreshRequest(Request):
    """The request of the endpoint served as a plain route (transport/plain_routes.py): no
    framework layer and no dependency has read its body, so it is read from the ASGI messages
    directly, without `Request.stream()`'s async generator (`benchmarks/profile_tool_call.py`
    under callgrind shows the saving). The middleware before it see only ASGI messages: one
    that read the body hands it on as messages too."""


async def read_body(request: Request, headers: Headers, limit: int) -> bytes:
    """The body, never buffering more than `limit` bytes."""
    if _declares_more_than(headers.get(c.HEADER_CONTENT_LENGTH) or "", limit):
        raise _too_large(limit)
    if type(request) is FreshRequest:
        return await _read_messages(request.receive, limit)
    # Through `Request.stream()`, not the ASGI messages: a dependency guarding the endpoint may
    # have read the body already (a signature check), and only the request knows it has it.
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)  # stop reading: never buffer more than the cap
        chunks.append(chunk)
    return b"".join(chunks)


def _declares_more_than(declared: str, limit: int) -> bool:
    """Whether a Content-Length of ASCII digits says more than `limit`. Anything else is no
    length to trust, and the body is capped as it is read. `str.isdigit` alone would take
    "²" and `int` would then raise, as it does past 4,300 digits: uvicorn refuses both
    before the app, but another server or an ASGI caller may pass them on (a 500 before)."""
    if not (declared.isascii() and declared.isdigit()):
        return False
    digits = declared.lstrip("0")
    return len(digits) > len(str(limit)) or int(digits or "0") > limit


async def _read_messages(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)  # stop reading: never buffer more than the cap
        if not message.get("more_body", False):
            if not chunks:
                return bytes(chunk)
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def _too_large(limit: int) -> HttpError:
    return HttpError(413, InvalidRequest(f"Payload Too Large: the body may be at most {limit} bytes."))


def parse(body: bytes, max_batch_length: int) -> Parsed:
    """Decode and classify the messages; a batch keeps the errors of its bad entries."""
    try:
        value: Any = loads(body)
    except McpError as error:
        raise HttpError(400, error) from None
    if not isinstance(value, list):
        return _parse_one(value)
    values: list[Any] = value
    if not values:
        raise HttpError(400, InvalidRequest("Invalid Request: an empty batch."))
    if len(values) > max_batch_length:
        too_long = f"Invalid Request: a batch may hold at most {max_batch_length} messages (Limits.max_batch_length)"
        raise HttpError(400, InvalidRequest(f"{too_long}; this one holds {len(values)}."))
    messages: list[Message | McpError] = []
    for item in values:
        try:
            messages.append(classify(item))
        except ParamsNotObject as error:
            messages.append(error)
        except McpError as error:
            messages.append(error)
    methods = [item.get("method") if isinstance(item, dict) else None for item in values]
    return Parsed(messages, True, [request_id_of(item) for item in values], methods, values[0])


def _parse_one(value: Any) -> Parsed:
    """A POST of one message, the common case, without the batch's loops and lists
    (`benchmarks/profile_tool_call.py` under callgrind shows the saving)."""
    message, request_id = classify_one(value)
    if isinstance(message, McpError) and not isinstance(message, ParamsNotObject):
        raise HttpError(400, message, request_id=request_id)
    # `classify` took it, so it is an object.
    return Parsed([message], False, [request_id], [value.get("method")], value)


def caller_identity(request: Request, credential_headers: frozenset[bytes]) -> bytes:
    """Who the caller is, for binding sessions, request states and tokens: the principal that
    `auth` returned (subject, plus tenant where it has one), else the credential headers,
    sorted (without Cookie: clients keep whatever cookies the app sets)."""
    principal = request.scope.get(c.PRINCIPAL_SCOPE_KEY)
    if principal is not None:
        subject = getattr(principal, "subject", None) or getattr(principal, "sub", None) or str(principal)
        tenant = getattr(principal, "tenant", None) or ""
        return b"principal\x00" + str(subject).encode() + b"\x00" + str(tenant).encode()
    return b"\x00".join(sorted(k + b"=" + v for k, v in request.scope["headers"] if k in credential_headers))


def client_address(request: Request) -> str:
    """The client's address as the server sees it (behind a proxy, run uvicorn with
    `--proxy-headers` so this is the client's, not the proxy's)."""
    client = request.scope.get("client")
    return str(client[0]) if client else ""
