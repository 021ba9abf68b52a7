"""Answering what a call asks between rounds (`input_required`): the confirmation of a
mutating tool, and the questions a route asks with `ToolContext.elicit`.

The confirmation is accepted with `--yes`, else asked as y/N on a terminal, showing the
question's message (the plan: the tool, method, path and every argument). A route's own
question is asked field by field on a terminal, and declined elsewhere. The command declares
the elicitation capability only when it can answer (a terminal, or `--yes`); otherwise a gated
call gets the library's plan and token instead of a question.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any, Final

import typer

from fastapi_mcp_routes.cli.errors import CliError
from fastapi_mcp_routes.cli.printable import printable
from fastapi_mcp_routes.server.call import QUESTION_KEY

_ELICIT: Final = "elicitation/create"
ACCEPT: Final = {"action": "accept", "content": {}}
DECLINE: Final = {"action": "decline"}


class Answerer:
    """Answers a round's input requests, by the same keys."""

    def __init__(self, *, terminal: bool, yes: bool) -> None:
        self._terminal = terminal  # stdin is a terminal: a person can answer
        self._yes = yes

    def __call__(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        return {key: self._answer(key, request) for key, request in requests.items()}

    def _answer(self, key: str, request: Any) -> dict[str, Any]:
        method = request.get("method") if isinstance(request, Mapping) else None
        params = request.get("params") if isinstance(request, Mapping) else None
        if method != _ELICIT or not isinstance(params, Mapping):
            raise CliError(f"The tool asked the client for {method!r}, which this command cannot answer.")
        if key == QUESTION_KEY:
            return self._confirm(params)
        if not self._terminal:
            return dict(DECLINE)
        return _form(params)

    def _confirm(self, params: Mapping[str, Any]) -> dict[str, Any]:
        if self._yes:
            return dict(ACCEPT)
        if not self._terminal:
            return dict(DECLINE)
        typer.echo(printable(str(params.get("message", ""))), err=True)
        return dict(ACCEPT) if _yes_or_no("Run it?", default=False) else dict(DECLINE)


def _form(params: Mapping[str, Any]) -> dict[str, Any]:
    """A route's question, asked on the terminal: its message, then each field of its schema."""
    typer.echo(printable(str(params.get("message", ""))), err=True)
    if not _yes_or_no("Answer it?", default=True):
        return dict(DECLINE)
    schema = params.get("requestedSchema")
    schema = schema if isinstance(schema, Mapping) else {}
    properties = schema.get("properties")
    required = set(schema.get("required", ()))
    content = {}
    for name, field in (properties if isinstance(properties, Mapping) else {}).items():
        value = _field(name, field if isinstance(field, Mapping) else {}, name in required)
        if value is not None:
            content[name] = value
    return {"action": "accept", "content": content}


def _field(name: str, field: Mapping[str, Any], required: bool) -> Any:
    label = str(field.get("title") or name)
    if isinstance(field.get("description"), str):
        label += f" ({field['description']})"
    kind = field.get("type")
    default = field.get("default")
    if kind == "boolean":
        return _yes_or_no(label, default=bool(default))
    choices = _choices(field)
    if choices:
        label += f" [{'/'.join(choices)}]"
    shown = f"{label} [{default}]: " if default is not None else f"{label}: "
    while True:
        typed = _line(shown) or ("" if default is None else str(default))
        if not typed and not required:
            return None
        value = _typed(typed, kind)
        if value is not None and (not choices or typed in choices):
            return value
        typer.echo(printable(f"Please enter {'one of ' + ', '.join(choices) if choices else f'a {kind}'}."), err=True)


def _yes_or_no(question: str, *, default: bool) -> bool:
    typed = _line(f"{question} {'[Y/n]' if default else '[y/N]'}: ").strip().lower()
    return default if not typed else typed in ("y", "yes")


def _line(prompt: str) -> str:
    """One line typed on the terminal, the prompt on stderr (stdout carries only the result); the
    prompt names the route's fields, so it is made printable."""
    sys.stderr.write(printable(prompt))
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise CliError("The terminal closed before the question was answered.")
    return line.rstrip("\r\n")


def _choices(field: Mapping[str, Any]) -> list[str]:
    values = field.get("enum")
    if isinstance(values, list):
        return [str(value) for value in values]
    options = field.get("oneOf") or field.get("anyOf")
    if isinstance(options, list):
        return [str(option["const"]) for option in options if isinstance(option, Mapping) and "const" in option]
    return []


def _typed(text: str, kind: Any) -> Any:
    """The typed text as the field's JSON type; None when it is not one."""
    if kind in ("integer", "number"):
        try:
            number = json.loads(text)
        except ValueError:
            return None
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            return None
        return number if kind == "number" or isinstance(number, int) else None
    return text
