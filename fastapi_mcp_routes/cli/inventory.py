"""What an endpoint serves, as `list` shows it: every tool, resource, resource template and
prompt, whoever asks (visibility ignored), each with the route behind it.

`--json` prints `Inventory.as_json()`, whose shape is documented here and kept stable:

    {"endpoint": "/mcp",
     "tools": [{"tool": {...}, "route": {"method": "GET", "path": "/notes"},
                "confirmationRequired": false, "taskSupport": "never", "streaming": false,
                "hiddenFromAnonymous": false}, ...],
     "resources": [{"resource": {...}, "route": {...}, "hiddenFromAnonymous": false}, ...],
     "resourceTemplates": [{"resourceTemplate": {...}, "route": {...}, "hiddenFromAnonymous": false}, ...],
     "prompts": [{"prompt": {...}, "route": {...}, "hiddenFromAnonymous": false}, ...]}

`tool`, `resource`, `resourceTemplate` and `prompt` are the entries exactly as `tools/list`,
`resources/list`, `resources/templates/list` and `prompts/list` give them to a caller who may see
everything. `hiddenFromAnonymous`: the lists leave the entry out for a caller that sends no
credential (`list_visible_only`, the default); a call still runs the route's guards either way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from fastapi_mcp_routes.cli.endpoints import Endpoint
from fastapi_mcp_routes.server.features import Listed, Listing
from fastapi_mcp_routes.tools.access import Access
from fastapi_mcp_routes.tools.credentials import NoCredentials
from fastapi_mcp_routes.tools.registry import ToolTable

_DEFINITIONS_REF: Final = "#/$defs/"


@dataclass(frozen=True, slots=True)
class ListedArgument:
    """One argument of an entry: its name, its JSON type in short, and whether it is required."""

    name: str
    type: str
    required: bool


@dataclass(frozen=True, slots=True)
class Entry:
    """A tool, resource, resource template or prompt, with the route that serves it."""

    kind: str  # the key of its definition in the JSON: "tool", "resource", "resourceTemplate", "prompt"
    definition: Mapping[str, Any]
    method: str
    path: str
    arguments: tuple[ListedArgument, ...]
    hidden_from_anonymous: bool
    confirm: bool = False
    task: str = "never"
    stream: bool = False

    @property
    def name(self) -> str:
        return str(self.definition.get("name", ""))

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {self.kind: dict(self.definition), "route": {"method": self.method, "path": self.path}}
        if self.kind == "tool":
            shown.update(confirmationRequired=self.confirm, taskSupport=self.task, streaming=self.stream)
        shown["hiddenFromAnonymous"] = self.hidden_from_anonymous
        return shown


@dataclass(frozen=True, slots=True)
class Section:
    """The entries of one list the endpoint serves."""

    listing: Listing
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything one endpoint serves: a section per list its features declare."""

    path: str
    sections: tuple[Section, ...]
    completions: int

    def entries(self) -> tuple[Entry, ...]:
        return tuple(entry for section in self.sections for entry in section.entries)

    def as_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"endpoint": self.path}
        for section in self.sections:
            shown[section.listing.key] = [entry.as_json() for entry in section.entries]
        return shown


def take_inventory(endpoint: Endpoint, table: ToolTable) -> Inventory:
    """The inventory of `table`, the tool table of `endpoint`."""
    visible_only = endpoint.served.visible_only

    def hidden(access: Access | None) -> bool:
        # As the lists decide for a caller with no principal and no credential header.
        return visible_only and access is not None and not access.shown_to(None, _no_credential, NoCredentials())

    sections = tuple(
        Section(
            listing, tuple(_entry(listing.kind, listed, hidden(listed.access)) for listed in listing.entries(table))
        )
        for listing in endpoint.served.listings
    )
    return Inventory(endpoint.path, sections, len(table.catalog.completions))


def _no_credential() -> bool:
    return False


def _entry(kind: str, listed: Listed, hidden: bool) -> Entry:
    route = listed.route
    properties = listed.arguments.get("properties", {})
    arguments = _arguments(listed.arguments, properties)
    entry = Entry(kind, listed.definition, route.method, route.path_format, arguments, hidden)
    if kind != "tool":
        return entry
    return dataclasses.replace(entry, confirm=route.confirm, task=route.task, stream=route.stream)


def _arguments(schema: Mapping[str, Any], properties: Mapping[str, Any]) -> tuple[ListedArgument, ...]:
    required = set(schema.get("required", ()))
    definitions = schema.get("$defs", {})
    return tuple(
        ListedArgument(name, type_of(node, definitions), name in required) for name, node in properties.items()
    )


def type_of(node: Any, definitions: Mapping[str, Any]) -> str:
    """A JSON Schema in a few characters: `integer`, `array[string]`, `low|normal|high`,
    `string<date-time>`, `NoteIn`, `string|null`."""
    if not isinstance(node, Mapping):
        return "any"
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith(_DEFINITIONS_REF):
        target = definitions.get(reference.removeprefix(_DEFINITIONS_REF))
        if isinstance(target, Mapping) and "enum" not in target and isinstance(target.get("title"), str):
            return str(target["title"])
        return type_of(target, definitions)
    if isinstance(node.get("enum"), list):
        return "|".join(_literal(value) for value in node["enum"])
    if "const" in node:
        return _literal(node["const"])
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        return "|".join(dict.fromkeys(type_of(option, definitions) for option in options))
    kind = node.get("type")
    if isinstance(kind, list):
        return "|".join(str(each) for each in kind)
    if kind == "array":
        return f"array[{type_of(node.get('items'), definitions)}]"
    if kind == "object" and isinstance(node.get("title"), str):
        return str(node["title"])
    if isinstance(kind, str):
        return f"{kind}<{node['format']}>" if isinstance(node.get("format"), str) else kind
    return "any"


def _literal(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
