"""Arguments and results on a span, for an app that opts in (`Telemetry.record_content`)."""

from __future__ import annotations

from typing import Any

from fastapi_mcp_routes.telemetry import names as n
from fastapi_mcp_routes.wire.json import dumps


def recorded(value: Any) -> str:
    """`value` as JSON text (spans take no objects), cut at `CONTENT_CHARS`."""
    try:
        text = dumps(value).decode()
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= n.CONTENT_CHARS else text[: n.CONTENT_CHARS] + "…"
