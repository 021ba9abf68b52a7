"""Scope step-up end to end: the official SDK's OAuth client against a real uvicorn server and
a real authorization server, in both eras. The client authorizes for what the metadata offers,
meets the 403 challenge of a tool that needs more, authorizes again for the union of scopes, and
its retry succeeds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
from fastapi import FastAPI, Security
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi_mcp_routes import JWTBearer, Principal, ProtectedResource, mcp_routes, mcp_tool
from tests.support.authorization_server import Issued, authorization_server
from tests.support.servers import serve
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio
REDIRECT_URI = "http://127.0.0.1:9/callback"  # never reached: the test reads the redirect itself


class Answers:
    """An ASGI wrapper that records each `/mcp` answer's status and `WWW-Authenticate`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[int, str | None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            await self.app(scope, receive, send)
            return

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = {key.decode(): value.decode() for key, value in message["headers"]}
                self.seen.append((message["status"], headers.get("www-authenticate")))
            await send(message)

        await self.app(scope, receive, recording)


@dataclass
class Deployment:
    mcp_url: str
    issued: Issued
    answers: Answers
    bearer: JWTBearer = field(repr=False)


def mcp_app(bearer: JWTBearer, issuer: str) -> FastAPI:
    app = FastAPI()
    resource = ProtectedResource(authorization_servers=[issuer], scopes_supported=["notes:read"])
    app.include_router(mcp_routes(app, auth=bearer, protected_resource=resource, list_visible_only=False))

    @mcp_tool()
    @app.get("/notes")
    def read_notes(principal: Principal = Security(bearer, scopes=["notes:read"])) -> dict[str, str]:  # noqa: B008
        """Reads the notes."""
        return {"by": principal.subject}

    @mcp_tool(confirm=False)
    @app.post("/notes")
    def write_note(principal: Principal = Security(bearer, scopes=["notes:write"])) -> dict[str, str]:  # noqa: B008
        """Writes a note."""
        return {"by": principal.subject}

    return app


@pytest.fixture
def deployment() -> Iterator[Deployment]:
    issuer: dict[str, str] = {}
    issued = Issued()
    with serve(authorization_server(issuer, issued)) as as_url:
        issuer["url"] = as_url
        # The audience is the endpoint's URL, known once it listens.
        bearer = JWTBearer(issuer=as_url, audience="pending", jwks_url=f"{as_url}/jwks")
        answers = Answers(mcp_app(bearer, as_url))
        with serve(answers) as mcp_url:
            bearer.audience = f"{mcp_url}/mcp"
            yield Deployment(mcp_url, issued, answers, bearer)


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def oauth_client(mcp_url: str) -> OAuthClientProvider:
    """The SDK's OAuth client; its user approves at once: the redirect is followed with httpx."""
    redirects: list[AuthorizationCodeResult] = []

    async def follow(authorization_url: str) -> None:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            response = await http.get(authorization_url)
        assert response.status_code == 302, response.text
        query = parse_qs(urlsplit(response.headers["location"]).query)
        redirects.append(AuthorizationCodeResult(code=query["code"][0], state=query["state"][0]))

    async def callback() -> AuthorizationCodeResult:
        return redirects.pop()

    metadata = OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
        client_name="step-up test",
        grant_types=["authorization_code"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(f"{mcp_url}/mcp", metadata, MemoryStorage(), follow, callback)


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["session era", "2026-07-28"])
async def test_the_sdk_client_steps_up_on_the_challenge_and_its_retry_succeeds(
    deployment: Deployment, mode: Any
) -> None:
    mcp_url = deployment.mcp_url
    http = create_mcp_http_client(auth=oauth_client(mcp_url))
    transport = streamable_http_client(f"{mcp_url}/mcp", http_client=http)
    with anyio.fail_after(WAIT_S):
        async with http, Client(transport, mode=mode) as client:
            read = await client.call_tool("read_notes", {})
            written = await client.call_tool("write_note", {})
    assert read.structured_content == {"by": "alice"}
    assert written.structured_content == {"by": "alice"}
    challenge = (
        f'Bearer error="insufficient_scope", scope="notes:write", '
        f'resource_metadata="{mcp_url}/.well-known/oauth-protected-resource/mcp", '
        'error_description="The access token lacks a scope this request needs."'
    )
    refusals = [seen for seen in deployment.answers.seen if seen[0] in (401, 403)]
    assert [status for status, _ in refusals] == [401, 403]  # authorized once, stepped up once
    assert refusals[1][1] == challenge
    first, second = (set(scope.split()) for scope in deployment.issued.authorized_scopes)
    assert first == {"notes:read"}
    assert second == {"notes:read", "notes:write"}  # the union: nothing granted before is lost
    assert deployment.issued.token_claims[-1]["aud"] == f"{mcp_url}/mcp"
