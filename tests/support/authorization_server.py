"""A small OAuth 2.1 authorization server to run on uvicorn beside an MCP server: RFC 8414
metadata, dynamic client registration, an /authorize that approves at once (PKCE required), a
/token that issues RS256 JWTs carrying exactly the scopes asked for, and its JWKS."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse

from tests.support.jwt import PRIVATE, public_jwk

KID = "as-1"
TOKEN_LIFETIME_S = 300


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    scope: str
    resource: str | None


@dataclass
class Issued:
    """What the server did, for a test to read: each authorization's scope, each token's claims."""

    authorized_scopes: list[str] = field(default_factory=list)
    token_claims: list[dict[str, Any]] = field(default_factory=list)


def authorization_server(issuer: dict[str, str], issued: Issued) -> FastAPI:
    """The app; `issuer["url"]` is its own URL, set once it listens."""
    app = FastAPI()
    clients: dict[str, list[str]] = {}
    grants: dict[str, Grant] = {}

    @app.get("/.well-known/oauth-authorization-server")
    def metadata() -> dict[str, Any]:
        url = issuer["url"]
        return {
            "issuer": url,
            "authorization_endpoint": f"{url}/authorize",
            "token_endpoint": f"{url}/token",
            "registration_endpoint": f"{url}/register",
            "jwks_uri": f"{url}/jwks",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
        }

    @app.post("/register", status_code=201)
    async def register(request: Request) -> dict[str, Any]:
        asked: dict[str, Any] = await request.json()
        client_id = secrets.token_urlsafe(8)
        clients[client_id] = list(asked.get("redirect_uris") or [])
        return {**asked, "client_id": client_id, "token_endpoint_auth_method": "none"}

    @app.get("/authorize")
    def authorize(
        client_id: str,
        redirect_uri: str,
        state: str,
        code_challenge: str,
        code_challenge_method: str,
        response_type: str = "code",
        scope: str = "",
        resource: str | None = None,
    ) -> RedirectResponse:
        if redirect_uri not in clients.get(client_id, ()) or code_challenge_method != "S256" or response_type != "code":
            raise HTTPException(400, "invalid_request")
        code = secrets.token_urlsafe(16)
        grants[code] = Grant(client_id, redirect_uri, code_challenge, scope, resource)
        issued.authorized_scopes.append(scope)
        return RedirectResponse(f"{redirect_uri}?code={code}&state={state}", status_code=302)

    @app.post("/token")
    def token(
        grant_type: str = Form(),
        code: str = Form(),
        redirect_uri: str = Form(),
        client_id: str = Form(),
        code_verifier: str = Form(),
        resource: str | None = Form(None),
    ) -> JSONResponse:
        grant = grants.pop(code, None)
        verified = base64.urlsafe_b64encode(hashlib.sha256(code_verifier.encode()).digest()).rstrip(b"=").decode()
        if (
            grant_type != "authorization_code"
            or grant is None
            or grant.client_id != client_id
            or grant.redirect_uri != redirect_uri
            or not secrets.compare_digest(verified, grant.challenge)
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        now = int(time.time())
        claims = {
            "iss": issuer["url"],
            "aud": resource or grant.resource,
            "sub": "alice",
            "scope": grant.scope,
            "iat": now,
            "exp": now + TOKEN_LIFETIME_S,
        }
        issued.token_claims.append(claims)
        access = jwt.encode(claims, PRIVATE, algorithm="RS256", headers={"kid": KID})
        body = {"access_token": access, "token_type": "Bearer", "expires_in": TOKEN_LIFETIME_S, "scope": grant.scope}
        return JSONResponse(body, headers={"cache-control": "no-store"})

    @app.get("/jwks")
    def jwks() -> dict[str, Any]:
        return {"keys": [public_jwk(KID)]}

    return app
