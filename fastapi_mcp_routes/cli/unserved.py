"""Marked routes the app does not serve: routes marked as tools, resources, prompts or
completions on a router of the app's own modules that the app never includes.

The endpoint only ever sees the app's route table, so a router left out of it is not an error
there: the endpoint serves nothing of it. `check` looks for such routers in the modules the app
was imported from (the target's module and the other modules of its top-level package), the
places their authors keep them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from fastapi_mcp_routes.tools.catalog.marks import (
    COMPLETION_ATTRIBUTE,
    COMPLETION_EXTRA_KEY,
    PROMPT_ATTRIBUTE,
    PROMPT_EXTRA_KEY,
    RESOURCE_ATTRIBUTE,
    RESOURCE_EXTRA_KEY,
)
from fastapi_mcp_routes.tools.marking import ENDPOINT_ATTRIBUTE, OPENAPI_EXTRA_KEY

_MARK_ATTRIBUTES: Final = (ENDPOINT_ATTRIBUTE, RESOURCE_ATTRIBUTE, PROMPT_ATTRIBUTE, COMPLETION_ATTRIBUTE)
_MARK_EXTRA_KEYS: Final = (OPENAPI_EXTRA_KEY, RESOURCE_EXTRA_KEY, PROMPT_EXTRA_KEY, COMPLETION_EXTRA_KEY)


@dataclass(frozen=True, slots=True)
class UnservedRoute:
    """A marked route on a router the app does not include."""

    method: str
    path: str
    router: str  # `module.attribute`, where the router is kept

    def __str__(self) -> str:
        return f"{self.method} {self.path} (on {self.router})"


def unserved_routes(app: FastAPI, module_name: str) -> tuple[UnservedRoute, ...]:
    """The marked routes of routers kept in the app's modules whose endpoints the app serves
    under no route."""
    served = {id(_original(route).endpoint) for route in iter_route_contexts(app.routes) if _is_api_route(route)}
    found: dict[tuple[int, str], UnservedRoute] = {}
    for where, router in _routers(module_name):
        if router is app.router:
            continue
        for route in router.routes:
            if isinstance(route, APIRoute) and _marked(route) and id(route.endpoint) not in served:
                for method in sorted(route.methods or ()):
                    found.setdefault((id(route.endpoint), method), UnservedRoute(method, route.path, where))
    return tuple(found.values())


def _routers(module_name: str) -> Iterator[tuple[str, APIRouter]]:
    package = module_name.partition(".")[0]
    for name, module in list(sys.modules.items()):
        if module is None or not (name in (module_name, package) or name.startswith(package + ".")):
            continue
        for attribute, value in list(vars(module).items()):
            # Its type, not isinstance: that asks the object for `__class__`, which a
            # context-local proxy answers by raising, or a lazy object by setting itself up.
            if issubclass(type(value), APIRouter):
                yield f"{name}.{attribute}", value


def _marked(route: APIRoute) -> bool:
    extra: Mapping[str, Any] = route.openapi_extra or {}
    return any(hasattr(route.endpoint, name) for name in _MARK_ATTRIBUTES) or any(
        key in extra for key in _MARK_EXTRA_KEYS
    )


def _is_api_route(route: Any) -> bool:
    return isinstance(_original(route), APIRoute)


def _original(route: Any) -> Any:
    return getattr(route, "original_route", route)
