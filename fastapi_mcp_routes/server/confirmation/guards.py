"""Asking a route's own guards about a call before it is confirmed, and answering their refusal.

A gated call is confirmed before its route runs (server/confirmation/gate.py). Asked first, a caller the
route will refuse would approve a call (or be handed a token) only to get 401 or 403 after,
and anonymous callers could fill the token store with tokens for calls they can never make.
So before anyone is asked, the route's `guards` (tools/access.py: the schemes whose refusal is
a pure function of the request) are run on the request the route would get, in the order
FastAPI runs them. The first refusal is answered as the route answers it, through the app's
own exception handler, and nothing else runs: no question, no token, no route. A caller they
let through has the request validated next (server/confirmation/validation.py), as FastAPI
solves a route's security before it reports validation errors.

Why not skip the gate and let the route itself refuse: its guards would see the request only
after the app's middleware, and the path might reach an earlier route (`/items/mine` declared
before `/items/{item_id}`); either could let the call through, and it would run unconfirmed.
Asking the guards directly can only err toward refusing: a middleware that adds credentials the
caller did not send makes such a call refused here though its route would have accepted it.

A guard the app overrides (`app.dependency_overrides`, on it or on a dependency above it) is
not asked: the override decides instead, when the route runs.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.exception_handlers import http_exception_handler
from fastapi.security import SecurityScopes
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from fastapi_mcp_routes.auth.jwt import JWTBearer
from fastapi_mcp_routes.tools.access import Guard
from fastapi_mcp_routes.tools.invoke import Caller, CapturedResponse, build_request, call_app
from fastapi_mcp_routes.tools.recipe import Tool

logger = logging.getLogger("fastapi_mcp_routes")

# An exception handler as Starlette takes one: sync or async, returning a response.
Handler = Callable[[Request, Any], Any]


async def refusal(app: FastAPI, tool: Tool, arguments: Mapping[str, Any], caller: Caller) -> CapturedResponse | None:
    """The route's answer to this call when one of its guards refuses the caller (its 401 or
    403, as the app's exception handler makes it); `None` when none does."""
    guards = tool.access.guards if tool.access is not None else ()
    if not guards:
        return None
    scope, _ = build_request(tool, arguments, caller)
    request = Request(scope)
    refused = await first_refusal(guards, request, app.dependency_overrides)
    if refused is None:
        return None
    return await call_app(await handled(app, request, refused, http_exception_handler), scope, b"")


async def first_refusal(
    guards: Sequence[Guard], request: Request, overrides: Mapping[Any, Any]
) -> HTTPException | None:
    """The first refusal of the guards not overridden, run on `request`."""
    for guard in guards:
        if overrides and _overridden(guard, overrides):
            continue
        try:
            if isinstance(guard.scheme, JWTBearer):
                await guard.scheme(request, SecurityScopes(list(guard.scopes)))
            else:
                await guard.scheme(request)
        except HTTPException as refused:
            return refused
        except Exception:
            # Not a refusal we can answer for the route: the gate goes on, the route decides.
            logger.exception("a route's security scheme failed before its call was confirmed")
    return None


def _overridden(guard: Guard, overrides: Mapping[Any, Any]) -> bool:
    try:
        return guard.scheme in overrides or any(above in overrides for above in guard.above)
    except TypeError:  # an unhashable dependency (a dataclass instance): in doubt, not asked
        return True


async def handled(app: FastAPI, request: Request, error: Exception, default: Handler) -> Response:
    """The response the app's exception handler makes of `error`, looked up as Starlette does:
    by status code, then by exception class; `default` where the app has none."""
    handlers = app.exception_handlers
    handler = handlers.get(error.status_code) if isinstance(error, HTTPException) else None
    if handler is None:
        handler = next((handlers[cls] for cls in type(error).__mro__ if cls in handlers), default)
    if inspect.iscoroutinefunction(handler):
        response = await handler(request, error)
    else:
        response = await run_in_threadpool(handler, request, error)  # as Starlette runs it
    if inspect.isawaitable(response):  # an object whose __call__ is a coroutine function
        response = await response
    if not isinstance(response, Response):
        raise TypeError(f"the app's exception handler for {type(error).__name__} returned {response!r}")
    return response
