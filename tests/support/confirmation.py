"""Reading a gated call's pending answer: the plan and the token a confirmation needs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp import types

from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY


def pending_of(result: Mapping[str, Any]) -> dict[str, Any]:
    """The plan and token of a gated call's pending answer: an `isError` result with no
    structured content (the tool's outputSchema is the route's own), carrying them in `_meta`."""
    assert result.get("isError") is True, result
    assert "structuredContent" not in result, result
    pending: dict[str, Any] = result["_meta"][PENDING_META_KEY]
    assert pending["pending"] is True
    (block,) = result["content"]  # what the model reads: what to do, then the plan as JSON
    how, plan = block["text"].rsplit("\n", 1)
    assert f"confirmationToken={pending['token']!r}" in how
    assert json.loads(plan) == pending
    return pending


def sdk_pending_of(result: types.CallToolResult) -> dict[str, Any]:
    """`pending_of` for the official SDK client's result: what a program reads the token from."""
    return pending_of(result.model_dump(by_alias=True, exclude_none=True))


def is_pending(result: Mapping[str, Any]) -> bool:
    """Whether a gated call's answer is its pending plan (an `isError` result too), not a refusal."""
    return PENDING_META_KEY in result.get("_meta", {})
