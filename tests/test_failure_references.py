"""A failure inside the app, wherever its route ran (a tool call, a resource read, a prompt, a
completion), is logged once under a reference, and the client's answer names that reference
and nothing else of the failure."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from fastapi_mcp_routes import mcp_completion, mcp_prompt, mcp_resource, mcp_routes, mcp_tool
from tests.support.jsonrpc import JSON_ONLY, rpc

SECRET_TEXT = "database password is hunter2"


def make_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, sessions=False))

    @mcp_tool()
    @app.get("/tools/crash")
    def crashing_tool() -> None:
        raise RuntimeError(SECRET_TEXT)

    @mcp_tool()
    @app.get("/tools/unavailable")
    def unavailable_tool() -> None:
        raise HTTPException(503, SECRET_TEXT)

    @mcp_resource("failing://crash")
    @app.get("/resources/crash")
    def crashing_resource() -> str:
        raise RuntimeError(SECRET_TEXT)

    @mcp_resource("failing://unavailable")
    @app.get("/resources/unavailable")
    def unavailable_resource() -> str:
        raise HTTPException(503, SECRET_TEXT)

    @mcp_prompt()
    @app.get("/prompts/crash")
    def crashing_prompt(topic: str = "") -> str:
        raise RuntimeError(SECRET_TEXT)

    @mcp_prompt()
    @app.get("/prompts/garbage")
    def garbage_prompt() -> int:
        return 42

    @mcp_completion(prompt="crashing_prompt", argument="topic")
    @app.get("/complete/crash")
    def crashing_completion(value: str) -> list[str]:
        raise RuntimeError(SECRET_TEXT)

    return app


CRASH = RuntimeError
# The request, the answer's text up to its reference, the level its failure is logged at, and
# the exception whose traceback the log holds, if any.
CASES: dict[str, tuple[str, dict[str, Any], str, int, type[Exception] | None]] = {
    "tool crash": (
        "tools/call",
        {"name": "crashing_tool"},
        "The tool failed with an internal error",
        logging.ERROR,
        CRASH,
    ),
    "tool 503": ("tools/call", {"name": "unavailable_tool"}, "The tool failed with HTTP 503", logging.WARNING, None),
    "resource crash": (
        "resources/read",
        {"uri": "failing://crash"},
        "Internal error: the route failed",
        logging.ERROR,
        CRASH,
    ),
    "resource 503": (
        "resources/read",
        {"uri": "failing://unavailable"},
        "Internal error: the route failed with HTTP 503",
        logging.WARNING,
        None,
    ),
    "prompt crash": (
        "prompts/get",
        {"name": "crashing_prompt"},
        "Internal error: the route failed",
        logging.ERROR,
        CRASH,
    ),
    "prompt unusable": (
        "prompts/get",
        {"name": "garbage_prompt"},
        "Internal error: the prompt route must return a string, a list of messages",
        logging.ERROR,
        None,
    ),
    "completion crash": (
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "crashing_prompt"}, "argument": {"name": "topic", "value": "x"}},
        "Internal error: the route failed",
        logging.ERROR,
        CRASH,
    ),
}


def answer_text(message: dict[str, Any]) -> str:
    """What the client is told: a tool call's `isError` text, or a JSON-RPC error's message."""
    if "error" in message:
        assert message["error"]["code"] == -32603
        text: str = message["error"]["message"]
        return text
    result = message["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    return text


@pytest.mark.parametrize("case", list(CASES))
def test_a_failure_is_logged_once_under_the_reference_its_answer_names(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    method, params, said, level, raised = CASES[case]
    with caplog.at_level(logging.DEBUG), TestClient(make_app()) as client:
        caplog.clear()  # what startup logged is not this request's
        response = client.post("/mcp", json=rpc(method, params), headers=JSON_ONLY)
    assert response.status_code == 200, response.text
    text = answer_text(response.json())
    assert text.startswith(said), text
    match = re.search(r"\. Reference: ([0-9a-f]{12})\.\Z", text)
    assert match is not None, text
    reference = match.group(1)
    assert SECRET_TEXT not in response.text
    # One record names the failure, under the same reference, at its level.
    named = [record for record in caplog.records if reference in record.getMessage()]
    assert len(named) == 1, [record.getMessage() for record in named]
    (record,) = named
    assert record.levelno == level
    assert record.getMessage().endswith(f"(reference {reference})")
    assert [r for r in caplog.records if "(reference " in r.getMessage()] == [record]
    if raised is None:
        assert record.exc_info is None
    else:
        assert record.exc_info is not None
        assert isinstance(record.exc_info[1], raised)
        assert SECRET_TEXT in caplog.text  # what the route said stays in the server's log
