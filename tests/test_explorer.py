"""The explorer's routes in process: where the page is served and under which policy, the link
from the OpenAPI description, and its JSON, which shows each caller the routes behind exactly
what the lists show it, behind the endpoint's guards. The page itself, in a browser:
tests/test_explorer_browser.py."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pytest
from fastapi import Depends, FastAPI, HTTPException, Security
from fastapi.security import APIKeyHeader
from fastapi.testclient import TestClient

from fastapi_mcp_routes import (
    JWTBearer,
    Limits,
    PromptMessage,
    PromptResponse,
    ServerInfo,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
)
from fastapi_mcp_routes import text_content as text_block
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC, token
from tests.support.stateless import post_stateless

api_key = APIKeyHeader(name="x-api-key")
KEY = {"x-api-key": "k"}
# The names a caller without the key must not learn anything of.
HIDDEN = ("guarded_secret_tool", "vault://secrets", "vault_prompt", "/vault/shelves")
# The routes behind them, which the app's OpenAPI document shows anyone: the JSON says what they
# are, and what they need.
HIDDEN_ROUTES = {
    ("GET", "/vault/entries"): "tool",
    ("GET", "/vault/secrets"): "resource",
    ("GET", "/vault/prompt"): "prompt",
}


def require_key(key: Annotated[str, Security(api_key)]) -> None:
    if key != "k":
        raise HTTPException(401, "A valid x-api-key is required.")


def make_app(app: FastAPI | None = None, prefix: str = "", **options: Any) -> FastAPI:
    """A public tool, a tool, a resource and a prompt behind an API key; the endpoint included
    under `prefix`, `options` go to mcp_routes."""
    app = app or FastAPI(title="Vault", description="Keeps entries.")
    app.include_router(mcp_routes(app, **options), prefix=prefix)

    @mcp_tool()
    @app.get("/entries/{entry_id}", tags=["my entries"], summary="Read an entry")
    def read_entry(entry_id: int) -> dict[str, int]:
        """Read one entry."""
        return {"id": entry_id}

    @mcp_tool(name="guarded_secret_tool")
    @app.get("/vault/entries", dependencies=[Depends(require_key)])
    def guarded() -> list[str]:
        return ["secret"]

    @mcp_resource("vault://secrets")
    @app.get("/vault/secrets", dependencies=[Depends(require_key)])
    def secrets() -> dict[str, str]:
        return {"secret": "s"}

    @mcp_prompt(name="vault_prompt")
    @app.get("/vault/prompt", response_model=PromptResponse, dependencies=[Depends(require_key)])
    def prompt(shelf: str = "top") -> PromptResponse:
        return PromptResponse(messages=[PromptMessage(role="user", content=text_block(f"Hi {shelf}"))])

    @mcp_completion(prompt="vault_prompt", argument="shelf")
    @app.get("/vault/shelves")
    def shelves(value: str = "") -> list[str]:
        return [shelf for shelf in ("top", "bottom") if shelf.startswith(value)]

    return app


def listed(client: TestClient, method: str, key: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """What a 2026-07-28 list answers this caller."""
    response = post_stateless(client, method, headers=headers)
    assert response.status_code == 200, response.text
    entries: list[dict[str, Any]] = response.json()["result"][key]
    return entries


def about(
    client: TestClient, path: str = "/mcp/explorer/about", headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"  # this caller's alone
    document: dict[str, Any] = response.json()
    return document


# -- the page ----------------------------------------------------------------------------------


def test_the_page_and_its_files_are_served_beside_the_endpoint_under_a_strict_policy() -> None:
    with TestClient(make_app()) as client:
        page = client.get("/mcp/explorer")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        policy = page.headers["content-security-policy"]
        for rule in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'"):
            assert rule in policy
        assert "unsafe" not in policy
        assert "frame-ancestors 'none'" in policy
        # Its files are its own, relative to it: nothing comes from elsewhere, nothing inline.
        sources = re.findall(r'(?:src|href)="([^"]*)"', page.text)
        assert sorted(sources) == ["data:,", "explorer?file=explorer.css", "explorer?file=explorer.js"]
        assert "<script>" not in page.text
        assert 'data-docs="/docs" data-openapi="/openapi.json"' in page.text
        for name, media_type in (("explorer.js", "text/javascript"), ("explorer.css", "text/css")):
            served = client.get(f"/mcp/explorer?file={name}")
            assert served.status_code == 200
            assert served.headers["content-type"].startswith(media_type)
            assert served.headers["content-security-policy"] == policy
            assert "http://" not in served.text
            assert "https://" not in served.text


@pytest.mark.parametrize(
    ("app", "explorer", "served"),
    [
        (FastAPI(), None, True),
        (FastAPI(docs_url=None), None, False),
        (FastAPI(openapi_url=None), None, False),
        (FastAPI(docs_url=None), True, True),
        (FastAPI(), False, False),
    ],
    ids=["docs served", "no docs", "no OpenAPI", "no docs, forced on", "docs, turned off"],
)
def test_the_page_is_served_where_the_app_serves_its_docs_unless_told(
    app: FastAPI, explorer: bool | None, served: bool
) -> None:
    with TestClient(make_app(app, explorer=explorer)) as client:
        for path in ("/mcp/explorer", "/mcp/explorer?file=explorer.js", "/mcp/explorer/about"):
            assert client.get(path).status_code == (200 if served else 404)
        if app.openapi_url:
            description = client.get("/openapi.json").json()["info"].get("description", "")
            assert ("MCP explorer" in description) is served


@pytest.mark.parametrize("value", ["yes", 1, 0, "False"])
def test_an_explorer_option_that_is_not_a_bool_is_refused_naming_the_value(value: object) -> None:
    app = FastAPI()
    with pytest.raises(ValueError, match=re.escape("explorer must be True") + ".*" + re.escape(f"got {value!r}")):
        mcp_routes(app, explorer=value)  # type: ignore[arg-type]


def test_the_page_follows_the_include_prefix_the_endpoint_path_and_the_root_path() -> None:
    app = make_app(prefix="/api", path="/agents")
    with TestClient(app, root_path="/proxy") as client:
        page = client.get("/api/agents/explorer")
        assert page.status_code == 200
        assert 'data-docs="/proxy/docs" data-openapi="/proxy/openapi.json"' in page.text
        document = about(client, "/api/agents/explorer/about")
        [tool] = [entry for entry in document["tools"] if entry["name"] == "read_entry"]
        assert tool["route"]["docs"].startswith("/proxy/docs#/")
        description = client.get("/openapi.json").json()["info"]["description"]
        # Relative to /docs, so it holds behind the root path (and any proxy) too.
        assert "[MCP explorer](./api/agents/explorer)" in description


def test_guarded_by_the_origin_check_alone_it_is_served_plainly_in_the_inclusions_place() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app))
    inclusion = app.router.routes[-1]
    place = app.router.routes.index(inclusion)

    @app.get("/items")
    def items() -> list[int]:
        return [1]

    with TestClient(app) as client:
        # REST requests do not test the inclusion: the endpoint is at the front, and the
        # explorer's two routes where the inclusion was, each turning other paths away at once.
        assert inclusion not in app.router.routes
        assert type(app.router.routes[0]).__name__ == "PlainRoute"
        assert app.router.routes[0].path == "/mcp"  # type: ignore[attr-defined]
        stand_in = app.router.routes[place + 1]  # where the inclusion was, the endpoint now ahead
        assert type(stand_in).__name__ == "PlainRoutes"
        assert [route.path for route in stand_in.routes] == ["/mcp/explorer", "/mcp/explorer/about"]  # type: ignore[attr-defined]
        assert client.get("/items").json() == [1]
        assert client.get("/mcp/explorer").status_code == 200
        assert client.get("/mcp/explorer/about").status_code == 200
        assert client.post("/mcp/explorer").status_code == 405
        foreign = client.get("/mcp/explorer/about", headers={"origin": "https://evil.example"})
        assert foreign.status_code == 403
        assert "[MCP explorer](./mcp/explorer)" in client.get("/openapi.json").json()["info"]["description"]
    assert app.router.routes[place] is inclusion  # put back at shutdown


# -- the link from /docs ----------------------------------------------------------------------


def test_the_openapi_description_links_the_page_and_the_apps_own_description_stays() -> None:
    app = FastAPI(description="Mine.")
    app.include_router(mcp_routes(app))
    with TestClient(app) as client:
        description = client.get("/openapi.json").json()["info"]["description"]
        assert description.startswith("Mine.\n\n[MCP explorer](./mcp/explorer): ")
        assert app.description == "Mine."
        assert app.openapi_schema is not None
        assert app.openapi_schema["info"]["description"] == "Mine."
        # Asked again, it is not appended twice.
        assert client.get("/openapi.json").json()["info"]["description"] == description


def test_a_schema_generated_before_the_endpoint_was_added_gets_the_link_too() -> None:
    app = FastAPI(docs_url="/api/docs")
    cached = app.openapi()
    assert "description" not in cached["info"]
    app.include_router(mcp_routes(app))
    with TestClient(app) as client:
        description = client.get("/openapi.json").json()["info"]["description"]
    assert description.startswith("[MCP explorer](../mcp/explorer): ")


def test_an_endpoint_under_a_path_parameter_serves_the_page_without_a_link() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app), prefix="/{tenant}")
    with TestClient(app) as client:
        assert client.get("/acme/mcp/explorer").status_code == 200
        assert "MCP explorer" not in client.get("/openapi.json").json()["info"].get("description", "")


# -- the JSON ----------------------------------------------------------------------------------


def names(entries: list[dict[str, Any]], key: str = "name") -> list[str]:
    return [entry[key] for entry in entries]


@pytest.mark.parametrize("headers", [None, KEY, {"x-api-key": "wrong"}], ids=["anonymous", "key", "any credential"])
def test_the_json_shows_each_caller_exactly_what_the_lists_show_it(headers: dict[str, str] | None) -> None:
    with TestClient(make_app()) as client:
        document = about(client, headers=headers)
        assert names(document["tools"]) == names(listed(client, "tools/list", "tools", headers))
        assert names(document["resources"], "uri") == names(
            listed(client, "resources/list", "resources", headers), "uri"
        )
        assert names(document["prompts"]) == names(listed(client, "prompts/list", "prompts", headers))


def test_nothing_about_what_the_lists_hide_reaches_a_caller_without_credentials() -> None:
    with TestClient(make_app()) as client:
        anonymous = about(client)
        with_key = about(client, headers=KEY)
    # `hidden` holds the routes as the OpenAPI document shows them (its operationIds too).
    shown = {key: value for key, value in anonymous.items() if key != "hidden"}
    for hidden in HIDDEN:
        assert hidden not in json.dumps(shown)
        assert hidden in json.dumps(with_key)
    assert with_key["hidden"] == []


def test_a_documented_route_the_lists_hide_is_named_by_its_kind_and_the_credentials_it_needs() -> None:
    with TestClient(make_app()) as client:
        hidden = about(client)["hidden"]
    assert {(entry["route"]["method"], entry["route"]["path"]): entry["kind"] for entry in hidden} == HIDDEN_ROUTES
    needs = {"credentials": True, "schemes": ["APIKeyHeader"], "scopes": [], "visibleRule": False}
    assert all(entry["needs"] == needs for entry in hidden)
    assert all(set(entry) == {"kind", "route", "needs"} for entry in hidden)  # no name, no description


def test_a_hidden_tool_names_a_bearer_and_its_scopes_and_a_visible_rule() -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app))
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)

    @mcp_tool()
    @app.get("/reports", dependencies=[Security(bearer, scopes=["reports:read"])])
    def reports() -> list[str]:
        return []

    @mcp_tool(visible=lambda principal: False)
    @app.get("/drafts")
    def drafts() -> list[str]:
        return []

    with TestClient(app) as client:
        needs = {entry["route"]["path"]: entry["needs"] for entry in about(client)["hidden"]}
    assert needs == {
        "/reports": {"credentials": True, "schemes": ["JWTBearer"], "scopes": ["reports:read"], "visibleRule": False},
        "/drafts": {"credentials": False, "schemes": [], "scopes": [], "visibleRule": True},
    }


def test_without_an_openapi_document_the_json_names_no_hidden_route() -> None:
    app = make_app(FastAPI(openapi_url=None), explorer=True)
    with TestClient(app) as client:
        anonymous = about(client)
    assert anonymous["hidden"] == []
    assert "/vault/entries" not in json.dumps(anonymous)


def test_with_list_visible_only_off_the_json_shows_every_entry_as_the_lists_do() -> None:
    with TestClient(make_app(list_visible_only=False)) as client:
        document = about(client)
        assert "guarded_secret_tool" in names(document["tools"])
        assert names(document["tools"]) == names(listed(client, "tools/list", "tools"))
        assert document["auth"]["listVisibleOnly"] is False


def test_the_json_names_each_tools_route_and_its_swagger_ui_entry() -> None:
    app = make_app()
    with TestClient(app) as client:
        document = about(client, headers=KEY)
        operations = client.get("/openapi.json").json()["paths"]
    tools = {entry["name"]: entry for entry in document["tools"]}
    read = tools["read_entry"]["route"]
    operation_id = operations["/entries/{entry_id}"]["get"]["operationId"]
    assert read == {
        "method": "GET",
        "path": "/entries/{entry_id}",
        "operationId": operation_id,
        "tags": ["my entries"],
        # Swagger UI's deep link: #/{tag}/{operationId}, percent-encoded as it writes them.
        "docs": f"/docs#/my%20entries/{operation_id}",
    }
    guarded = tools["guarded_secret_tool"]["route"]
    assert guarded["docs"] == f"/docs#/default/{operations['/vault/entries']['get']['operationId']}"
    [resource] = document["resources"]
    secrets_id = operations["/vault/secrets"]["get"]["operationId"]
    assert resource == {
        "uri": "vault://secrets",
        "route": {
            "method": "GET",
            "path": "/vault/secrets",
            "operationId": secrets_id,
            "tags": [],
            "docs": f"/docs#/default/{secrets_id}",
        },
    }


def test_the_json_states_the_servers_options() -> None:
    app = FastAPI(title="Vault", version="2.0")
    app.include_router(
        mcp_routes(
            app, sessions=False, limits=Limits(rate_limit="10/minute"), server=ServerInfo(instructions="Be kind.")
        )
    )
    with TestClient(app) as client:
        document = about(client)
    assert document["server"] == {"name": "Vault", "version": "2.0", "instructions": "Be kind."}
    assert document["protocolVersions"] == ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
    assert document["sessions"] is None
    assert document["limits"]["rateLimit"] == "10/minute"
    assert document["confirmation"] == {"mutations": True, "ttlSeconds": 300.0}
    assert document["auth"] == {"endpoint": None, "protectedResourceMetadata": False, "listVisibleOnly": True}


def test_the_json_runs_the_endpoints_origin_check() -> None:
    with TestClient(make_app()) as client:
        refused = client.get("/mcp/explorer/about", headers={"origin": "https://evil.example"})
        assert refused.status_code == 403
        assert client.get("/mcp/explorer/about", headers={"origin": "http://testserver"}).status_code == 200


def test_the_json_runs_the_endpoints_auth_and_shows_what_the_principal_may_see() -> None:
    app = FastAPI()
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    app.include_router(mcp_routes(app, auth=bearer))

    @mcp_tool(visible=lambda principal: getattr(principal, "subject", None) == "alice")
    @app.get("/alice-only")
    def alice_only() -> dict[str, bool]:
        return {"ok": True}

    with TestClient(app) as client:
        refused = client.get("/mcp/explorer/about")
        assert refused.status_code == 401
        for subject, seen in (("alice", ["alice_only"]), ("bob", [])):
            headers = {"authorization": f"Bearer {token(sub=subject)}"}
            document = about(client, headers=headers)
            assert names(document["tools"]) == seen == names(listed(client, "tools/list", "tools", headers))
            assert document["auth"]["endpoint"] == "JWTBearer"


def test_the_json_runs_the_endpoints_own_dependencies() -> None:
    def members_only(x_member: Annotated[str | None, Depends(APIKeyHeader(name="x-member", auto_error=False))]) -> None:
        if x_member != "yes":
            raise HTTPException(403, "Members only.")

    app = FastAPI()
    app.include_router(mcp_routes(app, dependencies=[Depends(members_only)]))
    with TestClient(app) as client:
        assert client.get("/mcp/explorer/about").status_code == 403
        assert client.get("/mcp/explorer/about", headers={"x-member": "yes"}).status_code == 200
        # The page itself holds nothing of the caller's, and is served as /docs is.
        assert client.get("/mcp/explorer").status_code == 200
