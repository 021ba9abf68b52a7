"""The command-line tool, run as a user runs it: `python -m fastapi_mcp_routes` and the installed
`fastapi-mcp-routes` script, each in a process of its own, against the example app and the
small apps of `tests/cli_apps.py`; a terminal, where one matters, is a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from example_app.auth import mint
from tests.support.deployments import deployment_env
from tests.support.machine import ROOT
from tests.support.servers import connected
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.processes

RUN_S = 60.0  # the bound on one command: it imports the app, so it takes a second or two
MODULE = (sys.executable, "-m", "fastapi_mcp_routes")
SCRIPT = (str(Path(sys.executable).parent / "fastapi-mcp-routes"),)
RUNNERS = pytest.mark.parametrize("runner", [MODULE, SCRIPT], ids=["python -m", "console script"])
EXAMPLE = "example_app.main:app"
API_KEY = "X-API-Key: demo-key"
TOKEN = re.compile(r"confirmationToken=([A-Za-z0-9_\-]+)")
# What a terminal obeys rather than shows (newlines and tabs aside), and bidirectional overrides.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
CONTROLS_APP = "tests.cli_apps:controls_app"
# What its routes put in their text (an OSC 52 clipboard write, a screen
# clear, a C1 control sequence introducer, a right-to-left override).
CONTROLS = "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x9b31m\u202e"
# No secret or Redis from the environment the tests run in: each app decides for itself.
CLEAN = {"FASTAPI_MCP_ROUTES_SECRET": "", "FASTAPI_MCP_ROUTES_REDIS_URL": ""}


def run(
    *args: str, runner: tuple[str, ...] = MODULE, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the command to its end, its stdin not a terminal; its status and output."""
    return subprocess.run(
        [*runner, *args],
        cwd=ROOT,
        env={**os.environ, **CLEAN, **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_S,
        check=False,
    )


def run_typing(*args: str, typed: str) -> subprocess.CompletedProcess[str]:
    """Run the command with a terminal for its stdin, on which `typed` is typed."""
    primary, secondary = os.openpty()
    try:
        process = subprocess.Popen(
            [*MODULE, *args],
            cwd=ROOT,
            env={**os.environ, **CLEAN},
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.close(secondary)
        os.write(primary, typed.encode())  # kept by the terminal until the command reads it
        stdout, stderr = process.communicate(timeout=RUN_S)
    finally:
        os.close(primary)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def run_watched(*args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the command with a terminal for its stderr; its status and stdout, and what the
    terminal showed."""
    primary, secondary = os.openpty()
    shown = b""
    try:
        process = subprocess.Popen(
            [*MODULE, *args],
            cwd=ROOT,
            env={**os.environ, **CLEAN, "TERM": "xterm-256color"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=secondary,
        )
        os.close(secondary)
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], deadline - time.monotonic())
            try:
                chunk = os.read(primary, 4096) if ready else b""
            except OSError:  # the command closed the terminal: it has exited
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=RUN_S)
    finally:
        os.close(primary)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout.decode(), ""), shown.decode()


def listed(*args: str) -> dict[str, Any]:
    done = run("list", *args, "--json")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def by_name(entries: list[dict[str, Any]], kind: str, key: str = "name") -> dict[str, dict[str, Any]]:
    return {entry[kind][key]: entry for entry in entries}


# -- list --------------------------------------------------------------------------------------


@RUNNERS
def test_list_shows_each_tool_with_its_route_marks_and_arguments(runner: tuple[str, ...]) -> None:
    done = run("list", EXAMPLE, runner=runner, env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("MCP endpoint /mcp: 9 tools, 1 resource, 1 resource template, 1 prompt, 2 completions")
    create = next(line for line in out.splitlines() if "create_note " in line)
    assert "POST /notes" in create
    assert "confirm" in out.split("create_note ")[1].split("create_notes")[0]
    assert "title*: string" in out
    assert "priority: low|normal|high" in out
    assert "GET /feed/notes" in out
    assert "notes://{note_id}" in out
    assert "summarize_note" in out
    assert "hidden: not listed to a caller that sends no credential" in out
    assert done.stderr == ""  # no progress line where stderr is not a terminal


def test_list_json_gives_what_the_lists_give_a_caller_who_sees_everything_plus_the_route() -> None:
    shown = listed(EXAMPLE)
    token = mint(scopes=["notes:stats"])
    credentials = {"x-api-key": "demo-key", "authorization": f"Bearer {token}"}

    async def lists() -> dict[str, Any]:
        from example_app.main import app

        found = {}
        with anyio.fail_after(WAIT_S):
            async with connected(app) as http:
                for method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
                    sent = {**stateless_headers(method), **credentials}
                    answer = await http.post("/mcp", json=stateless_request(method), headers=sent)
                    found[method] = answer.json()["result"]
        return found

    served = anyio.run(lists)
    assert shown["endpoint"] == "/mcp"
    assert [entry["tool"] for entry in shown["tools"]] == served["tools/list"]["tools"]
    assert [entry["resource"] for entry in shown["resources"]] == served["resources/list"]["resources"]
    assert [entry["resourceTemplate"] for entry in shown["resourceTemplates"]] == served["resources/templates/list"][
        "resourceTemplates"
    ]
    assert [entry["prompt"] for entry in shown["prompts"]] == served["prompts/list"]["prompts"]
    tools = by_name(shown["tools"], "tool")
    assert tools["create_note"]["route"] == {"method": "POST", "path": "/notes"}
    assert tools["create_note"]["confirmationRequired"] is True
    assert tools["create_note"]["hiddenFromAnonymous"] is True
    assert tools["note_stats"]["hiddenFromAnonymous"] is True
    assert tools["get_note"] | {"tool": None} == {
        "tool": None,
        "route": {"method": "GET", "path": "/notes/{note_id}"},
        "confirmationRequired": False,
        "taskSupport": "never",
        "streaming": False,
        "hiddenFromAnonymous": False,
    }
    assert tools["export_notes"]["taskSupport"] == "optional"
    assert tools["follow_notes"]["streaming"] is True
    template = by_name(shown["resourceTemplates"], "resourceTemplate", "uriTemplate")["notes://{note_id}"]
    assert template["route"] == {"method": "GET", "path": "/notes/{note_id}"}


def test_list_json_names_the_endpoint_under_its_prefix() -> None:
    shown = listed("tests.cli_apps:app")
    assert shown["endpoint"] == "/v1/agents"
    assert sorted(by_name(shown["tools"], "tool")) == ["ask", "region"]


def test_list_reads_at_80_columns_with_every_argument_whole() -> None:
    done = run("list", EXAMPLE, env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in done.stdout
    text = " ".join(line.strip() for line in lines)  # wrapped lines joined again
    assert "  create_note  Create a note" in done.stdout
    assert "POST /notes marks: confirm, hidden" in text
    assert "arguments: title*: string, body: string, tags: array[string], priority: low|normal|high" in text
    assert "arguments: durationMs: integer, maxFrames: integer" in text
    assert "notes://{note_id}  Get a note" in done.stdout


def test_help_shows_no_type_for_a_flag() -> None:
    for command in ("list", "check", "call", "config"):
        done = run(command, "--help", env={"COLUMNS": "80"})
        assert done.returncode == 0, done.stderr
        assert "<bool>" not in done.stdout
        assert "--help" in done.stdout
    assert re.search(r"-y, --yes +Confirm a tool", run("call", "--help").stdout) is not None


def test_a_progress_line_shows_on_a_terminal_and_is_erased() -> None:
    done, terminal = run_watched("list", EXAMPLE, "--json")
    assert done.returncode == 0
    assert re.search(r"Discovering routes… \d+ routes", terminal) is not None
    assert "\x1b[2K" in terminal  # the line erased once discovery is done
    assert json.loads(done.stdout)["endpoint"] == "/mcp"  # stdout untouched


# -- check -------------------------------------------------------------------------------------


@RUNNERS
def test_check_passes_with_a_one_line_summary(runner: tuple[str, ...]) -> None:
    done = run("check", EXAMPLE, runner=runner)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "OK: MCP endpoint /mcp: 9 tools, 1 resource, 1 resource template, 1 prompt, 2 completions\n"


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ("same_names", "two tools are named 'lookup': route 'find_user' (GET /users/{user_id}) and route 'find_team'"),
        ("unknown_variable", "the variable 'name' of 'files://{name}' names no path or query parameter of the route"),
        ("without_router", "serves no MCP endpoint: add app.include_router(mcp_routes(app))"),
        ("included_twice", "serves 2 MCP endpoints ('/mcp', '/v2/mcp')"),
    ],
)
def test_check_fails_with_the_message_that_would_stop_the_app(app: str, message: str) -> None:
    done = run("check", f"tests.cli_apps:{app}")
    assert done.returncode == 1
    assert message in done.stderr
    assert done.stderr.startswith("Error: ")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_check_fails_when_the_endpoint_serves_nothing_of_the_routes_the_app_marks() -> None:
    done = run("check", "tests.cli_unserved:router_left_out")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("Error: the MCP endpoint serves no tool, resource or prompt, though the app marks")
    assert "GET /orders (on tests.cli_unserved.orders); POST /orders (on tests.cli_unserved.orders)" in done.stderr
    assert "app.include_router(router)" in done.stderr
    # The module's context-local stand-in was scanned without being asked what it is.
    assert "Traceback" not in done.stderr


def test_check_warns_of_marked_routes_on_a_router_never_included() -> None:
    done = run("check", "tests.cli_unserved:router_partly_left_out")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "OK: MCP endpoint /mcp: 1 tool\n"
    assert done.stderr.startswith("Warning: 2 marked routes on a router the app never includes, so not served: ")
    assert "GET /orders" in done.stderr


def test_check_warns_of_url_arguments_every_call_would_refuse(tmp_path: Path) -> None:
    (tmp_path / "fetching.py").write_text(
        "from fastapi import FastAPI\n"
        "from pydantic import HttpUrl\n"
        "from fastapi_mcp_routes import mcp_routes, mcp_tool\n"
        "app = FastAPI()\n"
        "app.include_router(mcp_routes(app))\n"
        "@mcp_tool()\n"
        "@app.get('/fetch')\n"
        "def fetch(url: HttpUrl) -> dict[str, str]:\n"
        "    '''Fetch a page.'''\n"
        "    return {'url': str(url)}\n"
    )
    done = run("check", "fetching:app", "--app-dir", str(tmp_path))
    assert done.returncode == 0
    assert done.stdout == "OK: MCP endpoint /mcp: 1 tool\n"
    assert done.stderr.startswith("Warning: MCP tools take URL arguments and no server URL is allowed")


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("example_app.main", "APP must be 'module:attribute', as uvicorn takes it (say 'main:app'); got"),
        ("example_ap.main:app", "Could not import 'example_ap.main': there is no module 'example_ap' in"),
        ("example_app.main:ap", "The module 'example_app.main' has no attribute 'ap'; did you mean 'app'?"),
        ("tests.cli_apps:not_an_app", "is not a FastAPI app (it is a builtins.dict)"),
        ("tests.cli_apps:build", "'tests.cli_apps:build' is a function; if it builds the app, pass --factory"),
    ],
)
def test_an_app_that_cannot_be_loaded_is_named_with_the_reason(target: str, message: str) -> None:
    done = run("list", target)
    assert done.returncode == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_an_app_that_fails_on_import_says_what_it_raised_and_where(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('no database configured')\n")
    done = run("check", "broken:app", "--app-dir", str(tmp_path))
    assert done.returncode == 1
    assert "Could not import 'broken': RuntimeError: no database configured (at " in done.stderr
    assert "broken.py:1)" in done.stderr


def test_a_factory_is_called_with_factory() -> None:
    done = run("call", "tests.cli_apps:build", "ping", "--factory")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"pong": True}


# -- call --------------------------------------------------------------------------------------


@RUNNERS
def test_a_read_only_tool_prints_its_structured_result(runner: tuple[str, ...]) -> None:
    done = run("call", EXAMPLE, "get_note", "note_id=1", runner=runner)
    assert (done.returncode, done.stderr) == (0, "")
    note = json.loads(done.stdout)  # the text block repeating it is not printed twice
    assert (note["id"], note["title"]) == (1, "Welcome")


def test_json_prints_the_raw_result() -> None:
    done = run("call", EXAMPLE, "list_notes", "limit=1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["resultType"] == "complete"
    assert result["structuredContent"]["total"] == 1
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_route_that_refuses_the_arguments_is_an_error_result_and_status_1() -> None:
    done = run("call", EXAMPLE, "get_note", "note_id=99")
    assert done.returncode == 1
    assert "Note 99 does not exist." in done.stderr
    assert done.stdout == ""


def test_an_unknown_tool_is_named_with_the_close_ones() -> None:
    done = run("call", EXAMPLE, "get_nots")
    assert done.returncode == 1
    assert "The endpoint has no tool named 'get_nots'. Did you mean 'get_note'" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["note_id"], "An argument must be key=value (say note_id=1, or title=Groceries); got 'note_id'."),
        (["--json-args", "[1]"], "--json-args must be a JSON object of arguments, got list '[1]'."),
        (["--json-args", "{1"], "--json-args is not valid JSON ("),
        (["note_id=1", "--header", "X-API-Key"], "A header must be 'Name: value' (say 'X-API-Key: demo'); got"),
        (["note_id=1", "--header", "Mcp-Name: other"], "--header cannot set 'Mcp-Name'"),
        # JSON no peer reads: a number beyond a 64-bit float, nesting deeper than a parser goes.
        (["note_id=1e999"], "note_id=1e999 cannot be sent: 1e999 is a number beyond a 64-bit float (RFC 7493)."),
        (["--json-args", '{"note_id": -1e999}'], "--json-args cannot be sent: -1e999 is a number beyond a 64-bit"),
        ([f"note_id={'[' * 5000}"], "note_id=[[[[[[[[[[[[[[[[…(5000 chars) cannot be sent: it is nested too deeply"),
        (["--json-args", '{"note_id": ' * 5000], "--json-args cannot be sent: it is nested too deeply to read."),
        # Whole JSON that Python's parser reads, on every release, yet deeper than anything takes it.
        ([f"note_id={'[' * 600}{']' * 600}"], "cannot be sent: it is nested too deeply to read."),
        (["note_id=1", "--header", "X-API-Key: \u2603"], "The value of the header 'X-API-Key' holds '\u2603', which a"),
    ],
)
def test_bad_arguments_and_headers_are_refused_with_a_sentence(args: list[str], message: str) -> None:
    done = run("call", EXAMPLE, "get_note", *args)
    assert done.returncode == 1
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_values_are_json_where_they_parse_and_text_for_string_arguments() -> None:
    done = run("call", EXAMPLE, "create_note", "title=2024", 'tags=["a", "b"]', "priority=high", "--yes", "-H", API_KEY)
    assert done.returncode == 0, done.stderr
    note = json.loads(done.stdout)
    assert (note["title"], note["tags"], note["priority"]) == ("2024", ["a", "b"], "high")


def test_a_guarded_tool_is_refused_without_credentials_and_runs_with_the_header() -> None:
    refused = run("call", EXAMPLE, "note_stats")
    allowed = run("call", EXAMPLE, "note_stats", "--header", f"Authorization: Bearer {mint(scopes=['notes:stats'])}")
    assert refused.returncode == 1
    assert "HTTP 401" in refused.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout) == {"notes": 1, "by_priority": {"low": 0, "normal": 1, "high": 0}}


def test_a_gated_call_with_yes_runs_the_route_once() -> None:
    done = run("call", EXAMPLE, "create_note", "title=Groceries", "--yes", "-H", API_KEY)
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    # The store starts with one note: a second run of the route would have made note 3.
    assert (created["id"], created["title"], created["revision"]) == (2, "Groceries", 1)
    assert "Not run" not in done.stderr


def test_a_gated_call_without_a_terminal_or_yes_answers_the_plan_and_a_token() -> None:
    done = run("call", EXAMPLE, "create_note", "title=Groceries", "-H", API_KEY)
    assert done.returncode == 1
    assert "Groceries" in done.stdout + done.stderr  # the plan, as the library words it
    assert "Not run: POST /notes needs confirmation. Run the same command with --yes." in done.stderr
    # This app keeps tokens in one process's memory: another run cannot redeem them, and says so.
    assert "works only where the app's processes share a secret and a store" in done.stderr
    match = TOKEN.search(done.stderr)
    assert match is not None
    again = run("call", EXAMPLE, "create_note", "title=Groceries", f"confirmationToken={match[1]}", "-H", API_KEY)
    assert again.returncode == 1
    assert "This confirmation is not valid" in again.stderr


@pytest.mark.redis
def test_the_token_of_a_held_call_runs_it_in_another_run_where_processes_share_a_store(redis_url: str) -> None:
    shared = deployment_env(redis_url)
    first = run("call", "tests.workers_app:app", "place_order", "item=tea", "quantity=2", env=shared)
    assert first.returncode == 1
    assert "Run the same command with --yes, or add confirmationToken=" in first.stderr
    match = TOKEN.search(first.stderr)
    assert match is not None
    token = f"confirmationToken={match[1]}"
    second = run("call", "tests.workers_app:app", "place_order", "item=tea", "quantity=2", token, env=shared)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) | {"pid": 0} == {"order": 1, "item": "tea", "quantity": 2, "pid": 0}
    replayed = run("call", "tests.workers_app:app", "place_order", "item=tea", "quantity=2", token, env=shared)
    assert replayed.returncode == 1
    assert "This confirmation was already used" in replayed.stderr


def test_on_a_terminal_the_plan_is_shown_and_yes_runs_the_call() -> None:
    done = run_typing("call", EXAMPLE, "create_note", "title=Groceries", "-H", API_KEY, typed="y\n")
    assert done.returncode == 0, done.stderr
    assert 'Allow create_note to run POST /notes with title="Groceries"?' in done.stderr
    assert "Run it? [y/N]" in done.stderr
    assert json.loads(done.stdout)["id"] == 2


def test_on_a_terminal_no_declines_and_nothing_runs() -> None:
    done = run_typing("call", EXAMPLE, "create_note", "title=Groceries", "-H", API_KEY, typed="n\n")
    assert done.returncode == 1
    assert "Not run: the user declined this call." in done.stderr
    assert done.stdout == ""


def test_a_routes_question_is_asked_field_by_field_on_a_terminal() -> None:
    done = run_typing("call", "tests.cli_apps:app", "ask", typed="y\nblue\nteal\n3\n")
    assert done.returncode == 0, done.stderr
    assert "Which colour?" in done.stderr
    assert "Please enter one of teal, plum." in done.stderr  # "blue" is not one of them
    assert json.loads(done.stdout) == {"action": "accept", "content": {"colour": "teal", "count": 3}}


def test_a_routes_question_is_declined_without_a_terminal() -> None:
    declined = run("call", "tests.cli_apps:app", "ask", "--yes")
    unasked = run("call", "tests.cli_apps:app", "ask")
    assert declined.returncode == 0, declined.stderr
    assert json.loads(declined.stdout) == {"action": "decline", "content": None}
    # Without --yes the command does not declare elicitation, so the route cannot ask at all.
    assert unasked.returncode == 1
    assert "Error -32021: This tool needs the client's elicitation capability." in unasked.stderr


def test_a_routes_control_characters_are_shown_as_escapes_never_sent_to_the_terminal() -> None:
    text = run("call", CONTROLS_APP, "controls")
    failed = run("call", CONTROLS_APP, "controls", "fail=true")
    structured = run("call", CONTROLS_APP, "structured_controls")
    raw = run("call", CONTROLS_APP, "structured_controls", "--json")
    asked = run_typing("call", CONTROLS_APP, "controls_question", typed="y\nfine\n")
    listed_json = run("list", CONTROLS_APP, "--json")
    shown = "\\u001b]52;c;cHduZWQ=\\u0007\\u001b[2J\\u009b31m\\u202e"
    assert text.returncode == 0, text.stderr
    assert text.stdout == f"text {shown}\nsecond line\n"
    # Log messages from info up, as they arrive.
    assert text.stderr == f"progress 1/1: progress {shown}\nlog info controls: log {shown}\n"
    assert failed.returncode == 1
    assert f"HTTP 404: detail {shown}" in failed.stderr
    assert structured.returncode == 0, structured.stderr
    assert json.loads(structured.stdout) == {"title": CONTROLS}  # JSON escapes: the same value
    assert json.loads(raw.stdout)["structuredContent"] == {"title": CONTROLS}
    assert asked.returncode == 0, asked.stderr
    assert f"question {shown}" in asked.stderr
    assert listed_json.returncode == 0, listed_json.stderr
    described = by_name(json.loads(listed_json.stdout)["tools"], "tool")["structured_controls"]
    assert described["tool"]["description"] == f"described {CONTROLS}"  # JSON escapes: the same value
    for done in (text, failed, structured, raw, asked, listed_json):
        assert not CONTROL.search(done.stdout + done.stderr), done


def test_arguments_a_tool_mirrors_in_headers_travel_in_both() -> None:
    plain = run("call", "tests.cli_apps:app", "region", "zone=eu", "name=west")
    encoded = run("call", "tests.cli_apps:app", "region", "zone=eu", "name=Zürich ")
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout) == {"zone": "eu", "name": "west"}
    assert encoded.returncode == 0, encoded.stderr  # sent base64-encoded in Mcp-Param-Region
    assert json.loads(encoded.stdout) == {"zone": "eu", "name": "Zürich "}


def test_progress_goes_to_stderr_as_the_call_runs() -> None:
    done = run("call", EXAMPLE, "export_notes", env={"NOTES_EXPORT_SECONDS_PER_NOTE": "0"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == "progress 1/1: Exported 1 of 1 notes\n"
    assert json.loads(done.stdout)["notes"] == 1


def test_a_streams_progress_counts_the_frames_received_without_the_frame_cap() -> None:
    done = run("call", "tests.cli_apps:stream_app", "ticks", "maxFrames=200")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [f'frames received: {n} - frame {n}: {{"tick":{n}}}' for n in (1, 2, 3)]
    assert json.loads(done.stdout)["frameCount"] == 3


def test_a_call_that_takes_too_long_stops_at_the_timeout() -> None:
    done = run("call", EXAMPLE, "export_notes", "--timeout", "0.5", env={"NOTES_EXPORT_SECONDS_PER_NOTE": "30"})
    assert done.returncode == 1
    assert "The call did not finish within 0.5 s (--timeout)." in done.stderr


def test_an_app_that_fails_at_startup_says_why(tmp_path: Path) -> None:
    (tmp_path / "failing.py").write_text(
        "from contextlib import asynccontextmanager\n"
        "from fastapi import FastAPI\n"
        "from fastapi_mcp_routes import mcp_routes, mcp_tool\n"
        "@asynccontextmanager\n"
        "async def lifespan(app):\n"
        "    raise ConnectionError('the database is unreachable')\n"
        "    yield\n"
        "app = FastAPI(lifespan=lifespan)\n"
        "app.include_router(mcp_routes(app))\n"
        "@mcp_tool()\n"
        "@app.get('/ping')\n"
        "def ping() -> dict[str, bool]:\n"
        "    '''Answer pong.'''\n"
        "    return {'pong': True}\n"
    )
    done = run("call", "failing:app", "ping", "--app-dir", str(tmp_path))
    assert done.returncode == 1
    assert "The app failed at startup: ConnectionError: the database is unreachable." in done.stderr
    assert "Traceback" not in done.stderr


# -- config ------------------------------------------------------------------------------------

URL = "http://127.0.0.1:8000/mcp"
KEY = ("--header", "X-API-Key: demo-key")


def configured(client: str, *args: str) -> tuple[str, str]:
    done = run("config", client, URL, "--name", "notes", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_config_for_claude_desktop_runs_mcp_remote_with_headers_from_its_env() -> None:
    out, where = configured("claude-desktop", *KEY)
    assert json.loads(out) == {
        "mcpServers": {
            "notes": {
                "command": "npx",
                "args": ["-y", "mcp-remote", URL, "--transport", "http-only", "--header", "X-API-Key:${X_API_KEY}"],
                "env": {"X_API_KEY": "demo-key"},
            }
        }
    }
    assert "claude_desktop_config.json" in where


def test_the_docs_one_claude_desktop_snippet_is_what_config_prints() -> None:
    readme = (ROOT / "docs" / "getting-started" / "example.md").read_text()
    found = re.search(r"^\$ (fastapi-mcp-routes config claude-desktop [^\n]*)\n(\{\n.*?\n\})\n```", readme, re.M | re.S)
    assert found is not None
    command, shown = found.groups()
    done = run(*shlex.split(command)[1:])
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip("\n") == shown
    assert readme.count('"mcp-remote"') == 1  # no other Claude Desktop entry to drift from it


def test_config_for_claude_desktop_allows_plain_http_beyond_this_machine() -> None:
    done = run("config", "claude-desktop", "http://notes.internal:8000/mcp")
    entry = json.loads(done.stdout)["mcpServers"]["notes.internal"]
    assert entry["args"] == [
        "-y",
        "mcp-remote",
        "http://notes.internal:8000/mcp",
        "--transport",
        "http-only",
        "--allow-http",
    ]


def test_config_for_claude_code_is_the_command_that_adds_the_server() -> None:
    out, where = configured("claude-code", *KEY, "--header", "Authorization: Bearer abc")
    assert shlex.split(out) == [
        "claude",
        "mcp",
        "add",
        "--transport",
        "http",
        "notes",
        URL,
        "--header",
        "X-API-Key: demo-key",
        "--header",
        "Authorization: Bearer abc",
    ]
    assert where.startswith("Run it in a shell")


def test_config_for_cursor_and_vscode_is_their_mcp_json_entry() -> None:
    cursor, cursor_where = configured("cursor", *KEY)
    vscode, vscode_where = configured("vscode", *KEY)
    assert json.loads(cursor) == {"mcpServers": {"notes": {"url": URL, "headers": {"X-API-Key": "demo-key"}}}}
    assert json.loads(vscode) == {
        "servers": {"notes": {"type": "http", "url": URL, "headers": {"X-API-Key": "demo-key"}}}
    }
    assert "~/.cursor/mcp.json" in cursor_where
    assert ".vscode/mcp.json" in vscode_where


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cursor", "127.0.0.1:8000/mcp"], "URL must be the endpoint's http:// or https:// address"),
        (["cursor", URL, "--header", "no colon"], "A header must be 'Name: value'"),
    ],
)
def test_config_refuses_a_bad_url_or_header(args: list[str], message: str) -> None:
    done = run("config", *args)
    assert done.returncode == 1
    assert message in done.stderr


def test_config_names_the_clients_it_knows() -> None:
    done = run("config", "emacs", URL)
    assert done.returncode == 2  # a usage error, as Typer reports them
    assert "claude-desktop" in done.stderr


# -- without the extra -------------------------------------------------------------------------

BLOCK_TYPER = (
    "import runpy, sys; sys.modules['typer'] = None; sys.argv = ['fastapi-mcp-routes', 'list', 'x:app'];"
    " runpy.run_module('fastapi_mcp_routes', run_name='__main__')"
)


def test_without_typer_the_command_says_how_to_install_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_TYPER], cwd=ROOT, capture_output=True, text=True, timeout=RUN_S, check=False
    )
    assert done.returncode == 1
    assert done.stderr == (
        "The fastapi-mcp-routes command needs its cli extra, which is not installed: "
        "pip install 'fastapi-mcp-routes[cli]'\n"
    )
