"""JWTBearer: every forged, misdirected or stale token is refused with the challenge RFC 9728
names, and a good one yields its principal; used as an ordinary route dependency."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import Depends, FastAPI, Security
from fastapi.testclient import TestClient

from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC, hs256_with_public_key, public_jwk, rsa_pair, token, unsigned
from tests.support.servers import serve

OTHER_PRIVATE, _ = rsa_pair()  # a key the issuer never published


def app_with(bearer: JWTBearer) -> FastAPI:
    app = FastAPI()

    # Defaults rather than Annotated: the dependency is a local object, which string
    # annotations (from __future__) could not name.
    @app.get("/me")
    def me(principal: Principal = Depends(bearer)) -> dict[str, Any]:  # noqa: B008
        return {"sub": principal.subject, "scopes": sorted(principal.scopes)}

    @app.get("/admin")
    def admin(principal: Principal = Security(bearer, scopes=["notes:admin"])) -> dict[str, str]:  # noqa: B008
        return {"sub": principal.subject}

    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk("k1")]})
    with TestClient(app_with(bearer)) as test_client:
        yield test_client


REFUSED = [
    ("alg none", unsigned()),
    ("wrong audience", token(aud="https://other.example")),
    ("wrong issuer", token(iss="https://evil.example")),
    ("expired", token(exp=int(time.time()) - 3600)),
    ("not yet valid", token(nbf=int(time.time()) + 3600)),
    ("hs256 signed with the rsa public key", hs256_with_public_key()),
    ("unknown kid", token(kid="k9")),
    ("signed by another key", token(private=OTHER_PRIVATE)),
    ("no subject", token(sub=None)),
    ("garbage", "not.a.jwt"),
]


@pytest.mark.parametrize("bad", [row[1] for row in REFUSED], ids=[row[0] for row in REFUSED])
def test_a_bad_token_is_refused_with_the_resource_metadata_challenge(client: TestClient, bad: str) -> None:
    response = client.get("/me", headers={"authorization": f"Bearer {bad}"})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource"')
    assert 'error="invalid_token"' in challenge
    assert client.get("/me", headers={"authorization": f"Bearer {token()}"}).status_code == 200  # still serving


def test_no_token_is_a_challenge_without_an_error(client: TestClient) -> None:
    response = client.get("/me")
    assert response.status_code == 401
    assert "error=" not in response.headers["www-authenticate"]


def test_a_good_token_yields_its_principal(client: TestClient) -> None:
    response = client.get("/me", headers={"authorization": f"Bearer {token(scope='notes:read notes:write')}"})
    assert response.json() == {"sub": "alice", "scopes": ["notes:read", "notes:write"]}


def test_scopes_from_scp_lists_count_too(client: TestClient) -> None:
    response = client.get("/me", headers={"authorization": f"Bearer {token(scope=None, scp=['a', 'b'])}"})
    assert response.json()["scopes"] == ["a", "b"]


def test_a_missing_scope_is_403_insufficient_scope(client: TestClient) -> None:
    response = client.get("/admin", headers={"authorization": f"Bearer {token()}"})
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
    assert 'scope="notes:admin"' in response.headers["www-authenticate"]
    allowed = client.get("/admin", headers={"authorization": f"Bearer {token(scope='notes:admin')}"})
    assert allowed.json() == {"sub": "alice"}


def test_a_pem_key_verifies_without_a_kid() -> None:
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    with TestClient(app_with(bearer)) as client:
        assert client.get("/me", headers={"authorization": f"Bearer {token(kid=None)}"}).status_code == 200


def test_a_jwks_url_is_fetched_and_refreshed_for_a_new_kid() -> None:
    keys: dict[str, Any] = {"keys": [public_jwk("k1")]}
    issuer = FastAPI()

    @issuer.get("/jwks")
    def jwks() -> dict[str, Any]:
        return keys

    with serve(issuer) as url:
        bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks_url=f"{url}/jwks")
        with TestClient(app_with(bearer)) as client:
            assert client.get("/me", headers={"authorization": f"Bearer {token(kid='k1')}"}).status_code == 200
            keys["keys"].append(public_jwk("k2"))  # the issuer rotates in a new key
            refreshed_too_soon = client.get("/me", headers={"authorization": f"Bearer {token(kid='k2')}"})
            bearer.jwks_refresh_s = 0.0  # the refresh interval has passed
            refreshed = client.get("/me", headers={"authorization": f"Bearer {token(kid='k2')}"})
    # The refresh on an unknown kid is bounded: right after the first fetch it waits its turn.
    assert refreshed_too_soon.status_code == 401
    assert refreshed.status_code == 200


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of key, jwks or jwks_url"),
        ({"key": PUBLIC, "algorithms": ("none",)}, "never 'none'"),
        ({"key": PUBLIC, "leeway_s": -1}, "leeway_s must be zero or more seconds"),
    ],
)
def test_bad_configuration_is_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JWTBearer(issuer=ISSUER, audience=AUDIENCE, **options)
