"""A route's guards, asked before its call is confirmed: which dependencies count as guards,
with which scopes, and what their refusal looks like."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from fastapi import Depends, FastAPI, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, OAuth2PasswordBearer

from fastapi_mcp_routes import JWTBearer, auth_guard, mcp_tool
from fastapi_mcp_routes.server.confirmation.guards import refusal
from fastapi_mcp_routes.tools.invoke import Caller
from tests.support.discovery import registry_of
from tests.support.jwt import AUDIENCE, ISSUER, public_jwk, token

pytestmark = pytest.mark.anyio

bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk("k1")]})
oauth = OAuth2PasswordBearer(tokenUrl="/token")
optional = HTTPBearer(auto_error=False)


class LenientBearer(HTTPBearer):
    """A subclass reads the request its own way: it is not asked for the route."""

    async def __call__(self, request: Request) -> HTTPAuthorizationCredentials | None:
        return None


lenient = LenientBearer()


def user(raw: str = Depends(oauth)) -> str:
    return raw


@auth_guard
def custom_guard() -> None:
    return None


def make_app() -> FastAPI:
    app = FastAPI()

    @mcp_tool()
    @app.post("/scoped")
    def scoped(who: str = Security(user, scopes=["write"]), p: Any = Security(bearer, scopes=["admin"])) -> None:  # noqa: B008
        return None

    @mcp_tool()
    @app.post("/lenient", dependencies=[Depends(lenient), Depends(custom_guard), Depends(optional)])
    def lenient_route() -> None:
        return None

    @mcp_tool()
    @app.post("/oauth", dependencies=[Depends(user)])
    def oauth_route() -> None:
        return None

    return app


def caller(**headers: str) -> Caller:
    raw = tuple((name.encode(), value.encode()) for name, value in headers.items())
    return Caller(raw, ("127.0.0.1", 5000), ("127.0.0.1", 8000), "http", "", "1.1", None)


def test_guards_are_the_schemes_fastapi_ships_and_jwtbearer_with_the_scopes_fastapi_hands_them() -> None:
    tools = registry_of(make_app()).table().by_name
    scoped = tools["scoped"].access
    assert scoped is not None
    assert [(type(guard.scheme).__name__, guard.scopes) for guard in scoped.guards] == [
        ("OAuth2PasswordBearer", ("write",)),
        ("JWTBearer", ("admin",)),
    ]
    lenient_access = tools["lenient_route"].access
    assert lenient_access is not None
    assert lenient_access.needs_auth is True  # what tools/list goes by
    assert [type(guard.scheme) for guard in lenient_access.guards] == [HTTPBearer]  # not the subclass, not the marked


async def test_the_first_refusal_is_the_routes_answer() -> None:
    app = make_app()
    tool = registry_of(app).table().by_name["scoped"]
    anonymous = await refusal(app, tool, {}, caller())
    assert anonymous is not None
    assert anonymous.status == 401
    assert anonymous.body == b'{"detail":"Not authenticated"}'  # OAuth2PasswordBearer comes first
    reader = await refusal(app, tool, {}, caller(authorization=f"Bearer {token()}"))
    assert reader is not None
    assert reader.status == 403
    assert b"lacks a required scope" in reader.body
    assert reader.header(b"www-authenticate") is not None
    assert await refusal(app, tool, {}, caller(authorization=f"Bearer {token(scope='admin')}")) is None


async def test_schemes_that_let_a_caller_in_refuse_nothing() -> None:
    app = make_app()
    tool = registry_of(app).table().by_name["lenient_route"]
    assert await refusal(app, tool, {}, caller()) is None  # auto_error=False, a subclass, a marked guard


async def test_an_overridden_guard_or_one_under_an_override_is_not_asked() -> None:
    app = make_app()
    tool = registry_of(app).table().by_name["oauth_route"]
    assert await refusal(app, tool, {}, caller()) is not None
    app.dependency_overrides[user] = lambda: "test user"  # replaces `oauth` beneath it too
    assert await refusal(app, tool, {}, caller()) is None
    app.dependency_overrides.clear()
    app.dependency_overrides[oauth] = lambda: "test token"
    assert await refusal(app, tool, {}, caller()) is None


@dataclass
class Checker:
    """A dependency object without a hash, as a non-frozen dataclass is."""

    level: int

    def __call__(self, raw: str = Depends(oauth)) -> str:
        return raw


async def test_a_guard_under_an_unhashable_dependency_is_asked_until_overrides_make_it_doubtful() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/checked", dependencies=[Depends(Checker(1))])
    def checked() -> None:
        return None

    tool = registry_of(app).table().by_name["checked"]
    assert await refusal(app, tool, {}, caller()) is not None
    app.dependency_overrides[bearer] = lambda: None  # any override: `Checker(1)` cannot be looked up
    assert await refusal(app, tool, {}, caller()) is None


async def test_a_tool_without_guards_builds_nothing() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/open")
    def open_route(item: str) -> None:
        return None

    tool = registry_of(app).table().by_name["open_route"]
    assert await refusal(app, tool, {"item": "x"}, caller()) is None
