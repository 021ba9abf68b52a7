"""The endpoint as an OAuth resource server: `auth=` guards every request, sessions bind to
the principal, and RFC 9728 metadata tells clients where tokens come from."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Depends, FastAPI, HTTPException, Request, Security
from fastapi.security import SecurityScopes
from fastapi.testclient import TestClient

from fastapi_mcp_routes import JWTBearer, Principal, ProtectedResource, ToolContext, auth_guard, mcp_routes, mcp_tool
from tests.support.jsonrpc import HEADERS, call_tool, initialize, open_session, result_of, rpc, tool_call
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC, token
from tests.support.stateless import post_stateless

METADATA_URL = "http://testserver/.well-known/oauth-protected-resource/mcp"


def make_app() -> FastAPI:
    app = FastAPI()
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, resource_metadata_url=METADATA_URL)
    resource = ProtectedResource(authorization_servers=[ISSUER], scopes_supported=["notes:read"], resource=AUDIENCE)
    app.include_router(mcp_routes(app, auth=bearer, protected_resource=resource))

    @mcp_tool()
    @app.get("/whoami")
    def whoami(request: Request, ctx: ToolContext = Depends()) -> dict[str, Any]:  # noqa: B008
        principal = ctx.principal
        assert isinstance(principal, Principal)
        return {"subject": principal.subject, "forwarded": "authorization" in request.headers}

    return app


def bearer(subject: str = "alice") -> dict[str, str]:
    return {**HEADERS, "authorization": f"Bearer {token(sub=subject)}"}


def test_every_request_needs_the_token_and_the_challenge_names_the_metadata() -> None:
    with TestClient(make_app()) as client:
        refused = client.post("/mcp", json=initialize(), headers=HEADERS)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'
        opened = client.post("/mcp", json=initialize(), headers=bearer())
        assert opened.status_code == 200
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        assert client.post("/mcp", json=rpc("tools/list"), headers={**HEADERS, **session}).status_code == 401


def test_the_route_sees_the_principal_and_the_callers_own_token() -> None:
    with TestClient(make_app()) as client:
        result = call_tool(client, "whoami", headers=open_session(client, headers=bearer()))
    assert result["structuredContent"] == {"subject": "alice", "forwarded": True}


def test_a_session_is_bound_to_the_principal_not_to_one_token() -> None:
    with TestClient(make_app()) as client:
        session = open_session(client, headers=bearer("alice"))["mcp-session-id"]
        refreshed = {**bearer("alice"), "mcp-session-id": session}  # a new token for the same subject
        assert client.post("/mcp", json=tool_call("whoami"), headers=refreshed).status_code == 200
        other = {**bearer("mallory"), "mcp-session-id": session}
        assert client.post("/mcp", json=tool_call("whoami"), headers=other).status_code == 404


def test_protected_resource_metadata_is_served_at_root_and_path_inserted() -> None:
    with TestClient(make_app()) as client:
        for path in ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"):
            assert client.get(path).json() == {
                "resource": AUDIENCE,
                "authorization_servers": [ISSUER],
                "scopes_supported": ["notes:read"],
                "bearer_methods_supported": ["header"],
            }


def test_a_cross_site_request_is_refused_before_auth_runs() -> None:
    with TestClient(make_app()) as client:
        response = client.post("/mcp", json=initialize(), headers={**HEADERS, "origin": "http://evil.example"})
    assert response.status_code == 403


def scoped_app() -> FastAPI:
    app = FastAPI()
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    app.include_router(mcp_routes(app, auth=jwt_bearer))

    @mcp_tool()
    @app.get("/read")
    def read(who: Principal = Security(jwt_bearer, scopes=["notes:read"])) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    @mcp_tool()
    @app.get("/admin")
    def admin(who: Principal = Security(jwt_bearer, scopes=["notes:admin"])) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    @mcp_tool(visible=lambda principal: getattr(principal, "subject", None) == "alice")
    @app.get("/alice-only")
    def alice_only() -> dict[str, str]:
        return {"for": "alice"}

    @mcp_tool()
    @app.get("/open")
    def open_to_all() -> dict[str, str]:
        return {"open": "yes"}

    return app


def listed(client: TestClient, subject: str, scope: str) -> list[str]:
    session = open_session(client, headers={"authorization": f"Bearer {token(sub=subject, scope=scope)}"})
    tools = result_of(client, rpc("tools/list"), session)["tools"]
    return [tool["name"] for tool in tools]


def test_tools_list_shows_a_principal_what_it_may_step_up_to_and_hides_what_visible_says() -> None:
    with TestClient(scoped_app()) as client:
        # alice lacks notes:admin: the tool is listed all the same, its scopes named, so that
        # her client may authorize again for them once the call is refused (the step-up).
        assert listed(client, "alice", "notes:read") == ["admin", "alice_only", "open_to_all", "read"]
        assert listed(client, "bob", "notes:read notes:admin") == ["admin", "open_to_all", "read"]


def test_scopes_declared_above_the_scheme_are_named_as_the_schemes_own_are() -> None:
    # FastAPI's documented pattern: the route asks Security(current_user, scopes=[...]) of a
    # function that reads the scheme, so the scopes are the function's, not the scheme's.
    app = FastAPI()
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    app.include_router(mcp_routes(app, auth=jwt_bearer))

    def current_user(scopes: SecurityScopes, who: Principal = Depends(jwt_bearer)) -> Principal:  # noqa: B008
        if not set(scopes.scopes) <= set(who.scopes):
            raise HTTPException(403, "Not enough permissions.")
        return who

    @mcp_tool()
    @app.get("/report")
    def report(who: Principal = Security(current_user, scopes=["notes:admin"])) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    @mcp_tool()
    @app.get("/open")
    def open_to_all() -> dict[str, str]:
        return {"open": "yes"}

    with TestClient(app) as client:
        credential = {"authorization": f"Bearer {token(scope='notes:read')}"}
        session = open_session(client, headers=credential)
        tools = {tool["name"]: tool for tool in result_of(client, rpc("tools/list"), session)["tools"]}
        # What the explorer's JSON names follows the same rule.
        about = client.get("/mcp/explorer/about", headers=credential).json()
    assert sorted(tools) == ["open_to_all", "report"]
    assert tools["report"]["_meta"]["fastapi-mcp-routes/scopes"] == ["notes:admin"]
    assert "_meta" not in tools["open_to_all"] or "fastapi-mcp-routes/scopes" not in tools["open_to_all"]["_meta"]
    assert [tool["name"] for tool in about["tools"]] == ["open_to_all", "report"]


def test_a_hidden_tool_called_by_name_is_refused_by_its_own_guard() -> None:
    with TestClient(scoped_app()) as client:
        session = open_session(client, headers={"authorization": f"Bearer {token(scope='notes:read')}"})
        response = client.post("/mcp", json=tool_call("admin"), headers=session)
    assert response.status_code == 403  # with the step-up challenge (tests/test_step_up.py)
    assert 'scope="notes:admin"' in response.headers["www-authenticate"]


def test_a_filtered_list_is_private_to_the_cache_in_the_stateless_revision() -> None:
    credential = {"authorization": f"Bearer {token(scope='notes:read')}"}
    with TestClient(scoped_app()) as client:
        result = post_stateless(client, "tools/list", headers=credential).json()["result"]
    assert result["cacheScope"] == "private"
    assert [tool["name"] for tool in result["tools"]] == ["admin", "alice_only", "open_to_all", "read"]


def test_a_route_behind_a_marked_auth_guard_is_listed_only_for_callers_with_a_credential() -> None:
    app = FastAPI()

    @auth_guard
    def api_key(request: Request) -> str:
        key = request.headers.get("x-api-key")
        if key is None:
            raise HTTPException(401, "An API key is required.")
        return key

    @mcp_tool()
    @app.get("/secret")
    def secret(key: str = Depends(api_key)) -> dict[str, str]:
        return {"key": key}

    @mcp_tool()
    @app.get("/open")
    def open_door() -> dict[str, str]:
        return {"door": "open"}

    app.include_router(mcp_routes(app, sessions=False))
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "secret", "arguments": {}}}
    with TestClient(app) as client:
        anonymous = client.post("/mcp", json=listing, headers=HEADERS).json()["result"]["tools"]
        keyed = client.post("/mcp", json=listing, headers={**HEADERS, "x-api-key": "k"}).json()["result"]["tools"]
        hidden_call = client.post("/mcp", json=call, headers=HEADERS).json()["result"]
    assert [tool["name"] for tool in anonymous] == ["open_door"]
    assert [tool["name"] for tool in keyed] == ["open_door", "secret"]
    # Visibility is never authorization: the hidden tool's own guard refuses the call.
    assert hidden_call["isError"] is True
    assert "HTTP 401" in hidden_call["content"][0]["text"]


def test_auth_guard_refuses_what_is_not_a_dependency() -> None:
    with pytest.raises(ValueError, match="auth_guard marks a FastAPI dependency"):
        auth_guard("x-api-key")  # type: ignore[arg-type]
