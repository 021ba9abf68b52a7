"""Scope step-up over MCP: a call whose route refuses the token for a missing scope is answered
HTTP 403 with the challenge the client can act on, in both eras; where the answer had already
started (or in a batch) the result or the error carries it instead; lists name the scopes."""

from __future__ import annotations

import time
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI, HTTPException, Request, Security
from fastapi.security import HTTPBearer, SecurityScopes
from fastapi.testclient import TestClient

from fastapi_mcp_routes import (
    JWTBearer,
    Principal,
    ProtectedResource,
    ToolCallEvent,
    ToolCalls,
    ToolContext,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
)
from fastapi_mcp_routes.wire.challenge import CHALLENGE_META_KEY, SCOPES_META_KEY, challenge, scope_tokens
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from tests.support.jsonrpc import HEADERS, JSON_ONLY, open_session, rpc, tool_call
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC, token
from tests.support.sse import sse_messages
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

# The RFC 9728 location of the resource identifier (AUDIENCE), never built from the request's Host.
METADATA = "https://api.example/.well-known/oauth-protected-resource/mcp"
DESCRIPTION = 'error_description="The access token lacks a scope this request needs."'
WRITE_CHALLENGE = (
    f'Bearer error="insufficient_scope", scope="notes:write", resource_metadata="{METADATA}", {DESCRIPTION}'
)
INSUFFICIENT_SCOPE = -32030
TOPIC = {"name": "topic", "value": "no"}
BEARER = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
Writer = Annotated[Principal, Security(BEARER, scopes=["notes:write"])]
Reader = Annotated[Principal, Security(BEARER, scopes=["notes:read"])]


