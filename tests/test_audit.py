"""Audit and redaction: an event per tool call, argument values never logged, 5xx details
and exception text never sent to the client, and a failing hook changes nothing."""

from __future__ import annotations

import logging
import sys
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from fastapi_mcp_routes import ToolCallEvent, ToolCalls, mcp_routes, mcp_tool
from tests.support.jsonrpc import JSON_ONLY, call_tool
from tests.support.machine import HOST, free_port
from tests.support.processes import start_process
from tests.support.stateless import post_stateless


def make_app(on_tool_call: Any = None) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, sessions=False, tool_calls=ToolCalls(on_tool_call=on_tool_call)))

    @mcp_tool()
    @app.get("/echo")
    def echo(secret: str) -> dict[str, int]:
        return {"length": len(secret)}

    @mcp_tool()
    @app.get("/locked")
    def locked() -> None:
        raise HTTPException(401, "no entry")

    @mcp_tool()
    @app.get("/broken")
    def broken() -> None:
        raise RuntimeError("database password is hunter2")

    @mcp_tool()
    @app.get("/unavailable")
    def unavailable() -> None:
        raise HTTPException(503, "replica db-7 at 10.0.0.7 is down")

    return app


def test_every_call_is_reported_with_outcome_status_and_an_argument_digest() -> None:
    events: list[ToolCallEvent] = []
    with TestClient(make_app(events.append)) as client:
        call_tool(client, "echo", {"secret": "s3cr3t"}, headers=JSON_ONLY)
        call_tool(client, "locked", headers=JSON_ONLY)
        call_tool(client, "echo", {"nope": 1}, headers=JSON_ONLY)
        call_tool(client, "broken", headers=JSON_ONLY)
    assert [(e.tool, e.outcome, e.status) for e in events] == [
        ("echo", "ok", 200),
        ("locked", "error", 401),
        ("echo", "invalid_arguments", None),
        ("broken", "crashed", None),
    ]
    assert all(len(e.arguments_digest) == 16 and e.duration_ms >= 0 for e in events)
    assert "s3cr3t" not in repr(events)


def test_the_default_log_line_carries_no_argument_values(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="fastapi_mcp_routes"), TestClient(make_app()) as client:
        call_tool(client, "echo", {"secret": "s3cr3t"}, headers=JSON_ONLY)
    records = [r for r in caplog.records if r.getMessage().startswith("tool call echo")]
    assert len(records) == 1
    assert "outcome=ok status=200" in records[0].getMessage()
    assert "s3cr3t" not in caplog.text
    # Made without logger.info's stack walk, the record still names where it comes from, and
    # keeps its arguments apart for handlers that read them.
    (record,) = records
    assert (record.name, record.levelno, record.funcName) == ("fastapi_mcp_routes", logging.INFO, "log_tool_call")
    assert record.pathname.endswith("audit.py")
    assert isinstance(record.args, tuple)
    assert record.args[0] == "echo"


def test_exception_text_and_5xx_details_stay_in_the_server_log(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="fastapi_mcp_routes"), TestClient(make_app()) as client:
        crashed = call_tool(client, "broken", headers=JSON_ONLY)
        unavailable = call_tool(client, "unavailable", headers=JSON_ONLY)
    for result in (crashed, unavailable):
        text = result["content"][0]["text"]
        assert result["isError"] is True
        assert "hunter2" not in text
        assert "10.0.0.7" not in text
        reference = text.rsplit("Reference: ", 1)[1].rstrip(".")
        assert reference in caplog.text  # the same correlation id is in the server log


def test_a_failing_hook_does_not_change_the_answer() -> None:
    def explode(event: ToolCallEvent) -> None:
        raise RuntimeError("audit sink down")

    with TestClient(make_app(explode)) as client:
        assert call_tool(client, "echo", {"secret": "x"}, headers=JSON_ONLY)["structuredContent"] == {"length": 1}


# The Audit section of docs/observability.md: what an app that configures no logging adds to show the lines.
README_LOGGING = (
    "import logging; audit = logging.getLogger('fastapi_mcp_routes'); audit.setLevel(logging.INFO); "
    "audit.addHandler(logging.StreamHandler())"
)


@pytest.mark.processes
@pytest.mark.parametrize("log_config", [None, "example_app/logging.json", "readme"])
def test_the_audit_line_follows_the_apps_logging_and_the_startup_line_is_always_seen(log_config: str | None) -> None:
    # `make run` passes uvicorn the example's log config, which shows the library's logger at
    # INFO: the audit line appears, as it does where the app gives that logger a level and a
    # handler as the documentation says. Plain `uvicorn main:app` configures only uvicorn's loggers:
    # the startup line is still written to stderr, and no line per tool call is.
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "example_app.main:app", "--host", HOST, "--port", str(port)]
    if log_config == "readme":
        serve = f"import uvicorn; uvicorn.run('example_app.main:app', host={HOST!r}, port={port})"
        command = [sys.executable, "-c", f"{README_LOGGING}; {serve}"]
    elif log_config is not None:
        command += ["--log-config", log_config]
    with start_process(command) as running:
        running.wait_until(lambda r: "Application startup complete." in r.log(), "the example app")
        with httpx.Client(base_url=f"http://{HOST}:{port}", timeout=10) as http:
            params = {"name": "list_notes", "arguments": {}}
            answer = post_stateless(http, "tools/call", params, headers={"x-api-key": "demo-key"})
            assert answer.status_code == 200
            result = answer.json()["result"]
            assert result["content"]
            assert not result.get("isError")
        running.wait_until(lambda r: '"POST /mcp HTTP/1.1" 200' in r.log(), "the access log line")
        log = running.log()
    assert sum("MCP endpoint /mcp: 9 tools" in line for line in log.splitlines()) == 1
    audit = [line for line in log.splitlines() if "tool call list_notes" in line]
    if log_config is None:
        assert audit == []
    else:
        (line,) = audit
        assert line.startswith("INFO:" if log_config != "readme" else "tool call list_notes")
        assert "outcome=ok status=200" in line


@pytest.mark.parametrize("level", [logging.NOTSET, logging.WARNING])
def test_the_startup_line_goes_to_stderr_only_where_the_app_left_the_logger_alone(
    level: int, capfd: pytest.CaptureFixture[str]
) -> None:
    # No handler anywhere and no level: the one line is written to stderr. A level the app set
    # on the library's logger (WARNING, no handler) is the app's decision: the line is dropped.
    library = logging.getLogger("fastapi_mcp_routes")
    root = logging.getLogger()
    saved = (library.level, library.handlers[:], library.propagate, root.handlers[:])
    library.handlers.clear()
    root.handlers.clear()
    library.propagate = True
    library.setLevel(level)
    try:
        with TestClient(make_app()):
            pass
    finally:
        library.setLevel(saved[0])
        library.handlers[:] = saved[1]
        library.propagate = saved[2]
        root.handlers[:] = saved[3]
    err = capfd.readouterr().err
    assert ("MCP endpoint /mcp: 4 tools" in err) is (level == logging.NOTSET)
