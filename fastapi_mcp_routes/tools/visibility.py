"""A `visible` predicate and its two forms, told apart once, when the route is marked.

`visible(principal)` decides from what the endpoint's `auth=` returned (None without one);
`visible(principal, credentials)` also gets the caller's `Credentials` (tools/credentials.py):
what the app's own security schemes read from the caller, for apps whose routes check their
keys or tokens themselves. A predicate that can take two positional arguments is handed both.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from fastapi_mcp_routes.tools.credentials import Credentials

Visible: TypeAlias = Callable[[Any], bool] | Callable[[Any, Credentials], bool]


@dataclass(frozen=True, slots=True)
class Visibility:
    """A `visible` predicate, with the form it takes."""

    predicate: Callable[..., Any]
    takes_credentials: bool

    def shows(self, principal: Any, credentials: Credentials) -> bool:
        """The predicate's answer for this caller."""
        if self.takes_credentials:
            return bool(self.predicate(principal, credentials))
        return bool(self.predicate(principal))


def read_visible(visible: object, where: str, kind: str) -> Visibility | None:
    """`visible` told apart by the arguments it takes; `ValueError` for one that is not a
    predicate of the principal, or of the principal and the credentials."""
    if visible is None:
        return None
    if not callable(visible):
        raise ValueError(f"{where}: MCP {kind} option 'visible' must be a predicate, got {visible!r}")
    try:
        signature = inspect.signature(visible)
    except (TypeError, ValueError):
        return Visibility(visible, takes_credentials=False)  # a builtin without a signature: the first form
    if _binds(signature, 2):
        return Visibility(visible, takes_credentials=True)
    if _binds(signature, 1):
        return Visibility(visible, takes_credentials=False)
    raise ValueError(
        f"{where}: MCP {kind} option 'visible' must take (principal) or (principal, credentials), "
        f"got {visible!r} taking {signature}"
    )


def _binds(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True
