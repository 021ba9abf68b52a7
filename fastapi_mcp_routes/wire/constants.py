"""Protocol constants: versions, header names, media types, JSON-RPC codes (limits are
options, in `options.py`)."""

from __future__ import annotations

from typing import Final

JSONRPC_VERSION: Final = "2.0"

# Session-era revisions, newest last. `initialize` echoes the client's version when it is one of
# these, else offers the newest (spec 2025-11-25, basic/lifecycle "Version Negotiation").
SESSION_ERA_VERSIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_SESSION_VERSION: Final = SESSION_ERA_VERSIONS[-1]
# Without an `MCP-Protocol-Version` header and no other way to tell, a server assumes the first
# Streamable-HTTP revision (spec 2025-06-18, basic/transports "Protocol Version Header").
FALLBACK_VERSION: Final = "2025-03-26"
# The first revision whose SSE streams carry event ids and can be resumed with Last-Event-ID.
RESUMABLE_VERSION: Final = "2025-11-25"
# The only revision in which a POST body may be a JSON-RPC batch.
BATCH_VERSION: Final = "2025-03-26"
ELICITATION_SINCE: Final = "2025-06-18"  # the first revision with elicitation/create

# HTTP header names, lower-case as ASGI carries them.
HEADER_SESSION_ID: Final = "mcp-session-id"
HEADER_PROTOCOL_VERSION: Final = "mcp-protocol-version"
HEADER_ORIGIN: Final = "origin"
HEADER_LAST_EVENT_ID: Final = "last-event-id"
# Our own ASGI scope key: the principal the endpoint's `auth` dependency returned.
PRINCIPAL_SCOPE_KEY: Final = "fastapi_mcp_routes.principal"
# 2026-07-28: a tool argument marked "x-mcp-header": "Region" also travels as Mcp-Param-Region.
PARAM_HEADER_PREFIX: Final = "mcp-param-"
HEADER_HOST: Final = "host"
HEADER_ACCEPT: Final = "accept"
HEADER_CONTENT_TYPE: Final = "content-type"
HEADER_CONTENT_LENGTH: Final = "content-length"
HEADER_AUTHORIZATION: Final = "authorization"
HEADER_COOKIE: Final = "cookie"

# Headers forwarded from the MCP caller to the route by default, besides Authorization and
# Cookie: the common API-key conventions.
DEFAULT_FORWARD_HEADERS: Final = ("x-api-key", "api-key", "x-auth-token")
# Headers never forwarded to a route: they describe the MCP transport, not the caller.
TRANSPORT_HEADERS: Final = frozenset(
    {
        HEADER_SESSION_ID,
        HEADER_PROTOCOL_VERSION,
        "last-event-id",
        "mcp-method",
        "mcp-name",
        HEADER_CONTENT_TYPE,
        HEADER_CONTENT_LENGTH,
        HEADER_ACCEPT,
    }
)

MEDIA_JSON: Final = "application/json"
MEDIA_SSE: Final = "text/event-stream"
MEDIA_FORM: Final = "application/x-www-form-urlencoded"
MEDIA_MULTIPART: Final = "multipart/form-data"

# JSON-RPC 2.0 error codes (jsonrpc.org/specification, "Error object").
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# A cancelled request, answered only where HTTP needs an answer (a JSON-only client's POST): the
# code LSP gives a cancelled request, as MCP names none (its spec wants no response at all).
REQUEST_CANCELLED: Final = -32800
# An unknown resource in the session era (spec 2025-11-25, server/resources "Error Handling");
# 2026-07-28 answers it -32602 with `data.uri` instead, and must not send -32002 (SEP-2164).
RESOURCE_NOT_FOUND: Final = -32002
# A call refused because the server runs as many as it may for this session, caller or in all:
# in JSON-RPC's implementation-defined server-error range, clear of the codes MCP and its SDKs
# use (-32000 to -32002, -32020 to -32022, -32042), and ending as HTTP's 429 does.
SERVER_BUSY: Final = -32029
# A request a route refused for a scope the token lacks, answered HTTP 403 with the step-up
# challenge; MCP names no code for it, so one beside SERVER_BUSY in the same range.
INSUFFICIENT_SCOPE: Final = -32030

# Tool names: 1-128 characters of [A-Za-z0-9_.-] (spec 2025-11-25, server/tools "Tool Names").
TOOL_NAME_PATTERN: Final = r"[A-Za-z0-9_.\-]{1,128}"

# Untrusted values (session ids, tool names from the wire) are cut to this length in logs and
# in the error texts that name them.
LOG_VALUE_MAX: Final = 32
# A client's own sentence echoed in an error (why it refused a question): enough to say why.
ECHOED_TEXT_MAX: Final = 200
# An error that names what the client sent (unknown arguments, failing fields) names this many
# and counts the rest, so its size does not grow with the request's.
ECHOED_NAMES_MAX: Final = 5
# Input-request keys the library owns (mutation confirmation); a route cannot use them.
RESERVED_KEY_PREFIX: Final = "fastapi-mcp-routes/"

# The 2026-07-28 tasks extension (SEP-2663): a client declares it to let a call become a task.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
