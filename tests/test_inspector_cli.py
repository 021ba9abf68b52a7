"""The official MCP Inspector's command line (`@modelcontextprotocol/inspector`, pinned below) as
a real client of the example app served by uvicorn, in both eras the endpoint serves: with
`--protocol-era legacy` it initializes a session (2025-11-25, `Mcp-Session-Id`), with
`--protocol-era modern` it speaks the stateless 2026-07-28 revision (`server/discover`, no
session). Each run of the CLI is a connection of its own that cannot answer elicitation, so a tool
that changes data gets the confirmation-token flow: a plan and a token, then the call again with
the token.

scripts/node_package.sh installs the Inspector (and Node 22 where the machine's is older) into
.tools/ on first use; where it cannot, these tests fail with what it said, never skip.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import httpx
import pytest

from example_app.main import API_KEY
from fastapi_mcp_routes.tools.confirmation import PENDING_META_KEY
from tests.support.machine import ROOT
from tests.support.processes import serve_processes
from tests.support.waits import WAIT_S

pytestmark = [pytest.mark.node, pytest.mark.processes]

INSPECTOR: Final = "@modelcontextprotocol/inspector"
# 2.12.0 bundles the TypeScript SDK 2.3.1 client, which speaks 2025-11-25 with a session and
# 2026-07-28 without one; `--protocol-era` picks.
INSPECTOR_VERSION: Final = "2.12.0"
CLI_SCRIPT: Final = "clients/launcher/build/index.js"
INSTALL_S: Final = 600.0  # the first use downloads Node 22 and the Inspector (about 110 MB)
ERAS: Final = ("legacy", "modern")
# The Inspector's exit status for a tool it does not find or a result with isError: true.
TOOL_ERROR_STATUS: Final = 5


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run of the CLI: its exit status, the result it printed, and the error it reported."""

    status: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None

    def structured(self) -> dict[str, Any]:
        assert self.result is not None, self
        assert not self.result.get("isError"), self.result
        content: dict[str, Any] = self.result["structuredContent"]
        return content

    def first_text(self) -> str:
        assert self.result is not None, self
        text: str = self.result["content"][0]["text"]
        return text

    def refusal(self) -> str:
        """The text of a result marked isError, which the CLI reports with TOOL_ERROR_STATUS."""
        assert self.result is not None, self
        assert self.result.get("isError") is True, self.result
        assert self.status == TOOL_ERROR_STATUS, self
        return self.first_text()


