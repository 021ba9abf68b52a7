"""The stateless revision (2026-07-28): per-request envelope, routing headers, result shape.

Every request carries its protocol version and the client's capabilities in `params._meta`;
the `MCP-Protocol-Version`, `Mcp-Method` and (for named methods) `Mcp-Name` headers must agree
with the body. Checks run in the order the official SDK uses, and the first failure wins
(spec 2026-07-28, basic/transports/streamable-http and basic/versioning). Results carry
`resultType`, the server's identity in `_meta`, and cache hints on cacheable lists.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.server.call import LOG_LEVELS
from fastapi_mcp_routes.wire import constants as c
from fastapi_mcp_routes.wire.errors import HeaderMismatch, InvalidParams, McpError, UnsupportedProtocolVersion
from fastapi_mcp_routes.wire.fields import field_value
from fastapi_mcp_routes.wire.json import RawJSON, dumps, loads
from fastapi_mcp_routes.wire.jsonrpc import Request, truncate

MODERN_VERSIONS: Final = ("2026-07-28",)
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
HEADER_METHOD: Final = "mcp-method"
HEADER_NAME: Final = "mcp-name"
# As the ASGI scope names them: lower-case bytes, compared without decoding every header.
_ROUTING_HEADERS: Final = frozenset(name.encode() for name in (c.HEADER_PROTOCOL_VERSION, HEADER_METHOD, HEADER_NAME))
_PARAM_HEADER_PREFIX: Final = c.PARAM_HEADER_PREFIX.encode()
# The parameter that Mcp-Name must repeat, for the methods that have one.
NAME_PARAMS: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # The tasks extension's methods name their task (SEP-2663, "Routing Headers").
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
# Methods whose Mcp-Name may be left out: the core revision requires it only for tools/call,
# resources/read and prompts/get; SEP-2663 asks the client for it on tasks/*, but every
# process here reads a task from the store, so a poll without it is served. One that names
# another task is still refused (-32020): a balancer would have routed it by the wrong id.
NAME_OPTIONAL: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
# Results a client may cache; they carry `ttlMs` and `cacheScope` (server/utilities/caching).
CACHEABLE: Final = frozenset(
    {
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
        "resources/read",
        "skills/list",
        "skills/get",
    }
)
# Lists change only when the app's routes change, which a listener hears about at once; a read
# is the route's answer now, and a subscription says when it changes.
LIST_TTL_MS: Final = 0
_KEPT_PAGES: Final = 16  # shaped tools/list pages kept
_BASE64_SENTINEL: Final = ("=?base64?", "?=")
_INTEGER: Final = re.compile(r"-?(0|[1-9][0-9]*)")
# HTTP statuses of JSON-RPC errors in this revision (spec: -32601 MUST be 404).
_STATUS: Final = {-32700: 400, -32600: 400, -32602: 400, -32020: 400, -32021: 400, -32022: 400, -32601: 404}


@dataclass(slots=True)
class Envelope:
    """What a 2026-07-28 request says about itself in `params._meta`. Made for every request:
    not frozen (see wire/jsonrpc.py `Request`); never changed."""

    version: str
    capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    param_headers: Mapping[str, str]  # the Mcp-Param-* headers, by lower-case name


def is_modern(version_header: str | None, first: Any) -> bool:
    """Whether a POST speaks the stateless revision: its header or its envelope says so."""
    if version_header in MODERN_VERSIONS:
        return True
    params = first.get("params") if isinstance(first, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


def status_for(error: McpError) -> int:
    return _STATUS.get(error.code, 200)


def check_request(request: Request, raw_headers: Iterable[tuple[bytes, bytes]]) -> Envelope:
    """Validate a request's envelope and routing headers; raises the error the spec names.

    `raw_headers`: the ASGI scope's header list (lower-case names), read in one pass."""
    headers: dict[str, str] = {}
    param_headers: dict[str, str] = {}
    for key, raw in raw_headers:
        # Only the headers looked at are decoded (a tool call sends about ten).
        if key in _ROUTING_HEADERS:
            name = key.decode("latin-1")
            if name in headers:
                # Two copies could route differently in a proxy and here: refused, as the SDK does.
                raise HeaderMismatch(f"Header mismatch: {name} appears more than once.")
            headers[name] = field_value(raw)
        elif key.startswith(_PARAM_HEADER_PREFIX):
            param_headers[key.decode("latin-1")] = field_value(raw)
    meta = request.params.get("_meta")
    if not isinstance(meta, dict) or META_VERSION not in meta or META_CAPABILITIES not in meta:
        raise InvalidParams(f"Invalid params: params._meta must carry {META_VERSION!r} and {META_CAPABILITIES!r}.")
    version = meta[META_VERSION]
    if headers.get(c.HEADER_PROTOCOL_VERSION) != version:
        raise HeaderMismatch("Header mismatch: MCP-Protocol-Version does not match the request's protocol version.")
    if headers.get(HEADER_METHOD) != request.method:
        raise HeaderMismatch("Header mismatch: Mcp-Method does not match the request's method.")
    _check_name(request, headers.get(HEADER_NAME))
    if not isinstance(version, str):
        raise InvalidParams("Invalid params: the protocol version must be a string.")
    if version not in MODERN_VERSIONS:
        raise UnsupportedProtocolVersion(
            "Unsupported protocol version", {"supported": list(MODERN_VERSIONS), "requested": truncate(version)}
        )
    capabilities = meta[META_CAPABILITIES]
    if not isinstance(capabilities, dict):
        raise InvalidParams(f"Invalid params: {META_CAPABILITIES!r} must be an object.")
    client_info = meta.get(META_CLIENT_INFO)
    level = meta.get(META_LOG_LEVEL)
    return Envelope(
        version,
        capabilities,
        client_info if isinstance(client_info, dict) else None,
        level if level in LOG_LEVELS else None,  # an unknown level is as good as none
        param_headers,
    )