def make_app(*, endpoint_auth: bool = True) -> FastAPI:
    app = FastAPI()
    bearer = BEARER
    plain_bearer = HTTPBearer()
    resource = ProtectedResource(authorization_servers=[ISSUER], scopes_supported=["notes:read"], resource=AUDIENCE)
    auth = bearer if endpoint_auth else None
    # Listed whatever the token's scopes, so a client sees what it may step up to.
    app.include_router(mcp_routes(app, auth=auth, protected_resource=resource, list_visible_only=False))

    @mcp_tool(confirm=False)
    @app.post("/notes")
    def write_note(principal: Writer) -> dict[str, str]:
        """Writes a note."""
        return {"by": principal.subject}

    @mcp_tool()
    @app.get("/notes")
    def read_notes(principal: Reader) -> dict[str, str]:
        """Reads the notes."""
        return {"by": principal.subject}

    async def announced(ctx: ToolContext = Depends()) -> None:  # noqa: B008
        await ctx.report_progress(1, 2, "checking the token")

    @mcp_tool(confirm=False)
    @app.post("/notes/announced", dependencies=[Depends(announced)])
    def write_announced(principal: Writer) -> dict[str, str]:
        """Says something first, then needs notes:write."""
        return {"by": principal.subject}

    @mcp_tool()  # confirmed before it runs: its guards are asked first
    @app.delete("/notes")
    def delete_notes(principal: Writer) -> dict[str, str]:
        """Deletes the notes."""
        return {"by": principal.subject}

    def echoing(security_scopes: SecurityScopes, request: Request, _: Any = Depends(plain_bearer)) -> None:  # noqa: B008
        # A scheme that names in its challenge whatever the caller sent: never passed on.
        wanted = request.headers.get("x-wanted", "")
        raise HTTPException(403, "no", {"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{wanted}"'})

    @mcp_tool()
    @app.get("/reports", dependencies=[Security(echoing, scopes=["reports:read", 'bad "scope'])])
    def reports() -> dict[str, str]:
        """Needs reports:read."""
        return {}

    def undeclared(_: Any = Depends(plain_bearer)) -> None:  # noqa: B008
        raise HTTPException(403, "no", {"WWW-Authenticate": 'Bearer error="insufficient_scope"'})

    @mcp_tool()
    @app.get("/mystery", dependencies=[Depends(undeclared)])
    def mystery() -> dict[str, str]:
        """Refuses for a scope it does not declare."""
        return {}

    @mcp_resource("notes://secret")
    @app.get("/secret")
    def secret(principal: Writer) -> dict[str, str]:
        """A resource that needs notes:write."""
        return {"by": principal.subject}

    @mcp_prompt()
    @app.post("/draft")
    def draft(principal: Writer, topic: str = "x") -> str:
        """A prompt that needs notes:write."""
        return f"Draft about {topic}"

    @mcp_completion(prompt="draft", argument="topic")
    @app.get("/complete/topic")
    def complete_topic(principal: Writer, value: str) -> list[str]:
        return [value + "s"]

    return app


def reader(scope: str = "notes:read") -> dict[str, str]:
    return {"authorization": f"Bearer {token(scope=scope)}"}


def test_a_session_call_refused_for_a_scope_is_answered_403_with_the_challenge() -> None:
    with TestClient(make_app()) as client:
        for accept in (HEADERS["accept"], JSON_ONLY["accept"], "text/event-stream"):
            session = open_session(client, headers=reader(), accept=accept)
            response = client.post("/mcp", json=tool_call("write_note", request_id=7), headers=session)
            assert response.status_code == 403
            assert response.headers["www-authenticate"] == WRITE_CHALLENGE
            assert response.headers["content-type"] == "application/json"
            error = response.json()
            assert error["id"] == 7
            assert error["error"]["code"] == INSUFFICIENT_SCOPE
            assert error["error"]["data"] == {"status": 403, "scopes": ["notes:write"]}
            assert "notes:write" in error["error"]["message"]


def test_a_call_to_confirm_refused_by_its_guards_for_a_scope_is_answered_403_before_any_question() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        response = client.post("/mcp", json=tool_call("delete_notes"), headers=session)
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == WRITE_CHALLENGE


def test_a_call_with_the_scope_runs_and_a_call_the_token_covers_is_untouched() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        read = client.post("/mcp", json=tool_call("read_notes"), headers=session)
        assert read.status_code == 200
        assert read.json()["result"]["structuredContent"] == {"by": "alice"}
        writer = {**session, "authorization": f"Bearer {token(scope='notes:read notes:write')}"}
        written = client.post("/mcp", json=tool_call("write_note"), headers=writer)
        assert written.status_code == 200
        assert written.json()["result"]["structuredContent"] == {"by": "alice"}


def test_a_stateless_call_refused_for_a_scope_is_answered_403_with_the_challenge() -> None:
    with TestClient(make_app()) as client:
        response = post_stateless(client, "tools/call", {"name": "write_note", "arguments": {}}, headers=reader())
    assert response.status_code == 403
    assert response.headers["www-authenticate"] == WRITE_CHALLENGE
    assert response.json()["error"]["data"] == {"status": 403, "scopes": ["notes:write"]}


def test_a_call_that_streamed_first_keeps_its_error_result_with_the_challenge_in_meta() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        called = tool_call("write_announced", progress_token="p")
        response = client.post("/mcp", json=called, headers=session)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        progress, answer = sse_messages(response.text)
        assert progress["method"] == "notifications/progress"
        result = answer["result"]
        assert result["isError"] is True
        assert result["_meta"][CHALLENGE_META_KEY] == {"wwwAuthenticate": WRITE_CHALLENGE, "scopes": ["notes:write"]}


def test_a_stateless_call_that_streamed_first_keeps_its_error_result_with_the_challenge() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "progressToken": "p",
    }
    with TestClient(make_app()) as client:
        params = {"name": "write_announced", "arguments": {}}
        response = post_stateless(client, "tools/call", params, meta=meta, headers=reader())
    assert response.status_code == 200
    progress, answer = sse_messages(response.text)
    assert progress["method"] == "notifications/progress"
    result = answer["result"]
    assert result["isError"] is True
    assert result["resultType"] == "complete"
    assert result["_meta"][CHALLENGE_META_KEY]["wwwAuthenticate"] == WRITE_CHALLENGE


def test_a_batch_with_a_refused_call_answers_every_entry_and_carries_the_challenge() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader(), version="2025-03-26")
        batch = [tool_call("write_note", request_id=1), tool_call("read_notes", request_id=2)]
        response = client.post("/mcp", json=batch, headers=session)
    assert response.status_code == 200
    refused, read = sorted(response.json(), key=lambda answer: answer["id"])
    assert refused["result"]["isError"] is True
    assert refused["result"]["_meta"][CHALLENGE_META_KEY]["scopes"] == ["notes:write"]
    assert read["result"]["structuredContent"] == {"by": "alice"}


def test_a_resource_read_a_prompt_and_a_completion_refused_for_a_scope_are_answered_403() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        for message in (
            rpc("resources/read", {"uri": "notes://secret"}, 3),
            rpc("prompts/get", {"name": "draft", "arguments": {"topic": "t"}}, 3),
            rpc("completion/complete", {"ref": {"type": "ref/prompt", "name": "draft"}, "argument": TOPIC}, 3),
        ):
            response = client.post("/mcp", json=message, headers=session)
            assert response.status_code == 403, response.text
            assert response.headers["www-authenticate"] == WRITE_CHALLENGE
            assert response.json()["error"]["data"]["scopes"] == ["notes:write"]
        named = {**reader(), "mcp-name": "notes://secret"}
        modern = post_stateless(client, "resources/read", {"uri": "notes://secret"}, headers=named)
        assert modern.status_code == 403
        assert modern.headers["www-authenticate"] == WRITE_CHALLENGE