@dataclass(frozen=True, slots=True)
class Inspector:
    """The Inspector's CLI, run with `node`, its state kept under `home`, never the user's."""

    node: str
    script: str
    home: Path

    def run(self, url: str, era: str, method: str, options: Sequence[str], headers: Sequence[str]) -> Outcome:
        command = [self.node, self.script, "--cli", f"{url}/mcp", "--transport", "http", "--protocol-era", era]
        command += ["--format", "json", "--method", method, *options]
        for header in headers:
            command += ["--header", header]
        # Loopback only: a proxy named in the environment must not carry these calls.
        env = {**os.environ, "HOME": str(self.home), "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=WAIT_S, check=False)
        printed = json.loads(done.stdout) if done.stdout.strip() else {}
        return Outcome(done.returncode, printed.get("result"), _error_envelope(done.stderr))

    def list_tools(self, url: str, era: str, headers: Sequence[str] = ()) -> list[str]:
        outcome = self.run(url, era, "tools/list", [], headers)
        assert outcome.status == 0, outcome
        assert outcome.result is not None, outcome
        return [tool["name"] for tool in outcome.result["tools"]]

    def call(
        self, url: str, era: str, tool: str, arguments: Mapping[str, object], headers: Sequence[str] = ()
    ) -> Outcome:
        options = ["--tool-name", tool]
        for name, value in arguments.items():
            options += ["--tool-arg", f"{name}={value}"]
        outcome = self.run(url, era, "tools/call", options, headers)
        if outcome.result is not None:
            # The result shows the era it travelled in: only 2026-07-28 results carry resultType.
            assert outcome.result.get("resultType") == ("complete" if era == "modern" else None), outcome.result
        return outcome


def _error_envelope(stderr: str) -> dict[str, Any] | None:
    """The `{"error": ...}` line the CLI writes last on stderr when a run fails, if any."""
    lines = stderr.strip().splitlines()
    if not lines:
        return None
    try:
        envelope = json.loads(lines[-1])
    except json.JSONDecodeError:
        return None
    error: dict[str, Any] | None = envelope.get("error") if isinstance(envelope, dict) else None
    return error


def pending_token(outcome: Outcome) -> str:
    """The token of a call that is waiting for confirmation: an isError result whose text tells
    the model what to do, then holds the plan as JSON on its last line; programs read the same
    plan from `_meta`, and the two must agree."""
    assert outcome.result is not None
    assert outcome.result.get("isError") is True, outcome.result
    pending = outcome.result["_meta"][PENDING_META_KEY]
    assert json.loads(outcome.first_text().rsplit("\n", 1)[-1]) == pending
    assert pending["pending"] is True, pending
    token: str = pending["token"]
    assert f"confirmationToken={token!r}" in outcome.first_text()
    return token


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    command = [str(ROOT / "scripts" / "node_package.sh"), INSPECTOR, INSPECTOR_VERSION, CLI_SCRIPT]
    try:
        installed = subprocess.run(command, capture_output=True, text=True, timeout=INSTALL_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Installing {INSPECTOR}@{INSPECTOR_VERSION} took longer than {INSTALL_S} s.", pytrace=False)
    if installed.returncode != 0:
        pytest.fail(f"The Inspector CLI is not available:\n{installed.stderr}", pytrace=False)
    node, script = installed.stdout.splitlines()
    return Inspector(node, script, tmp_path_factory.mktemp("inspector-home"))


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The example app as `make run` serves it, in a process of its own (its notes start afresh)."""
    with serve_processes("example_app.main:app") as url:
        yield url


@pytest.fixture(scope="module")
def bearer() -> str:
    """A token from the example's demo issuer, printed by the command its README gives."""
    minted = subprocess.run(
        [sys.executable, "-m", "example_app.auth"], capture_output=True, text=True, cwd=ROOT, timeout=WAIT_S, check=True
    )
    return minted.stdout.strip()


def rest(base_url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        return http.request(method, path, **kwargs)


def titled(base_url: str, title: str) -> list[dict[str, Any]]:
    notes: list[dict[str, Any]] = rest(base_url, "GET", "/notes", params={"limit": 100}).json()["items"]
    return [note for note in notes if note["title"] == title]


@pytest.mark.parametrize("era", ERAS)
def test_the_inspector_lists_the_read_tools_to_anyone_and_the_writes_to_a_caller_with_the_api_key(
    inspector: Inspector, base_url: str, era: str
) -> None:
    anonymous = inspector.list_tools(base_url, era)
    keyed = inspector.list_tools(base_url, era, [f"x-api-key: {API_KEY}"])
    assert {"get_note", "list_notes"} <= set(anonymous)
    assert "create_note" not in anonymous
    assert {"create_note", "get_note", "list_notes"} <= set(keyed)


@pytest.mark.parametrize("era", ERAS)
def test_a_read_only_tool_takes_the_inspectors_arguments_and_answers_as_its_route_does(
    inspector: Inspector, base_url: str, era: str
) -> None:
    note = inspector.call(base_url, era, "get_note", {"note_id": 1})
    assert note.status == 0
    assert note.structured() == json.loads(note.first_text()) == rest(base_url, "GET", "/notes/1").json()


@pytest.mark.parametrize("era", ERAS)
def test_a_change_runs_once_after_the_inspector_calls_again_with_the_confirmation_token(
    inspector: Inspector, base_url: str, era: str
) -> None:
    key = [f"x-api-key: {API_KEY}"]
    arguments = {"title": f"Inspected over {era} {secrets.token_hex(4)}"}
    planned = inspector.call(base_url, era, "create_note", arguments, key)
    token = pending_token(planned)
    assert titled(base_url, arguments["title"]) == []  # a plan, nothing run yet

    confirmed = inspector.call(base_url, era, "create_note", {**arguments, "confirmationToken": token}, key)
    replayed = inspector.call(base_url, era, "create_note", {**arguments, "confirmationToken": token}, key)
    listed = inspector.call(base_url, era, "list_notes", {"limit": 100})

    created = confirmed.structured()
    assert (confirmed.status, created["title"]) == (0, arguments["title"])
    assert "already used" in replayed.refusal()
    assert [note["id"] for note in listed.structured()["items"] if note["title"] == arguments["title"]] == [
        created["id"]
    ]


@pytest.mark.parametrize("era", ERAS)
def test_a_tool_behind_the_api_key_is_not_offered_without_it_and_its_route_refuses_a_wrong_one(
    inspector: Inspector, base_url: str, era: str
) -> None:
    arguments = {"title": f"Refused over {era} {secrets.token_hex(4)}"}
    without = inspector.call(base_url, era, "create_note", arguments)
    # The header is there, so the plan is made; only the route itself can tell the key is wrong.
    wrong = [f"x-api-key: not-{API_KEY}"]
    token = pending_token(inspector.call(base_url, era, "create_note", arguments, wrong))
    refused = inspector.call(base_url, era, "create_note", {**arguments, "confirmationToken": token}, wrong)

    assert (without.status, without.result) == (TOOL_ERROR_STATUS, None)
    assert without.error == {"code": "tool_not_found", "message": "Tool 'create_note' not found on server."}
    assert refused.refusal() == "HTTP 401: A valid x-api-key header is required."
    assert titled(base_url, arguments["title"]) == []


@pytest.mark.parametrize("era", ERAS)
def test_the_stats_tool_refuses_a_bad_bearer_token_and_answers_one_from_the_example_issuer(
    inspector: Inspector, base_url: str, bearer: str, era: str
) -> None:
    bad = inspector.call(base_url, era, "note_stats", {}, ["Authorization: Bearer not-a-token"])
    good = inspector.call(base_url, era, "note_stats", {}, [f"Authorization: Bearer {bearer}"])

    assert bad.refusal() == "HTTP 401: The bearer token is not valid."
    stats = rest(base_url, "GET", "/stats", headers={"authorization": f"Bearer {bearer}"}).json()
    assert good.structured() == stats
