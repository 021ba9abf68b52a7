"""The scope step-up challenge: what a request refused for a missing scope tells its client.

A route's security scheme that finds a scope missing answers 403 with
`WWW-Authenticate: Bearer error="insufficient_scope", ...` (RFC 6750 section 3.1). Over MCP the
client must see that challenge on the `/mcp` request itself, so that it can ask its
authorization server for the scopes and retry (spec 2025-11-25, basic/authorization "Scope
Challenge Handling"). The challenge names only scopes the routes declare, never what a caller
sent, and only values that fit a quoted string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from fastapi_mcp_routes.wire.constants import RESERVED_KEY_PREFIX

INSUFFICIENT_SCOPE: Final = "insufficient_scope"
HEADER_WWW_AUTHENTICATE: Final = "www-authenticate"
# Where a list entry names the scopes its route asks for, and where a result carries the
# challenge it could not send as HTTP (a call that had streamed, a batch, a task).
SCOPES_META_KEY: Final = RESERVED_KEY_PREFIX + "scopes"
CHALLENGE_META_KEY: Final = RESERVED_KEY_PREFIX + "challenge"
# RFC 6749 section 3.3: a scope-token is NQCHARs, which leaves out space, '"' and '\'.
_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# A URL that fits a quoted string as it is: visible ASCII without '"' and '\'.
_QUOTABLE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,2048}")
# `error="insufficient_scope"` (or unquoted) among a Bearer challenge's parameters.
_ASKS_SCOPE: Final = re.compile(r'(?:^|[\s,])error\s*=\s*"?insufficient_scope"?(?:$|[\s,])', re.IGNORECASE)
# The `Authorization` schemes whose refusal for a scope is a step-up (lower case).
_TOKEN_SCHEMES: Final = frozenset({"bearer", "dpop"})
DESCRIPTION: Final = "The access token lacks a scope this request needs."


def scope_tokens(scopes: Iterable[str]) -> tuple[str, ...]:
    """The scopes a challenge can name, sorted: those that are scope-tokens."""
    return tuple(sorted({scope for scope in scopes if _SCOPE_TOKEN.fullmatch(scope)}))


def refuses_for_scope(www_authenticate: str | None) -> bool:
    """Whether a route's `WWW-Authenticate` is a Bearer or DPoP (RFC 9449 section 7.1)
    challenge for a missing scope."""
    if not www_authenticate:
        return False
    scheme, _, parameters = www_authenticate.strip().partition(" ")
    return scheme.lower() in _TOKEN_SCHEMES and _ASKS_SCOPE.search(parameters) is not None


def scheme_of(authorization: str | None) -> str:
    """The scheme a step-up challenges with: `DPoP` for a caller that sent a DPoP-bound token
    (its new token must be bound too), else `Bearer`."""
    used = (authorization or "").strip().partition(" ")[0].lower()
    return "DPoP" if used == "dpop" else "Bearer"


def challenge(scopes: Iterable[str], resource_metadata: str | None = None, scheme: str = "Bearer") -> str:
    """The `WWW-Authenticate` value of a step-up: the scopes, and the RFC 9728 metadata URL when
    one is known and fits a quoted string; `scheme` is `Bearer` or `DPoP` (`scheme_of`)."""
    parts = [f'error="{INSUFFICIENT_SCOPE}"', f'scope="{" ".join(scope_tokens(scopes))}"']
    if resource_metadata is not None and _QUOTABLE.fullmatch(resource_metadata):
        parts.append(f'resource_metadata="{resource_metadata}"')
    parts.append(f'error_description="{DESCRIPTION}"')
    return ("DPoP " if scheme == "DPoP" else "Bearer ") + ", ".join(parts)


def with_challenge(
    result: Mapping[str, Any], scopes: Iterable[str], resource_metadata: str | None = None, scheme: str = "Bearer"
) -> dict[str, Any]:
    """A tool result carrying the step-up challenge in its `_meta`, for where HTTP cannot."""
    named = scope_tokens(scopes)
    meta = {"wwwAuthenticate": challenge(named, resource_metadata, scheme), "scopes": list(named)}
    return {**result, "_meta": {**result.get("_meta", {}), CHALLENGE_META_KEY: meta}}
