"""`check`: what the endpoint validates when the app starts, without starting it (no lifespan,
no server), so CI can refuse an app that would not start.

At startup the endpoint builds its tool table (`ToolRegistry.table()`): tool names and their
uniqueness, input and output schemas, resource URIs and template variables against the route's
parameters, prompts, completions and what they complete, URL arguments, task and stream marks.
A misdeclared route raises there, so it is an error here; the warnings it logs (URL arguments
that every call will refuse, say) are shown too, and do not fail the check.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi_mcp_routes.cli.endpoints import Endpoint
from fastapi_mcp_routes.cli.inventory import take_inventory
from fastapi_mcp_routes.cli.tables import summary

_LIBRARY_LOGGER = "fastapi_mcp_routes"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What the startup validation said: every error and warning, and a summary when it passed."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    summary: str | None


def check_endpoint(endpoint: Endpoint) -> CheckReport:
    """Run the endpoint's startup validation, collecting what it raises and logs."""
    served = endpoint.served
    with _warnings_logged() as warnings:
        try:
            table = served.registry.table()
        except ValueError as exc:  # a misdeclared route: the message names it and the fix
            return CheckReport((str(exc),), tuple(warnings), None)
        except Exception as exc:
            return CheckReport((f"discovering the tools failed: {type(exc).__name__}: {exc}",), tuple(warnings), None)
        served.urls.log_startup(table.by_name.values())
    return CheckReport((), tuple(warnings), summary(take_inventory(endpoint, table)))


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextmanager
def _warnings_logged() -> Iterator[list[str]]:
    """The library's warnings while the block runs, kept rather than printed by logging."""
    logger = logging.getLogger(_LIBRARY_LOGGER)
    collected: list[str] = []
    handler = _Collect(collected)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # else the root logger's last-resort handler prints them as well
    try:
        yield collected
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
