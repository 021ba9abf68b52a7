"""`visible(principal, credentials)`: lists shown per API key or token when the routes check
credentials themselves and the endpoint has no `auth=`. The credentials are what the app's own
security schemes read from the caller, each scheme run once per list and only when a predicate
looks it up, never a dependency above or beside it; a hidden tool's guards still refuse."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi import Depends, FastAPI, Security
from fastapi.security import APIKeyHeader, HTTPBearer
from fastapi.testclient import TestClient
from mcp import types

from fastapi_mcp_routes import Credentials, JWTBearer, Principal, mcp_prompt, mcp_resource, mcp_routes, mcp_tool
from fastapi_mcp_routes.store import MemoryStore
from tests.support.dpop import ES256, issued, proof
from tests.support.jsonrpc import open_session, result_of, rpc
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC, token
from tests.support.machine import ROOT
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import post_stateless
from tests.support.waits import WAIT_S

KEY_A = {"x-api-key": "key-a"}
KEY_B = {"x-api-key": "key-b"}


def keyed_app(visits: Counter[str]) -> FastAPI:
    """Reports for key A, invoices for key B, status for anyone: the routes check the key
    themselves, through a dependency that counts each visit (a side effect no list may cause)."""
    app = FastAPI()
    api_key = APIKeyHeader(name="x-api-key")
    app.include_router(mcp_routes(app))

    def visitor(key: str = Security(api_key)) -> str:
        visits["above"] += 1
        return key

    def beside() -> None:
        visits["beside"] += 1

    def for_key(key: str) -> Any:
        def shown(principal: Any, credentials: Credentials) -> bool:
            return credentials.get(api_key) == key

        return shown

    @mcp_tool(visible=for_key("key-a"))
    @app.get("/reports", dependencies=[Depends(beside)])
    def reports(key: str = Depends(visitor)) -> dict[str, str]:
        return {"reports": key}

    @mcp_tool(visible=for_key("key-b"))
    @app.get("/invoices", dependencies=[Depends(beside)])
    def invoices(key: str = Depends(visitor)) -> dict[str, str]:
        return {"invoices": key}

    @mcp_resource("keys://usage", visible=for_key("key-a"))
    @app.get("/usage")
    def usage(key: str = Depends(visitor)) -> dict[str, str]:
        return {"usage": key}

    @mcp_prompt(visible=lambda principal, credentials: api_key in credentials)
    @app.get("/greeting")
    def greeting() -> str:
        return "Hello."

    @mcp_tool()
    @app.get("/status")
    def status() -> dict[str, str]:
        return {"status": "up"}

    return app


@pytest.fixture(scope="module")
def visits() -> Counter[str]:
    return Counter()


@pytest.fixture(scope="module")
def base_url(visits: Counter[str]) -> Iterator[str]:
    with serve(keyed_app(visits)) as url:
        yield url


@pytest.fixture(params=["legacy", "auto"])
def mode(request: pytest.FixtureRequest) -> str:
    """The SDK client's era: a session (`legacy`), or 2026-07-28 without one (`auto`)."""
    era: str = request.param
    return era


async def sdk_lists(base_url: str, headers: dict[str, str], mode: str) -> tuple[list[str], list[str], list[str]]:
    """The tools, resources and prompts the official client is shown with these headers."""
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, headers, mode=mode) as client:
            tools = sorted(tool.name for tool in (await client.list_tools()).tools)
            resources = sorted(str(resource.uri) for resource in (await client.list_resources()).resources)
            prompts = sorted(prompt.name for prompt in (await client.list_prompts()).prompts)
    return tools, resources, prompts


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("headers", "tools", "resources", "prompts"),
    [
        (KEY_A, ["reports", "status"], ["keys://usage"], ["greeting"]),
        (KEY_B, ["invoices", "status"], [], ["greeting"]),
        ({}, ["status"], [], []),
    ],
    ids=["key A", "key B", "no key"],
)
async def test_each_key_is_shown_its_own_tools_resources_and_prompts_in_both_eras(
    base_url: str,
    visits: Counter[str],
    mode: str,
    headers: dict[str, str],
    tools: list[str],
    resources: list[str],
    prompts: list[str],
) -> None:
    before = Counter(visits)
    assert await sdk_lists(base_url, headers, mode) == (tools, resources, prompts)
    assert visits == before  # the dependencies above and beside the scheme never ran


