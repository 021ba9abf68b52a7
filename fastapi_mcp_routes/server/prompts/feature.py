"""The prompts feature, as the dispatcher serves it: `prompts/get`, `completion/complete`, the
prompt list and the notification of its changes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from fastapi_mcp_routes.server.features import Feature, ListChange, Listed, Listing, Method
from fastapi_mcp_routes.server.prompts.methods import PromptMethods
from fastapi_mcp_routes.tools.catalog.entries import PROMPT_REF, Prompt
from fastapi_mcp_routes.tools.registry import ToolTable

PROMPTS_LIST_CHANGED: Final = "notifications/prompts/list_changed"


def prompts_feature(methods: PromptMethods) -> Feature:
    """Declare `prompts/get`, `completion/complete` and `prompts/list`."""
    return Feature(
        "prompts",
        methods=(Method("prompts/get", methods.get), Method("completion/complete", methods.complete)),
        listings=(
            Listing("prompts/list", "prompts", "prompt", "prompt", "name", "Prompt", _prompts, _pages, PROMPT_REF),
        ),
        changes=(ListChange(PROMPTS_LIST_CHANGED, "promptsListChanged", "prompts", _generation),),
        capability=_capability,
    )


def _capability(table: ToolTable) -> Mapping[str, Any]:
    catalog = table.catalog
    offered: dict[str, Any] = {}
    if catalog.prompts:
        offered["prompts"] = {"listChanged": True}
    if catalog.completes:
        offered["completions"] = {}
    return offered


def _prompts(table: ToolTable) -> Sequence[Listed]:
    return [_listed(prompt) for prompt in table.catalog.prompts.values()]


def _listed(prompt: Prompt) -> Listed:
    # Prompt arguments travel as strings (the route's own validation converts them).
    declared = prompt.definition.get("arguments", ())
    arguments = {
        "type": "object",
        "properties": {str(argument["name"]): {"type": "string"} for argument in declared},
        "required": [str(argument["name"]) for argument in declared if argument.get("required")],
    }
    return Listed(prompt.definition, prompt.access, prompt.call, arguments)


def _pages(table: ToolTable) -> tuple[Any, ...]:
    return table.catalog.prompt_pages


def _generation(table: ToolTable) -> int:
    return table.prompts_generation
