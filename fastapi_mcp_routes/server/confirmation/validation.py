"""Validating a gated call's request with its route's own models before anyone is asked.

A user asked to approve a call its route then refuses with 422 learns to approve without
reading, and a model handed a token for such a call spends a round trip on nothing. So after
the route's guards (server/confirmation/guards.py), and before a question or a token, the request
the route would get (tools/invoke.py `build_request`) is validated as FastAPI validates it: the
path, query, header, cookie and body parameters of the route and of every dependency, with their
types and constraints (tools/request_models.py), by FastAPI's own `request_params_to_args` and
`request_body_to_args`. No dependency is called. Errors are answered as the route answers them,
through the app's handler for `RequestValidationError`.

What only the route can know (a missing item's 404, a check in a dependency's body) comes after
confirmation, as before. The check only errs toward letting a call be asked: a dependency the
app overrides is not validated (its override may take other parameters), nor a request whose
path the route would not match; it errs the other way for a middleware that adds what the route
requires, such as a header the caller did not send.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from pydantic_core import PydanticUndefined
from starlette.requests import Request
from starlette.routing import Match
from starlette.types import Message

from fastapi_mcp_routes.server.confirmation.guards import handled
from fastapi_mcp_routes.tools.invoke import Caller, CapturedResponse, build_request, call_app
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.request_models import Fields, RequestModels

logger = logging.getLogger("fastapi_mcp_routes")


async def invalid(app: FastAPI, tool: Tool, arguments: Mapping[str, Any], caller: Caller) -> CapturedResponse | None:
    """The route's answer (its 422, as the app's handler makes it) when its models refuse this
    call's request; `None` when they accept it, or cannot tell."""
    models = tool.models
    if models is None:
        return None
    scope, body = build_request(tool, arguments, caller)
    matched, child = models.route.matches(scope)
    if matched is Match.NONE:
        return None
    scope["path_params"] = child.get("path_params", {})

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    request = Request(scope, receive)
    try:
        received = await _body(request, body, models)
        errors = await _errors(request, received, models, app.dependency_overrides)
    except Exception:
        # Not a refusal we can answer for the route (a validator that crashed): the gate goes
        # on, and the route decides once the call is confirmed.
        logger.exception("a route's request models failed before its call was confirmed")
        return None
    if not errors:
        return None
    refused = RequestValidationError(errors, body=None if received is PydanticUndefined else received)
    return await call_app(await handled(app, request, refused, request_validation_exception_handler), scope, b"")


async def _body(request: Request, body: bytes, models: RequestModels) -> Any:
    """The body as the route reads it: a form, or the JSON the call's arguments became."""
    if models.form_body:
        form = await request.form()
        await form.close()
        return form
    return json.loads(body) if body else PydanticUndefined


async def _errors(request: Request, body: Any, models: RequestModels, overrides: Mapping[Any, Any]) -> list[Any]:
    errors: list[Any] = []
    for fields in models.fields:
        if overrides and _overridden(fields, overrides):
            continue
        errors += request_params_to_args(fields.path, request.path_params)[1]
        errors += request_params_to_args(fields.query, request.query_params)[1]
        errors += request_params_to_args(fields.header, request.headers)[1]
        errors += request_params_to_args(fields.cookie, request.cookies)[1]
        if fields.body:
            errors += (await request_body_to_args(list(fields.body), body, models.embed_body))[1]
    return errors


def _overridden(fields: Fields, overrides: Mapping[Any, Any]) -> bool:
    try:
        return any(call in overrides for call in fields.above)
    except TypeError:  # an unhashable dependency (a dataclass instance): in doubt, not validated
        return True
