"""`check`: what the endpoint validates when the app starts, without starting it (no lifespan,
no server), so CI can refuse an app that would not start.

At startup the endpoint builds its tool table (`ToolRegistry.table()`): tool names and their
uniqueness, input and output schemas, resource URIs and template variables against the route's
parameters, prompts, completions and what they complete, URL arguments, task and stream marks.
A misdeclared route raises there, so it is an error here; the warnings it logs (URL arguments
that every call will refuse, say) are shown too, and do not fail the check.

Marked routes on a router the app never includes are not served (cli/unserved.py): a warning
naming each, and an error when the endpoint serves nothing at all, since "0 tools" from an app
that marks routes is a router left out, not a choice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi_mcp_routes.cli.endpoints import Endpoint
from fastapi_mcp_routes.cli.inventory import take_inventory
from fastapi_mcp_routes.cli.tables import summary
from fastapi_mcp_routes.cli.unserved import UnservedRoute, unserved_routes

_LIBRARY_LOGGER = "fastapi_mcp_routes"


@dataclass(frozen=True, slots=True)
class CheckReport:
    """What the startup validation said: every error and warning, and a summary when it passed."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    summary: str | None


def check_endpoint(endpoint: Endpoint, module_name: str) -> CheckReport:
    """Run the endpoint's startup validation, collecting what it raises and logs, and look for
    marked routes the app does not serve in the app's modules (`module_name` and its package)."""
    served = endpoint.served
    with _warnings_logged() as warnings:
        try:
            table = served.registry.table()
        except ValueError as exc:  # a misdeclared route: the message names it and the fix
            return CheckReport((str(exc),), tuple(warnings), None)
        except Exception as exc:
            return CheckReport((f"discovering the tools failed: {type(exc).__name__}: {exc}",), tuple(warnings), None)
        served.urls.log_startup(table.by_name.values())
    inventory = take_inventory(endpoint, table)
    unserved = unserved_routes(endpoint.app, module_name)
    if not unserved:
        return CheckReport((), tuple(warnings), summary(inventory))
    if not inventory.entries():
        return CheckReport((_serves_none(unserved),), tuple(warnings), None)
    return CheckReport((), (*warnings, _not_served(unserved)), summary(inventory))


def _not_served(unserved: tuple[UnservedRoute, ...]) -> str:
    routes = "; ".join(map(str, unserved))
    counted = "1 marked route" if len(unserved) == 1 else f"{len(unserved)} marked routes"
    return (
        f"{counted} on a router the app never includes, so not served: {routes}. "
        "Include the router: app.include_router(router)."
    )


def _serves_none(unserved: tuple[UnservedRoute, ...]) -> str:
    return f"the MCP endpoint serves no tool, resource or prompt, though the app marks routes. {_not_served(unserved)}"


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
