"""One secret for every process (the docs' "Deploying with several workers or replicas").

Two apps built by two `mcp_routes` calls stand for two processes: each has its own memory store
and its own instance, and they share what the secret gives them. Real processes, a real Redis
and a balancer are in tests/test_workers.py; here every step can be looked at closely.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastapi_mcp_routes import mcp_routes
from fastapi_mcp_routes.options import Sessions
from fastapi_mcp_routes.server.deployment import Deployment
from fastapi_mcp_routes.server.sealing.secret import ENV_SECRET, Secret
from fastapi_mcp_routes.server.sessions.manager import SessionManager
from fastapi_mcp_routes.store.memory import MemoryStore
from tests.support.apps import NOTES, notes_app
from tests.support.confirmation import pending_of
from tests.support.jsonrpc import call_tool, open_session, result_of, rpc, tool_call
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

SECRET = "a-test-secret-shared-by-every-process-0123456789"
OTHER = "another-secret-of-another-deployment-0123456789"
CAPABLE = {"elicitation": {}}


@pytest.fixture
def two(request: pytest.FixtureRequest) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    """Two servers as two processes, with the secrets the test names (`indirect` parameters)."""
    secrets = getattr(request, "param", (SECRET, SECRET))
    with ExitStack() as stack:
        clients = []
        for secret in secrets:
            url = stack.enter_context(serve(notes_app(secret=secret)))
            clients.append(stack.enter_context(httpx.Client(base_url=url, timeout=WAIT_S)))
        yield clients[0], clients[1]


def assert_sentences(text: str) -> None:
    """A refusal that joins several sentences ends each before the next begins."""
    assert "share its secret." in text, text
    assert re.search(r"\. [a-z]", text) is None, text
    assert text.endswith("."), text


def stateless_call(http: httpx.Client, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, **extra}
    response = post_stateless(http, "tools/call", params, meta=stateless_meta(CAPABLE))
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


# -- session ids -------------------------------------------------------------------------------


def test_a_session_opened_in_one_process_is_served_by_another_sharing_the_secret(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    session = open_session(first)
    listed = result_of(second, rpc("tools/list", {}), session)
    called = call_tool(second, "list_notes", headers=session)
    assert "list_notes" in {tool["name"] for tool in listed["tools"]}
    assert "isError" not in called


@pytest.mark.parametrize("two", [(SECRET, OTHER)], indirect=True)
def test_a_session_sealed_with_another_secret_is_not_found_and_one_warning_names_the_fix(
    two: tuple[httpx.Client, httpx.Client], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = two
    session = open_session(first)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_routes"):
        refused = [second.post("/mcp", json=rpc("tools/list", {}), headers=session) for _ in range(3)]
    assert [response.status_code for response in refused] == [404, 404, 404]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "sealed with another secret" in warnings[0]
    assert ENV_SECRET in warnings[0]


@pytest.mark.parametrize("two", [(SECRET, [OTHER, SECRET])], indirect=True)
def test_after_a_rotation_the_previous_secret_still_opens(two: tuple[httpx.Client, httpx.Client]) -> None:
    first, second = two  # the second process seals with OTHER now, and still opens SECRET's
    session = open_session(first)
    assert "isError" not in call_tool(second, "list_notes", headers=session)


def test_a_session_id_presented_by_another_caller_is_unknown_in_every_process(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    session = open_session(first, headers={"authorization": "Bearer alice"})
    mallory = {**session, "authorization": "Bearer mallory"}
    assert first.post("/mcp", json=rpc("tools/list", {}), headers=mallory).status_code == 404
    assert second.post("/mcp", json=rpc("tools/list", {}), headers=mallory).status_code == 404


def test_a_session_deleted_in_a_process_stays_ended_there_and_the_warning_names_store(
    two: tuple[httpx.Client, httpx.Client], caplog: pytest.LogCaptureFixture
) -> None:
    first, second = two
    session = open_session(first)
    assert "isError" not in call_tool(second, "list_notes", headers=session)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_routes"):
        assert second.delete("/mcp", headers=session).status_code == 204
    assert second.post("/mcp", json=rpc("tools/list", {}), headers=session).status_code == 404
    assert any("store=RedisStore" in record.getMessage() for record in caplog.records)


def from_address(base_url: str, address: str) -> httpx.Client:
    """A client whose requests come from `address` (another loopback address: another caller)."""
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=base_url, timeout=WAIT_S, transport=transport)


def test_an_anonymous_caller_cannot_push_out_another_callers_session_in_a_process_that_adopted_it(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    # The docs: "one caller holds at most 64 (its own oldest goes first)", and a caller is its
    # address when `auth=` verified nobody. A process that did not open a session adopts it on
    # its first request; that adoption must count against the same caller, not against every
    # anonymous caller at once.
    first, second = (str(client.base_url) for client in two)
    with from_address(first, "127.0.0.2") as victim_first, from_address(second, "127.0.0.2") as victim_second:
        victim = open_session(victim_first)
        assert "isError" not in call_tool(victim_second, "list_notes", headers=victim)
        with from_address(first, "127.0.0.3") as other_first, from_address(second, "127.0.0.3") as other_second:
            for _ in range(Sessions().max_per_caller):
                session = open_session(other_first)
                assert "isError" not in call_tool(other_second, "list_notes", headers=session)
        in_first = victim_first.post("/mcp", json=rpc("tools/list", {}), headers=victim).status_code
        in_second = victim_second.post("/mcp", json=rpc("tools/list", {}), headers=victim).status_code
    assert (in_first, in_second) == (200, 200), "another address's sessions pushed out this caller's session"


def test_a_session_id_has_one_spelling(two: tuple[httpx.Client, httpx.Client]) -> None:
    # A sealed value is unpadded base64url. Characters outside that alphabet, or padding, make
    # another string for the same id: every such string would be kept apart in the cache of
    # opened ids (4,096 of them, each up to 8 kB plus the caller's credentials), so one session
    # could fill it. Only the spelling the server issued opens.
    first, second = two
    session = open_session(first)
    session_id = session["mcp-session-id"]
    respellings = [
        session_id + "==",
        session_id[:6] + "." * 2000 + session_id[6:],
        session_id[:6] + "!" + session_id[6:],
    ]
    statuses = [
        second.post("/mcp", json=rpc("tools/list", {}), headers={**session, "mcp-session-id": respelled}).status_code
        for respelled in respellings
    ]
    assert statuses == [404, 404, 404]
    secret = Secret.configure(SECRET, {})
    sealed = secret.seal("session id", b"payload", b"alice")
    assert secret.open("session id", sealed, b"alice") == b"payload"
    assert [
        secret.open("session id", respelled, b"alice")
        for respelled in (sealed + "=", f" {sealed}", sealed[:3] + "*" + sealed[3:])
    ] == [None, None, None]


# -- what needs a shared store fails at once, saying so ------------------------------------------


def test_without_a_shared_store_a_session_question_is_refused_at_once_naming_store(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, _ = two
    session = open_session(first, capabilities=CAPABLE)
    result = call_tool(first, "ask", headers=session)  # the answer could reach the other process
    assert result["isError"] is True
    assert "store=RedisStore" in result["content"][0]["text"]


def test_without_a_shared_store_a_token_of_another_process_is_refused_naming_store(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    pending = call_tool(first, "add_note", {"text": "x"}, headers=open_session(first))
    token = pending_of(pending)["token"]
    refused = call_tool(second, "add_note", {"text": "x", "confirmationToken": token}, headers=open_session(second))
    kept = call_tool(first, "add_note", {"text": "x", "confirmationToken": token}, headers=open_session(first))
    assert refused["isError"] is True
    assert "store=RedisStore" in refused["content"][0]["text"]
    assert_sentences(refused["content"][0]["text"])
    assert kept["structuredContent"] == {"added": "x"}  # in its own process it confirms the call


def test_a_stateless_confirmation_answered_in_another_process_runs_once_there(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    NOTES.clear()
    asked = stateless_call(first, "add_note", {"text": "y"})
    assert asked["resultType"] == "input_required"
    [key] = asked["inputRequests"]
    retry = {"requestState": asked["requestState"], "inputResponses": {key: {"action": "accept"}}}
    ran = stateless_call(second, "add_note", {"text": "y"}, **retry)
    again = stateless_call(second, "add_note", {"text": "y"}, **retry)
    assert ran["structuredContent"] == {"added": "y"}
    assert again["isError"] is True
    assert "already used" in again["content"][0]["text"]
    assert NOTES == ["y"]


def test_a_stateless_question_of_a_route_is_answered_in_another_process(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    asked = stateless_call(first, "ask", {})
    [key] = asked["inputRequests"]
    retry = {"requestState": asked["requestState"], "inputResponses": {key: {"action": "decline"}}}
    assert stateless_call(second, "ask", {}, **retry)["structuredContent"] == {"action": "decline"}


def test_without_a_shared_store_a_resume_in_another_process_is_refused_naming_store(
    two: tuple[httpx.Client, httpx.Client],
) -> None:
    first, second = two
    session = open_session(first)
    listen = {**session, "accept": "text/event-stream", "last-event-id": "1.1"}
    refused = second.get("/mcp", headers=listen)
    assert refused.status_code == 400
    assert "store=RedisStore" in refused.json()["error"]["message"]
    assert_sentences(refused.json()["error"]["message"])


def test_without_a_shared_store_a_cancellation_of_another_process_is_refused_naming_store(
    two: tuple[httpx.Client, httpx.Client], caplog: pytest.LogCaptureFixture
) -> None:
    _, second = two
    session = open_session(second)
    cancel = rpc("notifications/cancelled", {"requestId": 41}, request_id=None)
    with caplog.at_level(logging.WARNING, "fastapi_mcp_routes"):
        refused = second.post("/mcp", json=cancel, headers=session)
    assert refused.status_code == 400
    assert refused.json()["id"] is None
    assert "store=RedisStore" in refused.json()["error"]["message"]
    assert_sentences(refused.json()["error"]["message"])
    assert any("notifications/cancelled" in r.getMessage() and "store=" in r.getMessage() for r in caplog.records)


# -- one process ---------------------------------------------------------------------------------


def test_one_process_asks_its_questions_as_before() -> None:
    with serve(notes_app()) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        session = open_session(http, capabilities=CAPABLE, headers={"accept": "application/json, text/event-stream"})
        with http.stream("POST", "/mcp", json=tool_call("ask"), headers=session) as response:
            question = next(iter_sse_messages(response.iter_lines()))
        # Ending the session cancels the route still waiting for its answer, so the server stops at once.
        assert http.delete("/mcp", headers=session).status_code == 204
    assert question["method"] == "elicitation/create"


def test_the_first_log_line_says_what_is_served_and_where_state_lives(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "fastapi_mcp_routes"), TestClient(notes_app()):
        pass
    [line] = [record.getMessage() for record in caplog.records if record.getMessage().startswith("MCP endpoint")]
    assert "MCP endpoint /mcp: 3 tools" in line
    assert "sessions on" in line
    assert "state in this process's memory" in line
    assert "a random secret of this process (one process only" in line


def test_the_secret_comes_from_the_environment_when_not_given() -> None:
    secret = Secret.configure(None, {ENV_SECRET: f"{SECRET},{OTHER}"})
    sealed = Secret.configure(OTHER, {}).seal("x", b"payload")
    assert secret.shared
    assert secret.source == ENV_SECRET
    assert secret.open("x", sealed) == b"payload"  # the second entry opens what it sealed
    assert not Secret.configure(None, {}).shared


@pytest.mark.parametrize(
    ("secret", "message"),
    [("short", "at least 32 bytes"), ([], "at least one secret"), (42, "text or bytes")],
)
def test_a_wrong_secret_stops_the_app_with_a_sentence(secret: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mcp_routes(FastAPI(), secret=secret)


def test_a_sealed_value_opens_only_for_its_purpose_and_bound() -> None:
    secret = Secret.configure(SECRET, {})
    sealed = secret.seal("session id", b"p", b"alice")
    assert secret.open("session id", sealed, b"alice") == b"p"
    assert secret.open("session id", sealed, b"mallory") is None
    assert secret.open("requestState", sealed, b"alice") is None
    assert secret.open("session id", sealed[:-2] + "AA", b"alice") is None


@pytest.mark.anyio
async def test_a_session_ends_at_its_sealed_end_of_life_however_busy() -> None:
    now = [1000.0]
    store = MemoryStore(lambda: now[0])
    options = Sessions(idle_s=60, max_life_s=300)
    sessions = SessionManager(
        options=options, deployment=Deployment(Secret.configure(None, {}), store), clock=lambda: now[0]
    )
    _, session_id = await sessions.open(b"alice", "2025-11-25")
    for _ in range(5):
        now[0] += 50
        assert await sessions.find(session_id, b"alice") is not None
    now[0] += 60
    assert await sessions.find(session_id, b"alice") is None


@pytest.mark.anyio
async def test_a_session_another_process_sealed_carries_its_version_and_capabilities() -> None:
    secret = Secret.configure(SECRET, {})
    one = SessionManager(options=Sessions(), deployment=Deployment(secret, MemoryStore()))
    other_secret = Secret.configure(SECRET, {})  # another process: its own instance
    other = SessionManager(options=Sessions(), deployment=Deployment(other_secret, MemoryStore()))
    capabilities = {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": True}}
    _, session_id = await one.open(b"alice", "2025-06-18", {"name": "c", "version": "2"}, capabilities)
    adopted = await other.find(session_id, b"alice")
    assert adopted is not None
    assert adopted.protocol_version == "2025-06-18"
    assert adopted.client_capabilities == {"elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": {}}}
    assert adopted.client_info == {"name": "c", "version": "2"}
