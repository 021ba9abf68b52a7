"""JWTBearer: every forged, misdirected or stale token is refused with the challenge RFC 9728
names, and a good one yields its principal; used as an ordinary route dependency."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from fastapi import Depends, FastAPI, Security
from fastapi.testclient import TestClient

from fastapi_mcp_routes.auth.jwt import JWTBearer, Principal
from fastapi_mcp_routes.auth.tokens import MAX_TOKEN_CHARS
from tests.support.jwt import (
    AUDIENCE,
    EC_PRIVATE,
    EC_PUBLIC,
    ED_PRIVATE,
    ED_PUBLIC,
    ISSUER,
    PRIVATE,
    PUBLIC,
    SECRET,
    claims,
    ec_pair,
    hmac_signed,
    hs256_with_public_jwk,
    hs256_with_public_key,
    public_jwk,
    rsa_pair,
    secret_jwk,
    segment,
    signed,
    signed_by_hand,
    token,
    unsigned,
)
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


def status_of(bearer: JWTBearer, bad: str) -> tuple[int, str]:
    """The status and challenge `bearer` answers `bad` with, on a fresh app."""
    with TestClient(app_with(bearer)) as client:
        response = client.get("/me", headers={"authorization": f"Bearer {bad}"})
    return response.status_code, response.headers.get("www-authenticate", "")


def accepts(bearer: JWTBearer, good: str) -> bool:
    with TestClient(app_with(bearer)) as client:
        response = client.get("/me", headers={"authorization": f"Bearer {good}"})
    return response.status_code == 200 and response.json()["sub"] == "alice"


def refuses(bearer: JWTBearer, bad: str) -> bool:
    status, challenge = status_of(bearer, bad)
    return status == 401 and 'error="invalid_token"' in challenge


# Each algorithm with the issuer's keys as a PEM and as a JWK: (id, algorithm, signing key, keys).
SIGNED_BY = [
    ("RS256 pem", "RS256", PRIVATE, {"key": PUBLIC}),
    ("RS256 jwk", "RS256", PRIVATE, {"jwks": {"keys": [public_jwk("k1")]}}),
    ("PS256 jwk without alg", "PS256", PRIVATE, {"jwks": {"keys": [public_jwk("k1", alg=None)]}}),
    ("ES256 pem", "ES256", EC_PRIVATE, {"key": EC_PUBLIC}),
    ("ES256 jwk", "ES256", EC_PRIVATE, {"jwks": {"keys": [public_jwk("k1", EC_PUBLIC, "ES256")]}}),
    ("EdDSA pem", "EdDSA", ED_PRIVATE, {"key": ED_PUBLIC}),
    ("EdDSA jwk", "EdDSA", ED_PRIVATE, {"jwks": {"keys": [public_jwk("k1", ED_PUBLIC, "EdDSA")]}}),
    ("HS256 jwk", "HS256", SECRET, {"key": secret_jwk("k1")}),
]


@pytest.mark.parametrize(
    ("algorithm", "private", "keys"), [row[1:] for row in SIGNED_BY], ids=[row[0] for row in SIGNED_BY]
)
def test_a_token_signed_by_the_issuers_key_is_accepted(algorithm: str, private: Any, keys: dict[str, Any]) -> None:
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, algorithms=(algorithm,), **keys)
    assert accepts(bearer, signed(private, algorithm))
    assert refuses(bearer, signed(private, algorithm, iss="https://evil.example"))


def rs256(**options: Any) -> JWTBearer:
    return JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, **options)


def test_an_audience_list_naming_this_resource_is_accepted() -> None:
    assert accepts(rs256(), token(aud=["https://other.example", AUDIENCE]))


def test_an_audience_list_without_this_resource_is_refused() -> None:
    assert refuses(rs256(), token(aud=["https://other.example", "https://third.example"]))


def test_a_token_without_an_audience_or_an_expiry_is_refused() -> None:
    assert refuses(rs256(), token(aud=None))
    assert refuses(rs256(), token(exp=None))
    assert refuses(rs256(), token(iss=None))


def test_the_leeway_admits_a_small_clock_skew_and_no_more() -> None:
    now = int(time.time())
    bearer = rs256(leeway_s=60)
    assert accepts(bearer, token(exp=now - 10))  # expired 10 s ago, within the leeway
    assert accepts(bearer, token(nbf=now + 10))  # valid in 10 s, within the leeway
    assert refuses(bearer, token(exp=now - 600))
    assert refuses(bearer, token(nbf=now + 600))


def test_an_hs256_token_signed_with_the_public_pem_is_refused_even_where_hs256_is_allowed() -> None:
    bearer = rs256(algorithms=("RS256", "HS256"))
    assert accepts(bearer, token())
    assert refuses(bearer, hs256_with_public_key())


def test_an_hs256_token_signed_with_the_public_jwk_is_refused_even_where_hs256_is_allowed() -> None:
    jwk = public_jwk("k1", alg=None)
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [jwk]}, algorithms=("RS256", "HS256"))
    assert accepts(bearer, token())
    assert refuses(bearer, hs256_with_public_jwk(jwk))


def test_an_algorithm_outside_the_allowed_list_is_refused() -> None:
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk("k1", alg=None)]})
    assert refuses(bearer, signed(PRIVATE, "PS256"))  # the same key, an algorithm not allowed
    assert refuses(bearer, signed(PRIVATE, "RS512"))


def test_a_key_of_the_wrong_type_for_the_algorithm_is_never_used() -> None:
    # An ES256 token whose kid names the RSA key, and one signed on a P-384 key it names.
    p384_private, p384_public = ec_pair(ec.SECP384R1())
    keys = {"keys": [public_jwk("k1", alg=None), public_jwk("k2", p384_public, alg=None)]}
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks=keys, algorithms=("RS256", "ES256", "ES384"))
    assert accepts(bearer, signed(p384_private, "ES384", kid="k2"))
    assert refuses(bearer, signed(EC_PRIVATE, "ES256", kid="k1"))
    assert refuses(bearer, signed_by_hand(p384_private, {"alg": "ES256", "kid": "k2"}, claims(), ecdsa=True))


def test_a_key_published_for_another_algorithm_or_use_is_not_used() -> None:
    keys = {"keys": [{**public_jwk("k1"), "alg": "RS512"}, {**public_jwk("k2"), "use": "enc"}]}
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks=keys, algorithms=("RS256", "RS512"))
    assert refuses(bearer, token(kid="k1"))
    assert refuses(bearer, token(kid="k2"))
    assert accepts(bearer, signed(PRIVATE, "RS512", kid="k1"))


def _with_signature(good: str, signature: str) -> str:
    return good.rsplit(".", 1)[0] + "." + signature


def _header(value: Any) -> str:
    return f"{segment(value) if isinstance(value, dict) else value}.{segment(claims())}.c2ln"


MALFORMED = [
    ("one segment", segment({"alg": "RS256"})),
    ("two segments", token().rsplit(".", 1)[0]),
    ("four segments", token() + ".e30"),
    ("empty", "..."),
    ("bad base64 in the header", _header("ey!!J")),
    ("a header of impossible length", _header("eyJhb")),
    ("bad base64 in the signature", _with_signature(token(), "!!!!")),
    ("non-JSON header", _header(segment(b"not json"))),
    ("a header that is a list", _header(segment(b'["RS256"]'))),
    ("a header of deep nesting", _header(segment(b"[" * 8000 + b"]" * 8000))),
    ("no alg", _header({"typ": "JWT"})),
    ("alg not a string", _header({"alg": ["RS256"]})),
    ("kid not a string", _header({"alg": "RS256", "kid": 7})),
    ("a bad signature", _with_signature(token(), token(private=OTHER_PRIVATE).rsplit(".", 1)[1])),
    ("a payload that is not JSON", f"{token().split('.')[0]}.{segment(b'not json')}.c2ln"),
]


@pytest.mark.parametrize("bad", [row[1] for row in MALFORMED], ids=[row[0] for row in MALFORMED])
def test_a_malformed_token_is_401_and_not_echoed(bad: str) -> None:
    status, challenge = status_of(rs256(), bad)
    assert status == 401
    assert 'error="invalid_token"' in challenge
    with TestClient(app_with(rs256())) as client:
        body = client.get("/me", headers={"authorization": f"Bearer {bad}"}).text
    assert bad not in body
    assert body == '{"detail":"The bearer token is not valid."}'


def test_a_token_naming_a_critical_extension_is_refused() -> None:
    # Signed by the issuer's own key: only the `crit` header makes it unacceptable.
    good_claims = {**claims(), "scope": "notes:read"}
    critical = jwt.encode(good_claims, PRIVATE, "RS256", headers={"crit": ["exp-policy"], "exp-policy": 1})
    # RFC 7797's b64, which PyJWT understands: still no extension this resource server expects.
    b64 = signed_by_hand(PRIVATE, {"alg": "RS256", "crit": ["b64"], "b64": True}, good_claims)
    assert accepts(rs256(), jwt.encode(good_claims, PRIVATE, "RS256"))
    assert refuses(rs256(), critical)
    assert refuses(rs256(), b64)


@pytest.mark.parametrize("size", [MAX_TOKEN_CHARS + 1, 1024 * 1024])
def test_a_huge_token_is_401(size: int) -> None:
    # A token of the right shape whose header alone is huge, and one whose claims are.
    huge_header = _header({"alg": "RS256", "kid": "k" * size})
    huge_claims = token(padding="x" * size)
    assert refuses(rs256(), huge_header)
    assert refuses(rs256(), huge_claims)


def test_a_token_just_under_the_length_cap_is_still_verified() -> None:
    good = token()
    padded = token(padding="x" * ((MAX_TOKEN_CHARS - len(good)) * 3 // 4 - 100))
    assert len(padded) <= MAX_TOKEN_CHARS
    assert accepts(rs256(), padded)


def test_an_hs256_secret_is_a_jwk_and_its_tokens_need_it() -> None:
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=secret_jwk("k1"), algorithms=("HS256",))
    header = {"alg": "HS256", "typ": "JWT"}
    assert accepts(bearer, hmac_signed(SECRET, header, {**claims(), "scope": "x"}))
    assert refuses(bearer, hmac_signed(b"another secret of thirty-two by", header, claims()))
