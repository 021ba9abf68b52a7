"""The endpoint's metrics: the two the MCP conventions define, and the library's counters."""

from __future__ import annotations

from typing import Any

from fastapi_mcp_routes.telemetry import names as n


class Instruments:
    """Every instrument, made once from the meter (a proxy until the app sets a provider)."""

    def __init__(self, meter: Any) -> None:
        buckets = list(n.DURATION_BUCKETS)
        self.operation_duration = meter.create_histogram(
            n.OPERATION_DURATION,
            unit="s",
            description="The duration of the MCP request or notification as observed on the receiver.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.session_duration = meter.create_histogram(
            n.SESSION_DURATION,
            unit="s",
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=buckets,
        )
        self.confirmations = meter.create_counter(
            n.CONFIRMATIONS,
            unit="{confirmation}",
            description="Confirmations of gated tool calls asked of the user, and declined.",
        )
        self.refusals = meter.create_counter(
            n.REFUSALS, unit="{refusal}", description="Requests refused at a bound, by the bound's option."
        )
        self.tasks = meter.create_counter(n.TASKS, unit="{task}", description="Tasks ended, by final status.")
        self.store_errors = meter.create_counter(
            n.STORE_ERRORS, unit="{error}", description="Requests the shared store could not serve."
        )
