"""The names telemetry records under: the OpenTelemetry MCP conventions
(`open-telemetry/semantic-conventions-genai`, docs/gen-ai/mcp.md), and the library's own where
the conventions are silent, under its namespace."""

from __future__ import annotations

from typing import Final

INSTRUMENTATION_NAME: Final = "fastapi_mcp_routes"

# Attributes the conventions name (docs/registry/attributes/mcp.md and the registries it links).
MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
MCP_SESSION_ID: Final = "mcp.session.id"
MCP_RESOURCE_URI: Final = "mcp.resource.uri"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
CLIENT_ADDRESS: Final = "client.address"
CLIENT_PORT: Final = "client.port"
NETWORK_TRANSPORT: Final = "network.transport"
NETWORK_PROTOCOL_NAME: Final = "network.protocol.name"
NETWORK_PROTOCOL_VERSION: Final = "network.protocol.version"
ENDUSER_ID: Final = "enduser.id"

EXECUTE_TOOL: Final = "execute_tool"  # gen_ai.operation.name of a tool call, and only of one
TOOL_ERROR: Final = "tool_error"  # error.type of a CallToolResult with isError
OTHER_ERROR: Final = "_OTHER"  # error.type of a failure with no JSON-RPC code (the conventions' fallback)

# The library's own attributes.
ROUTE_METHOD: Final = "fastapi_mcp_routes.route.method"
ROUTE_PATH: Final = "fastapi_mcp_routes.route.path"  # the path template, never a filled path
OUTCOME: Final = "fastapi_mcp_routes.outcome"  # the audit's outcome (server/audit.py Outcome)
HTTP_STATUS: Final = "fastapi_mcp_routes.route.status"  # the route's HTTP status
TASK_ID: Final = "fastapi_mcp_routes.task.id"
TASK_STATUS: Final = "fastapi_mcp_routes.task.status"
CONFIRMATION: Final = "fastapi_mcp_routes.confirmation"  # asked, declined
BOUND: Final = "fastapi_mcp_routes.bound"  # the option a refusal names, e.g. Limits.max_sessions
STREAM_FRAMES: Final = "fastapi_mcp_routes.stream.frames"

# Metrics the conventions name, with their advisory bucket boundaries in seconds.
OPERATION_DURATION: Final = "mcp.server.operation.duration"
SESSION_DURATION: Final = "mcp.server.session.duration"
DURATION_BUCKETS: Final = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

# The library's own counters: what a team alerts on that the conventions leave open.
CONFIRMATIONS: Final = "fastapi_mcp_routes.confirmations"
REFUSALS: Final = "fastapi_mcp_routes.refusals"
TASKS: Final = "fastapi_mcp_routes.tasks"
STORE_ERRORS: Final = "fastapi_mcp_routes.store.errors"

# Span names of the library's own spans (a task's background run, a stream's sample).
TASK_RUN_SPAN: Final = "tasks/run"
STREAM_SAMPLE_SPAN: Final = "stream sample"

# How much of a value from the wire an attribute keeps: a tool or prompt name is at most 128
# characters (MCP), a resource URI is cut where a log line would cut it.
NAME_CHARS: Final = 128
URI_CHARS: Final = 512
# Recorded arguments and results are cut here: an exporter's batch must not grow with a response.
CONTENT_CHARS: Final = 8192