def test_the_challenge_names_only_declared_scope_tokens_never_the_callers_input() -> None:
    with TestClient(make_app()) as client:
        session = {**open_session(client, headers=reader()), "x-wanted": "admin " + "x" * 5000}
        response = client.post("/mcp", json=tool_call("reports"), headers=session)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'scope="reports:read"' in challenge
    assert "admin" not in challenge
    assert "bad" not in challenge
    assert response.json()["error"]["data"]["scopes"] == ["reports:read"]


def test_a_refusal_for_a_scope_the_route_does_not_declare_stays_an_error_result() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        response = client.post("/mcp", json=tool_call("mystery"), headers=session)
    assert response.status_code == 200
    assert response.json()["result"]["isError"] is True


def test_without_endpoint_auth_a_route_refusing_a_missing_token_stays_an_error_result() -> None:
    with TestClient(make_app(endpoint_auth=False)) as client:
        session = open_session(client)
        response = client.post("/mcp", json=tool_call("write_note"), headers=session)
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("HTTP 401")
        # The scope step-up needs no endpoint auth: the stateless era has no session to keep.
        refused = post_stateless(client, "tools/call", {"name": "write_note", "arguments": {}}, headers=reader())
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"] == WRITE_CHALLENGE


def test_lists_name_the_scopes_each_entry_needs() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=reader())
        tools = client.post("/mcp", json=rpc("tools/list"), headers=session).json()["result"]["tools"]
        resources = client.post("/mcp", json=rpc("resources/list"), headers=session).json()["result"]["resources"]
        prompts = client.post("/mcp", json=rpc("prompts/list"), headers=session).json()["result"]["prompts"]
    scopes = {tool["name"]: tool.get("_meta", {}).get(SCOPES_META_KEY) for tool in tools}
    assert scopes["write_note"] == ["notes:write"]
    assert scopes["read_notes"] == ["notes:read"]
    assert scopes["reports"] == ["reports:read"]
    assert scopes["mystery"] is None
    assert resources[0]["_meta"][SCOPES_META_KEY] == ["notes:write"]
    assert prompts[0]["_meta"][SCOPES_META_KEY] == ["notes:write"]


@pytest.mark.parametrize("scopes", [["a b"], ['a"'], ["a\\b"], [""]])
def test_scopes_that_cannot_be_named_in_a_challenge_are_left_out(scopes: list[str]) -> None:
    assert scope_tokens([*scopes, "ok:read"]) == ("ok:read",)
    unquotable = challenge(["ok:read"], 'http://x/"evil')
    assert unquotable == f'Bearer error="insufficient_scope", scope="ok:read", {DESCRIPTION}'


def test_a_call_that_became_a_task_ends_with_its_error_result_carrying_the_challenge() -> None:
    app = make_app()

    async def as_task(ctx: ToolContext = Depends()) -> None:  # noqa: B008
        await ctx.start_task()

    @mcp_tool(task="optional")
    @app.get("/notes/archive", dependencies=[Depends(as_task)])
    def archive(principal: Writer) -> dict[str, str]:
        """Archives the notes, as a task."""
        return {"by": principal.subject}

    @mcp_tool(task="required")
    @app.get("/notes/export")
    def export(principal: Writer) -> dict[str, str]:
        """Exports the notes, always as a task."""
        return {"by": principal.subject}

    tasks = stateless_meta({"extensions": {TASKS_EXTENSION: {}}})
    with TestClient(app) as client:
        # Refused before it became a task: the request's own answer, 403.
        refused = post_stateless(
            client, "tools/call", {"name": "export", "arguments": {}}, meta=tasks, headers=reader()
        )
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"] == WRITE_CHALLENGE
        # Refused once a task: the CreateTaskResult went out first, so the task's result says it.
        params = {"name": "archive", "arguments": {}}
        created = post_stateless(client, "tools/call", params, meta=tasks, headers=reader())
        assert created.status_code == 200, created.text
        task_id = created.json()["result"]["taskId"]
        named = {**reader(), "mcp-name": task_id}
        deadline = time.monotonic() + WAIT_S  # polled, as a client of a task does
        while (task := task_of(client, task_id, tasks, named))["status"] == "working":
            assert time.monotonic() < deadline, task
            time.sleep(0.05)
    assert task["status"] == "completed"
    assert task["result"]["isError"] is True
    challenge = task["result"]["_meta"][CHALLENGE_META_KEY]
    assert challenge == {
        "wwwAuthenticate": f'Bearer error="insufficient_scope", scope="notes:write", {DESCRIPTION}',
        "scopes": ["notes:write"],
    }


