"""The resources feature, as the dispatcher serves it: reads, subscriptions, the two lists and
the notification of their changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.features import SESSION_ERA, Feature, ListChange, Listed, Listing, Method
from fastapi_mcp_routes.server.resources.methods import ResourceMethods
from fastapi_mcp_routes.tools.catalog.entries import RESOURCE_REF, Resource
from fastapi_mcp_routes.tools.registry import ToolTable

RESOURCES_LIST_CHANGED: Final = "notifications/resources/list_changed"
# Only a session remembers subscriptions; a 2026-07-28 client names its resources in
# `subscriptions/listen` instead.
_SESSIONS_ONLY: Final = frozenset({SESSION_ERA})


def resources_feature(methods: ResourceMethods) -> Feature:
    """Declare `resources/read`, `resources/subscribe`, `resources/unsubscribe`, and the lists."""
    return Feature(
        "resources",
        methods=(
            # A read runs the route as this caller: its result is the caller's alone.
            Method("resources/read", methods.read, private=True),
            Method("resources/subscribe", methods.subscribe, _SESSIONS_ONLY),
            Method("resources/unsubscribe", methods.unsubscribe, _SESSIONS_ONLY),
        ),
        listings=(
            Listing("resources/list", "resources", "resource", "resource", "uri", "URI", _resources, _resource_pages),
            Listing(
                "resources/templates/list",
                "resourceTemplates",
                "resourceTemplate",
                "resource template",
                "uriTemplate",
                "URI template",
                _templates,
                _pages,
                RESOURCE_REF,
            ),
        ),
        changes=(ListChange(RESOURCES_LIST_CHANGED, "resourcesListChanged", "resources", _generation),),
        capability=_capability,
    )


def _capability(table: ToolTable) -> Mapping[str, Any]:
    catalog = table.catalog
    return {"resources": {"subscribe": True, "listChanged": True}} if catalog.resources or catalog.templates else {}


def _resources(table: ToolTable) -> Sequence[Listed]:
    return [_listed(entry) for entry in sorted(table.catalog.resources.values(), key=lambda entry: entry.template.text)]


def _templates(table: ToolTable) -> Sequence[Listed]:
    return [_listed(entry) for entry in table.catalog.templates]


def _listed(entry: Resource) -> Listed:
    """A resource with its variables, as the route's schema describes them, for its arguments."""
    schema = entry.call.schema.input_schema
    properties = schema.get("properties", {})
    variables = {name: properties.get(name, {}) for name in entry.template.variables}
    arguments = {**schema, "properties": variables}
    return Listed(entry.definition, entry.access, entry.call, arguments)


def _resource_pages(table: ToolTable) -> tuple[Any, ...]:
    return table.catalog.resource_pages


def _pages(table: ToolTable) -> tuple[Any, ...]:
    return table.catalog.template_pages


def _generation(table: ToolTable) -> int:
    return table.resources_generation
