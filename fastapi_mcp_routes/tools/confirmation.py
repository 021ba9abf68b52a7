"""What a tool whose calls must be confirmed looks like to a client: its extra argument and
its two possible results. The confirmation itself is decided in `server/confirm.py`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# The argument a gated tool's inputSchema declares for the token.
TOKEN_ARGUMENT: Final = "confirmationToken"
TOKEN_PROPERTY: Final[Mapping[str, Any]] = {
    "type": "string",
    "description": (
        "Leave out on the first call: this tool changes data, so that call only returns a plan and "
        "a token. Pass the token here, with the same arguments, to run it."
    ),
}
# What a pending call's structuredContent holds; gated tools' outputSchema admits it.
PENDING_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "pending": {"const": True},
        "token": {"type": "string"},
        "plan": {
            "type": "object",
            "properties": {"method": {"type": "string"}, "path": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["method", "path", "arguments"],
        },
    },
    "required": ["pending", "token", "plan"],
}


def gated_input_schema(input_schema: Mapping[str, Any], where: str) -> dict[str, Any]:
    """A gated tool's inputSchema: the token is one more argument."""
    properties = input_schema.get("properties", {})
    if TOKEN_ARGUMENT in properties:
        raise ValueError(
            f"{where}: the argument {TOKEN_ARGUMENT!r} is taken by mutation confirmation; rename the "
            "route's parameter, or turn confirmation off for this tool with mcp_tool(confirm=False)"
        )
    return {**input_schema, "properties": {**properties, TOKEN_ARGUMENT: dict(TOKEN_PROPERTY)}}


def gated_output_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A gated tool's outputSchema: the route's result, or a pending confirmation."""
    own = {key: value for key, value in schema.items() if key not in ("$defs", "$schema")}
    union: dict[str, Any] = {key: schema[key] for key in ("$schema", "$defs") if key in schema}
    union.update({"type": "object", "anyOf": [own, dict(PENDING_SCHEMA)]})
    return union