def task_of(client: TestClient, task_id: str, meta: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    task: dict[str, Any] = post_stateless(client, "tasks/get", {"taskId": task_id}, meta=meta, headers=headers).json()
    return task["result"]


def test_the_challenge_names_a_jwt_bearers_required_scopes_with_the_routes() -> None:
    app = FastAPI()
    strict = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, required_scopes=["notes:use"])
    app.include_router(mcp_routes(app))

    @mcp_tool()
    @app.get("/strict")
    def strict_notes(principal: Principal = Security(strict, scopes=["notes:list"])) -> dict[str, str]:  # noqa: B008
        """Needs notes:use and notes:list."""
        return {"by": principal.subject}

    with TestClient(app) as client:
        response = post_stateless(
            client, "tools/call", {"name": "strict_notes", "arguments": {}}, headers=reader(scope="notes:use")
        )
    assert response.status_code == 403
    assert 'scope="notes:list notes:use"' in response.headers["www-authenticate"]
    assert "resource_metadata" not in response.headers["www-authenticate"]  # the endpoint serves none


def step_up_app(*, resource: str | None, metadata_url: str | None = None) -> FastAPI:
    app = FastAPI()
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, resource_metadata_url=metadata_url)
    served = ProtectedResource(authorization_servers=[ISSUER], resource=resource)
    app.include_router(mcp_routes(app, auth=bearer, protected_resource=served))

    @mcp_tool(confirm=False)
    @app.post("/notes")
    def write_note(principal: Principal = Security(bearer, scopes=["notes:write"])) -> dict[str, str]:  # noqa: B008
        """Writes a note."""
        return {"by": principal.subject}

    return app


def challenged_metadata(app: FastAPI, host: str) -> str:
    with TestClient(app) as client:
        headers = {**reader(), "host": host}
        response = post_stateless(client, "tools/call", {"name": "write_note", "arguments": {}}, headers=headers)
    assert response.status_code == 403
    named = response.headers["www-authenticate"].split('resource_metadata="')[1]
    return named.split('"')[0]


@pytest.mark.parametrize(
    ("resource", "metadata_url", "named"),
    [
        ("https://api.example/mcp", None, "https://api.example/.well-known/oauth-protected-resource/mcp"),
        ("https://api.example/v1/mcp?x=1", None, "https://api.example/.well-known/oauth-protected-resource/v1/mcp?x=1"),
        ("https://api.example", None, "https://api.example/.well-known/oauth-protected-resource"),
        (None, "https://meta.example/prm", "https://meta.example/prm"),  # what the endpoint's 401 names too
        ("https://api.example/mcp", "https://meta.example/prm", "https://meta.example/prm"),
    ],
)
def test_the_challenge_names_the_configured_metadata_whatever_host_the_caller_sends(
    resource: str | None, metadata_url: str | None, named: str
) -> None:
    assert challenged_metadata(step_up_app(resource=resource, metadata_url=metadata_url), "evil.example") == named


def test_without_a_configured_resource_the_challenge_names_the_metadata_where_the_request_came() -> None:
    named = challenged_metadata(step_up_app(resource=None), "api.example")
    assert named == "http://api.example/.well-known/oauth-protected-resource/mcp"


def test_a_stateless_listen_to_a_resource_refused_for_a_scope_is_answered_403_as_its_subscribe_is() -> None:
    params = {"notifications": {"resourceSubscriptions": ["notes://secret"]}}
    with TestClient(make_app()) as client:
        listened = post_stateless(client, "subscriptions/listen", params, headers=reader())
        session = open_session(client, headers=reader())
        subscribed = client.post("/mcp", json=rpc("resources/subscribe", {"uri": "notes://secret"}), headers=session)
    for response in (listened, subscribed):
        assert response.status_code == 403
        assert response.headers["www-authenticate"] == WRITE_CHALLENGE
        assert response.json()["error"]["data"] == {"status": 403, "scopes": ["notes:write"]}


def test_a_call_refused_for_a_scope_is_audited_as_the_routes_refusal_with_its_status() -> None:
    events: list[ToolCallEvent] = []
    app = FastAPI()
    app.include_router(mcp_routes(app, auth=BEARER, tool_calls=ToolCalls(on_tool_call=events.append)))

    @mcp_tool(confirm=False)
    @app.post("/notes")
    def write_note(principal: Writer) -> dict[str, str]:
        """Writes a note."""
        return {"by": principal.subject}

    @mcp_tool()  # its guards refuse before confirmation: audited as the route's refusal would be
    @app.delete("/notes")
    def delete_notes(principal: Writer) -> dict[str, str]:
        """Deletes the notes."""
        return {"by": principal.subject}

    with TestClient(app) as client:
        for name in ("write_note", "delete_notes"):
            response = post_stateless(client, "tools/call", {"name": name, "arguments": {}}, headers=reader())
            assert response.status_code == 403
    # The route ran and refused the token; "refused" says nothing ran.
    assert [(event.tool, event.outcome, event.status) for event in events] == [
        ("write_note", "error", 403),
        ("delete_notes", "error", 403),
    ]