def _check_name(request: Request, sent: str | None) -> None:
    name_param = NAME_PARAMS.get(request.method)
    if name_param is None or (sent is None and request.method in NAME_OPTIONAL):
        return
    if _decoded(sent) != request.params.get(name_param):
        raise HeaderMismatch(f"Header mismatch: Mcp-Name does not match the request's {name_param!r}.")


def check_param_headers(
    header_params: tuple[tuple[str, str, str], ...], arguments: Mapping[str, Any], sent: Mapping[str, str]
) -> None:
    """Each argument a tool mirrors in a header must arrive in both places, and agree
    (spec 2026-07-28, basic/transports/streamable-http, "Custom Headers")."""
    for argument, header, kind in header_params:
        value = arguments.get(argument)
        raw = sent.get(header)
        if value is None and raw is None:
            continue
        if value is None or raw is None:
            raise HeaderMismatch(f"Header mismatch: {header} and the argument {argument!r} must come together.")
        decoded = _decoded(raw)
        if decoded is None or not _same_value(decoded, value, kind):
            raise HeaderMismatch(f"Header mismatch: {header} does not match the argument {argument!r}.")


def _same_value(header: str, value: Any, kind: str) -> bool:
    if kind == "integer" and isinstance(value, int) and not isinstance(value, bool):
        # Exact, on the canonical decimal form: no floats, exponents or padding.
        return _INTEGER.fullmatch(header) is not None and int(header) == value
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    return header == str(value)


def _decoded(value: str | None) -> str | None:
    """A header value, with the base64 form for values that are not plain ASCII decoded."""
    start, end = _BASE64_SENTINEL
    if value is None or not (value.startswith(start) and value.endswith(end)):
        return value
    encoded = value[len(start) : -len(end)]
    try:
        raw = base64.b64decode(encoded, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None  # matches nothing in the body
    # Only the canonical encoding counts, so one value has one header form.
    return text if base64.b64encode(raw).decode("ascii") == encoded else None


class ResultShaper:
    """Adds what every 2026-07-28 result carries.

    A pre-encoded `tools/list` page is shaped once and kept, since encoding a large page again
    would cost more than a whole warm list may (docs/benchmarks.md, "Figures behind the
    code's speed choices"). Pages are new objects whenever the tools change, so a handful of
    kept pages is always enough."""

    def __init__(self, server_info: Mapping[str, Any]) -> None:
        self._meta = {META_SERVER_INFO: dict(server_info)}
        self._encoded: OrderedDict[tuple[str, str, RawJSON], RawJSON] = OrderedDict()

    def shape(
        self, method: str, result: Mapping[str, Any] | RawJSON, cache_scope: str = "public"
    ) -> RawJSON | dict[str, Any]:
        """The result as the stateless revision sends it (a pre-encoded page stays encoded)."""
        if isinstance(result, RawJSON):
            key = (method, cache_scope, result)
            shaped_page = self._encoded.get(key)
            if shaped_page is None:
                shaped_page = self._encoded[key] = RawJSON(dumps(self.shape(method, loads(result.data), cache_scope)))
                if len(self._encoded) > _KEPT_PAGES:
                    self._encoded.popitem(last=False)
            return shaped_page
        shaped: dict[str, Any] = {"resultType": "complete", **result}
        if method in CACHEABLE and shaped.get("resultType") == "complete":
            shaped.setdefault("ttlMs", LIST_TTL_MS)
            shaped.setdefault("cacheScope", cache_scope)
        shaped["_meta"] = {**shaped.get("_meta", {}), **self._meta}
        return shaped
