"""`prompts/get` and `completion/complete`.

A prompt's arguments arrive as strings and go to its route as the route's own path, query and
body fields, where its validation converts them (a 422 is answered -32602 naming the fields). The
route may ask the client questions (`ToolContext`): in 2026-07-28 the prompt then ends
`input_required`, as a tool call does.

Completion runs the route marked `mcp_completion` for the argument, with `value` and the other
arguments already given that the route takes; without one, an argument whose schema lists its
values (an enum, a `Literal`) is completed from them by prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi_mcp_routes.server.call import InputRequired
from fastapi_mcp_routes.server.channel import ClientChannel, Result
from fastapi_mcp_routes.server.route_call import RouteRunner, unusable
from fastapi_mcp_routes.tools.catalog.entries import COMPLETION_VALUE, PROMPT_REF, RESOURCE_REF, Catalog
from fastapi_mcp_routes.tools.catalog.results import UnusableResponse, completion, completion_values, prompt_result
from fastapi_mcp_routes.tools.registry import ToolRegistry
from fastapi_mcp_routes.wire.errors import InvalidParams
from fastapi_mcp_routes.wire.jsonrpc import Request, some, truncate


class PromptMethods:
    """Renders prompts and completes their arguments (and resource templates' variables)."""

    def __init__(self, *, registry: ToolRegistry, runner: RouteRunner) -> None:
        self._registry = registry
        self._runner = runner

    async def get(self, request: Request, channel: ClientChannel) -> Result:
        params = request.params
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("Invalid params: 'name' must be a string.")
        prompt = self._registry.table().catalog.prompts.get(name)
        if prompt is None:
            raise InvalidParams(f"Invalid params: unknown prompt {truncate(name)!r}.")
        arguments = _strings(params.get("arguments"), "arguments")
        unknown = [key for key in arguments if key not in prompt.call.schema.arguments]
        if unknown:
            raise InvalidParams(f"Invalid params: the prompt {name!r} takes no argument(s) {some(unknown)}.")
        missing = sorted(prompt.call.required.difference(arguments))
        if missing:
            raise InvalidParams(f"Invalid params: the prompt {name!r} needs the argument(s) {', '.join(missing)}.")
        ran = await self._runner.run(request, channel, prompt.call, arguments)
        if isinstance(ran, InputRequired):
            return ran.result
        try:
            return prompt_result(ran)
        except UnusableResponse as problem:
            raise unusable(prompt.call, problem) from None

    async def complete(self, request: Request, channel: ClientChannel) -> Result:
        params = request.params
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise InvalidParams("Invalid params: 'ref' and 'argument' must be objects.")
        name, value = argument.get("name"), argument.get("value")
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidParams("Invalid params: 'argument' needs a string 'name' and a string 'value'.")
        context = params.get("context")
        given = _strings(context.get("arguments") if isinstance(context, dict) else None, "context.arguments")
        catalog = self._registry.table().catalog
        key, choices = _target(catalog, ref, name)
        route = catalog.completions.get(key)
        if route is None:
            folded = value.casefold()
            return completion([choice for choice in choices if choice.casefold().startswith(folded)])
        arguments = {k: v for k, v in given.items() if k in route.schema.arguments and k != COMPLETION_VALUE}
        arguments[COMPLETION_VALUE] = value
        ran = await self._runner.run(request, channel, route, arguments)
        if isinstance(ran, InputRequired):
            # Completion has no input_required result (spec 2026-07-28): the route asked anyway.
            raise unusable(route, UnusableResponse("a completion route cannot ask the client questions"))
        try:
            return completion(completion_values(ran))
        except UnusableResponse as problem:
            raise unusable(route, problem) from None


def _target(catalog: Catalog, ref: Mapping[str, Any], argument: str) -> tuple[tuple[str, str, str], tuple[str, ...]]:
    """The completion key of the argument `ref` names, and its listed values."""
    kind = ref.get("type")
    if kind == PROMPT_REF:
        name = ref.get("name")
        prompt = catalog.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise InvalidParams(f"Invalid params: unknown prompt {truncate(name)!r}.")
        if argument not in prompt.call.schema.arguments:
            raise InvalidParams(f"Invalid params: the prompt {prompt.name!r} has no argument {truncate(argument)!r}.")
        return (PROMPT_REF, prompt.name, argument), prompt.choices.get(argument, ())
    if kind == RESOURCE_REF:
        uri = ref.get("uri")
        template = next((t for t in catalog.templates if t.template.text == uri), None)
        if template is None:
            raise InvalidParams(f"Invalid params: no resource template is {truncate(uri)!r}.")
        if argument not in template.template.variables:
            raise InvalidParams(
                f"Invalid params: the template {template.template.text!r} has no {truncate(argument)!r}."
            )
        return (RESOURCE_REF, template.template.text, argument), template.choices.get(argument, ())
    raise InvalidParams(f"Invalid params: 'ref.type' must be {PROMPT_REF!r} or {RESOURCE_REF!r}.")


def _strings(values: object, where: str) -> dict[str, str]:
    """Prompt arguments: an object of strings (spec, server/prompts)."""
    if values is None:
        return {}
    if not isinstance(values, dict) or not all(isinstance(value, str) for value in values.values()):
        raise InvalidParams(f"Invalid params: {where!r} must be an object of strings.")
    return values
