"""What a tool whose calls must be confirmed looks like to a client: its extra argument and
where its pending answer carries the plan. The confirmation itself is decided in
`server/confirmation/gate.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fastapi_mcp_routes.wire.constants import RESERVED_KEY_PREFIX

# The argument a gated tool's inputSchema declares for the token. Optional, and nullable as
# pydantic writes an optional string: strict converters (OpenAI's strict tool calls) make every
# argument required, and a strict model then sends null, or "" where only a string is allowed;
# the server reads both as no token.
TOKEN_ARGUMENT: Final = "confirmationToken"
TOKEN_PROPERTY: Final[Mapping[str, Any]] = {
    "anyOf": [{"type": "string"}, {"type": "null"}],
    "description": (
        "Leave out, or send null or an empty string, on the first call: this tool changes data, so "
        "that call only returns a plan and a token. Pass the token here, with the same arguments, "
        "to run it."
    ),
}
# Where a pending call's answer carries its plan and token for programs, beside the text the
# model reads. The answer is an `isError` result, not a structured result of the tool: the tool's
# `outputSchema` stays the route's own, so clients that type results (FastMCP's `.data`) keep the
# route's type, and clients that validate `structuredContent` (the SDKs skip `isError` results)
# accept the pending answer. Models read it as "not done yet: do this, then retry".
PENDING_META_KEY: Final = RESERVED_KEY_PREFIX + "pending"


def gated_input_schema(input_schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A gated tool's inputSchema: the token is one more argument."""
    properties = input_schema.get("properties", {})
    if TOKEN_ARGUMENT in properties:
        raise ValueError(
            f"{where}: the argument {TOKEN_ARGUMENT!r} is taken by mutation confirmation; rename the "
            "route's parameter, or turn confirmation off for this tool with mcp_tool(confirm=False)"
        )
    return {**input_schema, "properties": {**properties, TOKEN_ARGUMENT: dict(TOKEN_PROPERTY)}}
