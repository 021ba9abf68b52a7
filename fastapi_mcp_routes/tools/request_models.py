"""What a route validates its request with: the fields of its dependency tree, read once.

A gated call is validated before anyone is asked to confirm it (server/confirmation/validation.py),
the way the route itself would validate it: FastAPI validates each dependency's parameters after
that dependency's own dependencies, depth first, and the route's last. `RequestModels` keeps those
fields in that order, so the errors come out as the route's 422 lists them, and validating a call
reads no annotation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import params


@dataclass(frozen=True, slots=True)
class Fields:
    """One dependant's own parameters (or the route's), as FastAPI validates them."""

    path: tuple[Any, ...]
    query: tuple[Any, ...]
    header: tuple[Any, ...]
    cookie: tuple[Any, ...]
    body: tuple[Any, ...]
    # Its dependency's call and those it sits under: an override of one replaces these fields.
    above: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class RequestModels:
    """A route's request fields in FastAPI's order, and how it reads its body."""

    route: Any  # matches a request's path to the path parameters the route would see
    fields: tuple[Fields, ...]
    embed_body: bool  # each body parameter is a key of one body object
    form_body: bool  # the body is read as a form, not as JSON


def request_models(route: Any) -> RequestModels | None:
    """The fields `route` validates; `None` when it declares none."""
    found: list[Fields] = []
    _collect(route.dependant, (), found)
    if not found:
        return None
    body_params = [field for fields in found for field in fields.body]
    body_field = getattr(route, "body_field", None)
    # FastAPI makes a body field of its own only to embed the parameters in it (and for a
    # nullable form model, whose extraction does not depend on embedding).
    embed = body_field is not None and all(body_field is not field for field in body_params)
    form = body_field is not None and isinstance(body_field.field_info, params.Form)
    return RequestModels(route, tuple(found), embed, form)


def _collect(dependant: Any, above: tuple[Any, ...], found: list[Fields]) -> None:
    # As FastAPI solves a request: each dependency (every time it appears) before its dependant.
    for child in dependant.dependencies:
        _collect(child, (*above, child.call), found)
    fields = Fields(
        tuple(dependant.path_params),
        tuple(dependant.query_params),
        tuple(dependant.header_params),
        tuple(dependant.cookie_params),
        tuple(dependant.body_params),
        above,
    )
    if fields.path or fields.query or fields.header or fields.cookie or fields.body:
        found.append(fields)
