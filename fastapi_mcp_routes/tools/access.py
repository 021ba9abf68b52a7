"""What a tool's route asks of its caller: read once from its dependency tree, side-effect-free.

Two readers need it, and need different strengths of it:
- `tools/list` may hide a tool its caller statically cannot use (`Access.shown_to`): a hint,
  allowed to be wrong, since visibility is never authorization: every call still runs every
  guard of its route. A route behind any security scheme, `JWTBearer` or `@auth_guard` "needs
  auth" and is hidden from a caller with none; a `visible` predicate narrows it further (given
  the caller's principal, and where it takes them the caller's credentials as the app's pure
  schemes read them: tools/credentials.py). Scopes the caller's token lacks do not hide a tool:
  its client can authorize again for them when the call is refused (the step-up challenge), and
  the list names them in the entry's `_meta` (tools/scopes.py).
- the confirmation gate must not ask a user to approve a call its route will refuse, nor hand
  such a caller a token; and it must never let a call run unconfirmed. That needs certainty,
  which those facts do not give: a scheme with `auto_error=False` or an `@auth_guard` may let
  an anonymous caller in, a `Cookie` may carry the credential, the scopes of the endpoint's
  principal need not be those of the token the route reads, and `visible` is no guard at all.
  So the gate asks the route's `guards` instead (server/confirmation/guards.py): the schemes whose refusal
  is a pure function of the request (`PURE_SCHEMES`), each with the scopes FastAPI hands it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from fastapi.security.base import SecurityBase

from fastapi_mcp_routes.auth.jwt import JWTBearer
from fastapi_mcp_routes.tools.credentials import PURE_SCHEMES, Credentials
from fastapi_mcp_routes.tools.marking import is_auth_guard
from fastapi_mcp_routes.tools.visibility import Visibility, read_visible

logger = logging.getLogger("fastapi_mcp_routes")


@dataclass(frozen=True, slots=True)
class Guard:
    """A scheme in a route's dependencies whose refusal is a pure function of the request."""

    scheme: Any
    scopes: tuple[str, ...]  # the `SecurityScopes` FastAPI hands it (a JWTBearer checks them)
    above: tuple[Any, ...]  # the dependencies it sits under: overriding one replaces it too


@dataclass(frozen=True, slots=True)
class Access:
    """What a caller statically needs of a tool's route; read once from the route."""

    needs_auth: bool  # a security scheme, a JWTBearer or a dependency marked as auth
    scopes: frozenset[str]  # Security(..., scopes=[...]) anywhere in its dependencies
    visible: Visibility | None  # mcp_tool(visible=...)
    guards: tuple[Guard, ...] = ()  # in the order FastAPI runs them
    # What the explorer names the credentials by: each scheme's OpenAPI name, "JWTBearer", or
    # an `@auth_guard` dependency's function name; in the order FastAPI runs them.
    schemes: tuple[str, ...] = ()

    def shown_to(self, principal: Any, presents_credential: Callable[[], bool], credentials: Credentials) -> bool:
        """Whether `tools/list` shows the tool to this caller: a hint, never a refusal.
        `presents_credential` is asked only when the answer depends on it; `credentials` are
        looked up only by a `visible` predicate that takes them."""
        if self.visible is not None:
            try:
                return self.visible.shows(principal, credentials)
            except Exception:
                logger.exception("a tool's visible predicate failed; the tool is not listed")
                return False
        if not self.needs_auth:
            return True
        if principal is None:
            # Without auth=, no principal is known: a caller that presents no credential at
            # all statically cannot use a tool that needs one.
            return presents_credential()
        # A principal lacking the route's scopes still sees it: the call's 403 names them, and
        # its client may step up (authorize again for them) and retry.
        return True


def access_of(route: Any, visible: Callable[..., Any] | None) -> Access | None:
    """The route's access facts, from its dependency tree and the author's `visible`
    predicate (checked when the route was marked); `None` when anyone may see it."""
    needs_auth = False
    scopes: set[str] = set()
    guards: list[Guard] = []
    schemes: dict[str, None] = {}
    # Depth first, in declaration order: the order in which FastAPI calls the leaves.
    pending: list[tuple[Any, tuple[Any, ...]]] = [(route.dependant, ())]
    while pending:
        node, above = pending.pop()
        call = node.call
        if isinstance(call, (SecurityBase, JWTBearer)) or is_auth_guard(call):
            needs_auth = True
            schemes[_scheme_name(call)] = None
            # Its own scopes and those of the dependencies it sits under: FastAPI's documented
            # pattern asks `Security(current_user, scopes=[...])` of a function reading the scheme.
            scopes.update(_security_scopes(node))
        if type(call) in PURE_SCHEMES:
            guards.append(Guard(call, _security_scopes(node), above))
        below = (*above, call) if call is not None else above
        pending.extend((child, below) for child in reversed(node.dependencies))
    if not needs_auth and visible is None:
        return None
    shown = read_visible(visible, route.path, "route")
    return Access(needs_auth, frozenset(scopes), shown, _unique(guards), tuple(schemes))


def _scheme_name(call: Any) -> str:
    if isinstance(call, SecurityBase):
        return str(call.scheme_name)
    if isinstance(call, JWTBearer):
        return type(call).__name__
    return str(getattr(call, "__name__", type(call).__name__))


def _security_scopes(node: Any) -> tuple[str, ...]:
    # As FastAPI builds a dependency's SecurityScopes: the parents' scopes, then its own.
    return tuple(dict.fromkeys([*(node.parent_oauth_scopes or ()), *(node.own_oauth_scopes or ())]))


def _unique(guards: Collection[Guard]) -> tuple[Guard, ...]:
    # FastAPI calls a dependency once per request for the same scopes (its cache).
    seen: set[tuple[int, tuple[str, ...]]] = set()
    kept = []
    for guard in guards:
        key = (id(guard.scheme), guard.scopes)
        if key not in seen:
            seen.add(key)
            kept.append(guard)
    return tuple(kept)