@pytest.mark.anyio
async def test_a_hidden_tool_called_by_name_still_runs_every_guard_of_its_route(
    base_url: str, visits: Counter[str], mode: str
) -> None:
    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, {}, mode=mode) as client:
            refused = await client.call_tool("reports", {})
        async with mcp_client(base_url, KEY_B, mode=mode) as client:
            before = visits["above"]
            allowed = await client.call_tool("reports", {})  # hidden from key B, yet its route accepts any key
    assert refused.is_error
    assert [block.text for block in refused.content if isinstance(block, types.TextContent)] == [
        "HTTP 401: Not authenticated"
    ]
    assert not allowed.is_error
    assert allowed.structured_content == {"reports": "key-b"}
    assert visits["above"] == before + 1


# -- each scheme run once per list, and only when looked up ----------------------------------


@pytest.fixture
def scheme_runs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often the API key header scheme and JWTBearer are called, by anyone."""
    runs: Counter[str] = Counter()

    def counting(cls: type[Any]) -> Any:
        original = cls.__call__

        @functools.wraps(original)  # FastAPI reads the scheme's parameters through it
        async def counted(self: Any, *args: Any) -> Any:
            runs[cls.__name__] += 1
            return await original(self, *args)

        return counted

    for cls in (APIKeyHeader, JWTBearer):
        monkeypatch.setattr(cls, "__call__", counting(cls))
    return runs


def many_tools_app(tools: int) -> FastAPI:
    """`tools` tools reading a JWT's scopes, and one reading only an API key."""
    app = FastAPI()
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    api_key = APIKeyHeader(name="x-api-key", auto_error=False)
    app.include_router(mcp_routes(app))

    def reads_scopes(principal: Any, credentials: Credentials) -> bool:
        who = credentials.get(jwt_bearer)
        return who is not None and "notes:read" in who.scopes

    for number in range(tools):

        @mcp_tool(name=f"note_{number}", visible=reads_scopes)
        @app.get(f"/notes/{number}")
        def note(who: Principal = Security(jwt_bearer, scopes=["notes:read"])) -> dict[str, str]:  # noqa: B008
            return {"who": who.subject}

    @mcp_tool(visible=lambda principal, credentials: credentials.get(api_key) == "key-a")
    @app.get("/keyed")
    def keyed(who: Principal = Security(jwt_bearer), key: str | None = Security(api_key)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    return app


def listed_names(client: TestClient, headers: dict[str, str]) -> list[str]:
    session = open_session(client, headers=headers)
    return sorted(tool["name"] for tool in result_of(client, rpc("tools/list"), session)["tools"])


def test_a_list_of_many_tools_verifies_the_jwt_once_and_reads_the_key_once(scheme_runs: Counter[str]) -> None:
    with TestClient(many_tools_app(20)) as client:
        session = open_session(client, headers={"authorization": f"Bearer {token()}", **KEY_A})
        scheme_runs.clear()
        tools = result_of(client, rpc("tools/list"), session)["tools"]
        assert len(tools) == 21
        assert scheme_runs == {"JWTBearer": 1, "APIKeyHeader": 1}
        scheme_runs.clear()
        result_of(client, rpc("tools/list", request_id=2), session)
        assert scheme_runs == {"JWTBearer": 1, "APIKeyHeader": 1}  # once per list, not once ever


def test_a_scheme_no_predicate_looks_up_is_never_run(scheme_runs: Counter[str]) -> None:
    app = FastAPI()
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    api_key = APIKeyHeader(name="x-api-key", auto_error=False)
    app.include_router(mcp_routes(app))

    @mcp_tool(visible=lambda principal, credentials: credentials.get(api_key) == "key-a")
    @app.get("/keyed")
    def keyed(who: Principal = Security(jwt_bearer), key: str | None = Security(api_key)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    @mcp_tool(visible=lambda principal: True)
    @app.get("/guarded")
    def guarded(who: Principal = Security(jwt_bearer)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    with TestClient(app) as client:
        session = open_session(client, headers={"authorization": f"Bearer {token()}", **KEY_A})
        scheme_runs.clear()
        assert sorted(tool["name"] for tool in result_of(client, rpc("tools/list"), session)["tools"]) == [
            "guarded",
            "keyed",
        ]
    assert scheme_runs == {"APIKeyHeader": 1}  # the JWT, though sent and guarding both, was not verified


# -- a JWT read by the predicate, without auth= -----------------------------------------------


def jwt_app() -> FastAPI:
    app = FastAPI()
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    bearer = HTTPBearer(auto_error=False)
    app.include_router(mcp_routes(app))

    @mcp_tool(
        visible=lambda principal, credentials: "notes:admin" in getattr(credentials.get(jwt_bearer), "scopes", ())
    )
    @app.get("/admin")
    def admin(who: Principal = Security(jwt_bearer, scopes=["notes:admin"])) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    def gold(principal: Any, credentials: Credentials) -> bool:
        who = credentials.get(jwt_bearer)
        return who is not None and who.claims.get("tier") == "gold"

    @mcp_tool(visible=gold)
    @app.get("/lounge")
    def lounge(who: Principal = Security(jwt_bearer)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    @mcp_tool(name="bearer", visible=lambda principal, credentials: credentials[bearer].scheme.lower() == "bearer")
    @app.get("/bearer")
    def any_bearer(who: Principal = Security(jwt_bearer)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    return app


@pytest.fixture(scope="module")
def jwt_url() -> Iterator[str]:
    with serve(jwt_app()) as url:
        yield url


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("claims", "tools"),
    [
        ({"scope": "notes:read notes:admin"}, ["admin", "bearer"]),
        ({"tier": "gold"}, ["bearer", "lounge"]),
        ({"aud": "https://other.example"}, ["bearer"]),  # refused by JWTBearer: absent
    ],
    ids=["admin scope", "gold claim", "foreign audience"],
)
async def test_a_predicate_reads_the_tokens_scopes_and_claims_through_jwt_bearer(
    jwt_url: str, mode: str, claims: dict[str, Any], tools: list[str]
) -> None:
    headers = {"authorization": f"Bearer {token(**claims)}"}
    assert (await sdk_lists(jwt_url, headers, mode))[0] == tools


@pytest.mark.anyio
async def test_without_a_token_no_jwt_tool_is_shown(jwt_url: str, mode: str) -> None:
    assert (await sdk_lists(jwt_url, {}, mode))[0] == []


@pytest.mark.parametrize("endpoint_auth", [False, True], ids=["routes only", "auth= too"])
def test_a_dpop_bound_callers_principal_is_read_with_the_proof_of_its_list_request(endpoint_auth: bool) -> None:
    jwt_bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=MemoryStore())
    app = FastAPI()
    app.include_router(mcp_routes(app, auth=jwt_bearer if endpoint_auth else None))

    @mcp_tool(visible=lambda principal, credentials: credentials.get(jwt_bearer) is not None)
    @app.get("/mine")
    def mine(who: Principal = Security(jwt_bearer)) -> dict[str, str]:  # noqa: B008
        return {"who": who.subject}

    bound = issued(ES256.jkt)
    headers = {"authorization": f"DPoP {bound}", "dpop": proof(ES256, "POST", "http://testserver/mcp", bound)}
    with TestClient(app) as client:
        listed = post_stateless(client, "tools/list", headers=headers)
        replayed = post_stateless(client, "tools/list", headers=headers)
    assert [tool["name"] for tool in listed.json()["result"]["tools"]] == ["mine"]
    # The list's proof was spent on it: the same proof again reads as no credential.
    if endpoint_auth:
        assert replayed.status_code == 401
    else:
        assert replayed.json()["result"]["tools"] == []


# -- the explorer, the stateless wire, and predicates that fail ------------------------------


def test_the_explorer_shows_each_key_what_tools_list_shows_it() -> None:
    with TestClient(keyed_app(Counter())) as client:
        for headers, seen in ((KEY_A, ["reports", "status"]), (KEY_B, ["invoices", "status"]), ({}, ["status"])):
            document = client.get("/mcp/explorer/about", headers=headers).json()
            assert sorted(tool["name"] for tool in document["tools"]) == seen == listed_names(client, headers)
            assert [resource["uri"] for resource in document["resources"]] == (
                ["keys://usage"] if headers is KEY_A else []
            )


def test_a_stateless_list_filtered_by_key_is_private_to_its_caller() -> None:
    with TestClient(keyed_app(Counter())) as client:
        result = post_stateless(client, "tools/list", headers=KEY_A).json()["result"]
    assert sorted(tool["name"] for tool in result["tools"]) == ["reports", "status"]
    assert result["cacheScope"] == "private"


def test_a_predicate_that_fails_or_looks_up_a_dependency_hides_its_tool_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FastAPI()
    api_key = APIKeyHeader(name="x-api-key")
    app.include_router(mcp_routes(app))

    def key_of(key: str = Security(api_key)) -> str:
        return key

    @mcp_tool(visible=lambda principal, credentials: credentials[api_key] == "key-a")  # KeyError without a key
    @app.get("/strict")
    def strict(key: str = Depends(key_of)) -> dict[str, str]:
        return {"key": key}

    @mcp_tool(visible=lambda principal, credentials: credentials.get(key_of) == "key-a")
    @app.get("/wrong")
    def wrong(key: str = Depends(key_of)) -> dict[str, str]:
        return {"key": key}

    with TestClient(app) as client, caplog.at_level(logging.ERROR, logger="fastapi_mcp_routes"):
        assert listed_names(client, KEY_A) == ["strict"]
        assert listed_names(client, {}) == []
    failures = [record for record in caplog.records if "visible predicate failed" in record.getMessage()]
    assert len(failures) == 3  # the wrong lookup twice, the missing key once
    assert any("only FastAPI's security schemes and JWTBearer" in str(record.exc_info[1]) for record in failures)


def test_a_predicate_looking_up_a_new_scheme_each_time_is_stopped_and_hides_its_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app))

    @mcp_tool(visible=lambda principal, credentials: APIKeyHeader(name="x-api-key") in credentials)
    @app.get("/restless", dependencies=[Security(APIKeyHeader(name="x-api-key"))])
    def restless() -> dict[str, str]:
        return {"ok": "yes"}

    @mcp_tool()
    @app.get("/status")
    def status() -> dict[str, str]:
        return {"status": "up"}

    with TestClient(app) as client, caplog.at_level(logging.ERROR, logger="fastapi_mcp_routes"):
        assert listed_names(client, KEY_A) == ["status"]
    assert any(
        "more than 32 security schemes" in str(record.exc_info[1]) for record in caplog.records if record.exc_info
    )


# -- marking -----------------------------------------------------------------------------------


def test_a_predicate_taking_neither_form_is_refused_when_marked() -> None:
    for predicate in (lambda: True, lambda principal, credentials, more: True):
        with pytest.raises(ValueError, match=r"'visible' must take \(principal\) or \(principal, credentials\)"):
            mcp_tool(visible=predicate)
    with pytest.raises(ValueError, match="'visible' must take"):
        mcp_resource("keys://x", visible=lambda: True)
    app = FastAPI()

    @app.get("/x", openapi_extra={"x-mcp": {"visible": lambda: True}})
    def x() -> None:
        return None

    app.include_router(mcp_routes(app))
    with pytest.raises(ValueError, match="'visible' must take"), TestClient(app):
        pass


def test_the_one_parameter_form_still_gets_only_the_principal() -> None:
    seen: list[tuple[Any, ...]] = []

    def one(principal: Any) -> bool:
        seen.append((principal,))
        return True

    def with_default(principal: Any, credentials: Credentials | None = None) -> bool:
        seen.append((principal, credentials))
        return True

    app = FastAPI()
    guard = APIKeyHeader(name="x-api-key")
    app.include_router(mcp_routes(app))

    @mcp_tool(visible=one)
    @app.get("/one", dependencies=[Security(guard)])
    def first() -> None:
        return None

    @mcp_tool(visible=with_default)
    @app.get("/two", dependencies=[Security(guard)])
    def second() -> None:
        return None

    with TestClient(app) as client:
        assert listed_names(client, KEY_A) == ["first", "second"]
    assert seen[0] == (None,)
    assert seen[1][0] is None
    assert isinstance(seen[1][1], Credentials)


# -- the documentation's example, served and listed by the command line ------------------------

README_EXAMPLE = "**Per API key or token, without `auth=`.**"
GUIDE = ROOT / "docs" / "guides" / "authorization.md"


def readme_example() -> str:
    """The guide's key A / key B example, as a reader copies it."""
    text = GUIDE.read_text()
    start = text.index("```python\n", text.index(README_EXAMPLE)) + len("```python\n")
    return text[start : text.index("```", start)]


def test_the_readmes_key_example_shows_key_a_reports_and_key_b_invoices() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_example"}
    exec(compile(readme_example(), str(GUIDE), "exec"), namespace)
    with TestClient(namespace["app"]) as client:
        assert listed_names(client, KEY_A) == ["reports"]
        assert listed_names(client, KEY_B) == ["invoices"]
        assert listed_names(client, {}) == []


@pytest.mark.processes
def test_the_command_line_lists_a_tool_shown_by_key_as_hidden_from_anonymous_callers(tmp_path: Path) -> None:
    (tmp_path / "keyed.py").write_text(readme_example())
    done = subprocess.run(
        [sys.executable, "-m", "fastapi_mcp_routes", "list", "keyed:app", "--app-dir", str(tmp_path), "--json"],
        cwd=ROOT,
        env={**os.environ, "FASTAPI_MCP_ROUTES_SECRET": "", "FASTAPI_MCP_ROUTES_REDIS_URL": ""},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    hidden = {entry["tool"]["name"]: entry["hiddenFromAnonymous"] for entry in json.loads(done.stdout)["tools"]}
    assert hidden == {"reports": True, "invoices": True}
