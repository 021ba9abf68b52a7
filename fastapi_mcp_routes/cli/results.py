"""What `call` prints: the result's content blocks and its structured content on stdout (an
error result's on stderr), a JSON-RPC error on stderr, and for a call held for confirmation its
plan and token with what to do next. Each returns the command's exit status. Everything printed
here is the endpoint's text, so it goes through `printable`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import typer

from fastapi_mcp_routes.cli.printable import printable
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY, TOKEN_ARGUMENT

OK: Final = 0
FAILED: Final = 1


def print_answer(message: Mapping[str, Any], *, raw: bool, gated: bool, tokens_outlive_a_run: bool) -> int:
    """Print a call's final JSON-RPC message; the exit status: 0 for a result that is not an
    error, else 1. `raw` prints the result (or error) object as JSON instead. `gated`: the tool
    runs once confirmed, so its result may be a plan and a token."""
    error = message.get("error")
    result = message.get("result")
    if not isinstance(result, Mapping):
        _print_error(error if isinstance(error, Mapping) else {"message": "no result"}, raw)
        return FAILED
    held = pending(result) if gated else None
    if raw:
        _echo(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        _print_content(result)
    if held is not None:
        _echo(_not_run(held, tokens_outlive_a_run), err=True)
        return FAILED
    return FAILED if result.get("isError") else OK


def pending(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The plan and token of a call held for confirmation (the result's `_meta`), or None for
    any other result."""
    meta = result.get("_meta")
    held = meta.get(PENDING_META_KEY) if isinstance(meta, Mapping) else None
    if isinstance(held, Mapping) and held.get("pending") is True and isinstance(held.get("token"), str):
        return held
    return None


def _not_run(held: Mapping[str, Any], tokens_outlive_a_run: bool) -> str:
    plan = held.get("plan")
    plan = plan if isinstance(plan, Mapping) else {}
    held_for = f"Not run: {plan.get('method')} {plan.get('path')} needs confirmation."
    token = f"{TOKEN_ARGUMENT}={held['token']}"
    if tokens_outlive_a_run:
        return f"{held_for} Run the same command with --yes, or add {token}."
    return (
        f"{held_for} Run the same command with --yes. (Adding {token} works only where the app's processes "
        "share a secret and a store, mcp_routes(secret=..., store=...): this app keeps its tokens in one "
        "process's memory, and each run is a new process.)"
    )


def _print_error(error: Mapping[str, Any], raw: bool) -> None:
    if raw:
        _echo(json.dumps({"error": dict(error)}, indent=2, ensure_ascii=False))
        return
    code = error.get("code")
    line = f"Error {code}: {error.get('message')}" if code is not None else f"Error: {error.get('message')}"
    if error.get("data") is not None:
        line += f" {json.dumps(error['data'], ensure_ascii=False)}"
    _echo(line, err=True)


def _print_content(result: Mapping[str, Any]) -> None:
    failed = bool(result.get("isError"))
    structured = result.get("structuredContent")
    for block in result.get("content") or ():
        shown = _block(block, structured)
        if shown is not None:
            _echo(shown, err=failed)
    if structured is not None:
        _echo(json.dumps(structured, indent=2, ensure_ascii=False), err=failed)


def _echo(text: str, *, err: bool = False) -> None:
    typer.echo(printable(text), err=err)


def _block(block: Any, structured: Any) -> str | None:
    """One content block as text; None for the text block that repeats the structured content
    (the library sends both, for clients that read only text)."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        text = str(block.get("text", ""))
        return None if structured is not None and _parsed(text) == structured else text
    if kind in ("image", "audio"):
        data = block.get("data")
        size = len(data) if isinstance(data, str) else 0
        return f"[{kind} {block.get('mimeType', '')}, {size} characters of base64]"
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, Mapping) else {}
        if isinstance(resource.get("text"), str):
            return f"[resource {resource.get('uri', '')}]\n{resource['text']}"
        return f"[resource {resource.get('uri', '')}, {resource.get('mimeType', 'binary')}]"
    if kind == "resource_link":
        return f"[resource link {block.get('uri', '')}]"
    return json.dumps(dict(block), ensure_ascii=False)


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
