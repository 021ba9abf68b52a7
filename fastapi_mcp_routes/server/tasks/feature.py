"""The tasks extension (2026-07-28, SEP-2663), as the dispatcher serves it: its three methods,
and the extension offered in `server/discover` once a route may run as a task."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from fastapi_mcp_routes.server.features import STATELESS_ERA, Feature, Method
from fastapi_mcp_routes.server.tasks.methods import TaskMethods
from fastapi_mcp_routes.tools.registry import ToolTable
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION

# An extension of the stateless revision only; `tasks/result` and `tasks/list` of the
# 2025-11-25 draft are gone (-32601).
_STATELESS_ONLY: Final = frozenset({STATELESS_ERA})


def tasks_feature(methods: TaskMethods) -> Feature:
    """Declare `tasks/get`, `tasks/update` and `tasks/cancel`."""
    return Feature(
        "tasks",
        methods=(
            Method("tasks/get", methods.get, _STATELESS_ONLY),
            Method("tasks/update", methods.update, _STATELESS_ONLY),
            Method("tasks/cancel", methods.cancel, _STATELESS_ONLY),
        ),
        extensions=_extension,
    )


def _extension(table: ToolTable) -> Mapping[str, Any]:
    return {TASKS_EXTENSION: {}} if table.offers_tasks else {}
