"""DPoP-bound tokens (RFC 9449): `JWTBearer(dpop=...)` takes a token bound to the client's key
only with a fresh proof of that key for the request, refuses every forged, stale, misdirected or
replayed proof with a `DPoP` challenge, and lets a tool call's route accept the proof that the
MCP request carried, counted once."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Request, Security
from fastapi.testclient import TestClient
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from fastapi_mcp_routes import JWTBearer, Principal, ProtectedResource, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.auth.dpop import MAX_PROOF_CHARS, access_token_hash
from fastapi_mcp_routes.store import MemoryStore
from fastapi_mcp_routes.wire.challenge import CHALLENGE_META_KEY
from fastapi_mcp_routes.wire.constants import TASKS_EXTENSION
from tests.support.dpop import EDDSA, ES256, OTHER, ClientKey, DpopAuth, hmac_proof, issued, proof, unsigned_proof
from tests.support.jsonrpc import HEADERS, initialize, rpc, tool_call
from tests.support.jwt import AUDIENCE, ISSUER, PUBLIC
from tests.support.machine import free_port
from tests.support.processes import serve_processes
from tests.support.servers import serve
from tests.support.stateless import STATELESS_VERSION, post_stateless, stateless_meta
from tests.support.waits import WAIT_S

ME: Final = "http://testserver/me"
METADATA: Final = 'resource_metadata="http://testserver/.well-known/oauth-protected-resource"'
RSA: Final = ClientKey("RS256")
SHORT_RSA: Final = ClientKey("RS256", rsa_bits=1024)


class KeptProofs(MemoryStore):
    """A store that says which names it was asked to keep once."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def claim_once(
        self, name: str, ttl_s: float, max_kept: int, *, owner: str | None = None, max_per_owner: int = 0
    ) -> bool | None:
        self.asked.append(name)
        return await super().claim_once(name, ttl_s, max_kept, owner=owner, max_per_owner=max_per_owner)


def bearer(mode: str = "required", **options: Any) -> JWTBearer:
    return JWTBearer(
        issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop=mode, **{"dpop_store": MemoryStore(), **options}
    )


def rest_app(guard: JWTBearer) -> FastAPI:
    app = FastAPI()

    @app.get("/me")
    def me(principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        return {"sub": principal.subject}

    @app.post("/me")
    def post_me(principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        return {"sub": principal.subject}

    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(rest_app(bearer())) as test_client:
        yield test_client


def dpop_headers(key: ClientKey, token: str, method: str = "GET", url: str = ME, **changes: Any) -> dict[str, str]:
    return {"authorization": f"DPoP {token}", "dpop": proof(key, method, url, token, **changes)}


def assert_challenged(response: httpx.Response, error: str | None) -> str:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith(f"DPoP {METADATA}"), challenge
    assert 'algs="ES256 EdDSA PS256 RS256"' in challenge
    if error is None:
        assert "error=" not in challenge
    else:
        assert f'error="{error}"' in challenge
    return challenge


# -- a proof for the request --------------------------------------------------------------------


@pytest.mark.parametrize("key", [ES256, EDDSA, RSA], ids=lambda key: key.algorithm)
def test_a_bound_token_with_a_good_proof_is_accepted(client: TestClient, key: ClientKey) -> None:
    token = issued(key.jkt)
    response = client.get("/me", headers=dpop_headers(key, token))
    assert response.status_code == 200, response.text
    assert response.json() == {"sub": "alice"}


def test_a_proof_used_twice_is_refused_the_second_time(client: TestClient) -> None:
    token = issued(ES256.jkt)
    headers = dpop_headers(ES256, token)
    assert client.get("/me", headers=headers).status_code == 200
    assert_challenged(client.get("/me", headers=headers), "invalid_dpop_proof")
    assert client.get("/me", headers=dpop_headers(ES256, token)).status_code == 200  # a new proof is good


def test_htu_is_compared_once_normalized(client: TestClient) -> None:
    token = issued(ES256.jkt)
    for url in ("HTTP://TestServer:80/me", "http://testserver/./me", "http://testserver/%6De?q=1#f"):
        assert client.get("/me", headers=dpop_headers(ES256, token, url=url)).status_code == 200, url


def _two_headers(token: str) -> list[tuple[str, str]]:
    return [
        ("authorization", f"DPoP {token}"),
        ("dpop", proof(ES256, "GET", ME, token)),
        ("dpop", proof(ES256, "GET", ME, token)),
    ]


BOUND: Final = issued(ES256.jkt)
REFUSED_PROOFS: Final = [
    ("wrong htm", dpop_headers(ES256, BOUND, method="POST")),
    ("wrong htu", dpop_headers(ES256, BOUND, url="http://testserver/other")),
    ("wrong htu host", dpop_headers(ES256, BOUND, url="http://elsewhere/me")),
    ("stale iat", dpop_headers(ES256, BOUND, iat=int(time.time()) - 3600)),
    ("future iat", dpop_headers(ES256, BOUND, iat=int(time.time()) + 3600)),
    ("iat not a number", dpop_headers(ES256, BOUND, iat="now")),
    ("iat NaN", dpop_headers(ES256, BOUND, iat=float("nan"))),
    ("iat infinite", dpop_headers(ES256, BOUND, iat=float("inf"))),
    ("iat past what a float holds", dpop_headers(ES256, BOUND, iat=10**400)),
    ("no ath", dpop_headers(ES256, BOUND, ath=None)),
    ("ath of another token", dpop_headers(ES256, BOUND, ath=access_token_hash(issued(ES256.jkt, sub="bob")))),
    ("no jti", dpop_headers(ES256, BOUND, jti=None)),
    ("jti too long", dpop_headers(ES256, BOUND, jti="j" * 257)),
    ("jwk with private parts", dpop_headers(ES256, BOUND, header={"jwk": ES256.private_jwk()})),
    ("jwk of another curve", dpop_headers(ES256, BOUND, header={"jwk": {**ES256.jwk, "crv": "P-384"}})),
    ("no jwk", dpop_headers(ES256, BOUND, header={"jwk": None})),
    ("jwk of an unknown type", dpop_headers(ES256, BOUND, header={"jwk": {"kty": "XY", "x": "AA", "crv": "P-256"}})),
    ("rsa key of 1024 bits", dpop_headers(SHORT_RSA, issued(SHORT_RSA.jkt))),
    ("good but padded past the cap", dpop_headers(ES256, BOUND, pad="x" * MAX_PROOF_CHARS)),
    ("typ JWT", dpop_headers(ES256, BOUND, header={"typ": "JWT"})),
    ("alg none", {"authorization": f"DPoP {BOUND}", "dpop": unsigned_proof(ES256, "GET", ME, BOUND)}),
    ("alg HS256", {"authorization": f"DPoP {BOUND}", "dpop": hmac_proof(ES256, "GET", ME, BOUND)}),
    ("no proof", {"authorization": f"DPoP {BOUND}"}),
    ("malformed", {"authorization": f"DPoP {BOUND}", "dpop": "not.a.jws!"}),
    ("two segments", {"authorization": f"DPoP {BOUND}", "dpop": "eyJ0eXAiOiJkcG9wK2p3dCJ9.e30"}),
    ("huge", {"authorization": f"DPoP {BOUND}", "dpop": "a" * (MAX_PROOF_CHARS + 1)}),
    ("very huge", {"authorization": f"DPoP {BOUND}", "dpop": "a." * 200_000 + "a"}),
]


@pytest.mark.parametrize("headers", [row[1] for row in REFUSED_PROOFS], ids=[row[0] for row in REFUSED_PROOFS])
def test_a_bad_proof_is_refused_with_the_dpop_challenge(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get("/me", headers=headers)
    assert_challenged(response, "invalid_dpop_proof")
    assert response.json() == {"detail": "The DPoP proof is not valid."}  # never an echo of the proof
    assert client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200  # still serving


def test_two_dpop_headers_are_refused(client: TestClient) -> None:
    response = client.get("/me", headers=_two_headers(BOUND))
    assert_challenged(response, "invalid_dpop_proof")


def test_a_proof_signed_by_another_key_than_the_tokens_is_refused_as_an_invalid_token(client: TestClient) -> None:
    # The proof is sound and names its own key, but the token is bound to ES256's.
    response = client.get("/me", headers=dpop_headers(OTHER, BOUND))
    assert_challenged(response, "invalid_token")
    assert response.json() == {"detail": "The access token is not valid."}


def test_a_bearer_token_where_dpop_is_required_is_refused(client: TestClient) -> None:
    unbound = issued(None)
    assert_challenged(client.get("/me", headers={"authorization": f"Bearer {unbound}"}), "invalid_token")
    assert_challenged(client.get("/me", headers={"authorization": f"Bearer {BOUND}"}), "invalid_token")
    # An unbound token under the DPoP scheme, even with a proof: nothing binds it to the key.
    assert_challenged(client.get("/me", headers=dpop_headers(ES256, unbound)), "invalid_token")


def test_a_missing_scope_is_a_403_challenged_with_the_dpop_scheme() -> None:
    guard = bearer()
    app = FastAPI()

    @app.get("/admin")
    def admin(principal: Principal = Security(guard, scopes=["notes:admin"])) -> dict[str, Any]:  # noqa: B008
        return {"sub": principal.subject}

    with TestClient(app) as test_client:
        response = test_client.get("/admin", headers=dpop_headers(ES256, BOUND, url="http://testserver/admin"))
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith(f'DPoP {METADATA}, scope="notes:admin", error="insufficient_scope", algs="'), challenge


def test_no_credentials_are_challenged_without_an_error(client: TestClient) -> None:
    assert_challenged(client.get("/me"), None)


def test_a_bad_token_with_a_good_proof_keeps_no_jti() -> None:
    store = KeptProofs()
    with TestClient(rest_app(bearer(dpop_store=store))) as test_client:
        forged = issued(ES256.jkt, aud="https://other.example")
        assert_challenged(test_client.get("/me", headers=dpop_headers(ES256, forged)), "invalid_token")
        assert_challenged(test_client.get("/me", headers=dpop_headers(OTHER, BOUND)), "invalid_token")
    assert store.asked == []  # only a proof by the key a valid token names makes the server keep anything


# -- "allowed" ----------------------------------------------------------------------------------


def test_allowed_takes_unbound_bearer_tokens_and_bound_ones_only_with_their_proof() -> None:
    with TestClient(rest_app(bearer("allowed"))) as test_client:
        unbound = issued(None)
        assert test_client.get("/me", headers={"authorization": f"Bearer {unbound}"}).status_code == 200
        assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200
        downgraded = test_client.get("/me", headers={"authorization": f"Bearer {BOUND}"})
        assert downgraded.status_code == 401
        challenge = downgraded.headers["www-authenticate"]
        assert challenge.startswith(f'Bearer {METADATA}, error="invalid_token", DPoP {METADATA}, algs="'), challenge
        missing = test_client.get("/me")
        assert missing.headers["www-authenticate"] == (
            f'Bearer {METADATA}, DPoP {METADATA}, algs="ES256 EdDSA PS256 RS256"'
        )
        bad_proof = test_client.get("/me", headers=dpop_headers(ES256, BOUND, htm="POST"))
        assert bad_proof.headers["www-authenticate"].startswith(f"Bearer {METADATA}, DPoP {METADATA}, error=")


def test_off_takes_bearer_tokens_as_before_and_no_dpop_scheme() -> None:
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC)
    with TestClient(rest_app(guard)) as test_client:
        assert test_client.get("/me", headers={"authorization": f"Bearer {issued(None)}"}).status_code == 200
        refused = test_client.get("/me", headers=dpop_headers(ES256, BOUND))
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f"Bearer {METADATA}"
        # A token its issuer bound to a client's key is no bearer token: a copy would work
        # without the key.
        stolen = test_client.get("/me", headers={"authorization": f"Bearer {BOUND}"})
        assert stolen.status_code == 401
        assert stolen.headers["www-authenticate"] == f'Bearer {METADATA}, error="invalid_token"'


# -- options and bounds ---------------------------------------------------------------------


def test_dpop_options_are_checked_when_the_bearer_is_made() -> None:
    with pytest.raises(ValueError, match="dpop must be one of"):
        bearer("sometimes")
    with pytest.raises(ValueError, match="needs dpop_store="):
        JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required")
    with pytest.raises(ValueError, match="asymmetric"):
        bearer(dpop_algorithms=["HS256"])
    with pytest.raises(ValueError, match="dpop_max_age_s"):
        bearer(dpop_max_age_s=0)
    with pytest.raises(ValueError, match="dpop_max_proofs"):
        bearer(dpop_max_proofs=0)


def test_an_algorithm_left_out_is_refused() -> None:
    with TestClient(rest_app(bearer(dpop_algorithms=["ES256"]))) as test_client:
        eddsa = issued(EDDSA.jkt)
        refused = test_client.get("/me", headers=dpop_headers(EDDSA, eddsa))
        assert refused.status_code == 401
        assert 'algs="ES256"' in refused.headers["www-authenticate"]


def test_a_window_of_its_own_refuses_older_proofs() -> None:
    with TestClient(rest_app(bearer(dpop_max_age_s=5))) as test_client:
        old = dpop_headers(ES256, BOUND, iat=int(time.time()) - 30)
        assert test_client.get("/me", headers=old).status_code == 401
        assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200


def test_past_the_bound_of_kept_proofs_new_ones_are_refused_and_kept_ones_stay_refused() -> None:
    with TestClient(rest_app(bearer(dpop_max_proofs=2))) as test_client:
        first = dpop_headers(ES256, BOUND)
        assert test_client.get("/me", headers=first).status_code == 200
        assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200
        full = test_client.get("/me", headers=dpop_headers(ES256, BOUND))
        assert full.status_code == 503
        assert full.headers["retry-after"] == "5"
        assert_challenged(test_client.get("/me", headers=first), "invalid_dpop_proof")  # never forgotten early


def test_past_its_keys_bound_a_clients_new_proofs_are_refused_while_another_client_is_served() -> None:
    with TestClient(rest_app(bearer(dpop_max_proofs_per_key=2))) as test_client:
        for _ in range(2):
            assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200
        flooding = test_client.get("/me", headers=dpop_headers(ES256, BOUND))
        assert flooding.status_code == 503
        assert flooding.headers["retry-after"] == "5"
        other = dpop_headers(EDDSA, issued(EDDSA.jkt))
        assert test_client.get("/me", headers=other).status_code == 200


def test_bearers_keeping_proofs_in_one_store_must_share_their_window() -> None:
    store = MemoryStore()
    JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="allowed", dpop_store=store)
    JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=store)  # the same window
    with pytest.raises(ValueError, match="same dpop_max_age_s"):
        JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=store, dpop_max_age_s=600)


def test_a_proof_that_cannot_be_remembered_is_refused_with_503_not_a_crash() -> None:
    from fastapi_mcp_routes import RedisStore

    gone = RedisStore.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nobody listens there
    with TestClient(rest_app(bearer(dpop_store=gone))) as test_client:
        refused = test_client.get("/me", headers=dpop_headers(ES256, BOUND))
    anyio.run(gone.aclose)
    assert refused.status_code == 503
    assert refused.json() == {"detail": "DPoP proofs cannot be checked now; try again shortly."}


# -- across processes ---------------------------------------------------------------------------


@pytest.mark.processes
@pytest.mark.redis
def test_a_proof_replayed_to_another_process_sharing_redis_is_refused(redis_url: str) -> None:
    env = {
        "FASTAPI_MCP_ROUTES_REDIS_URL": redis_url,
        "DPOP_APP_PREFIX": f"test-{secrets.token_hex(6)}:",
        "DPOP_APP_ISSUER_KEY": PUBLIC,
    }
    app = "tests.dpop_app:app"
    with serve_processes(app, env=env) as first, serve_processes(app, env=env) as second:
        host = first.removeprefix("http://")
        headers = {"host": host, **dpop_headers(ES256, BOUND, url=f"{first}/me")}
        with httpx.Client(timeout=WAIT_S) as http:
            assert http.get(f"{first}/me", headers=headers).status_code == 200
            # The same request, Host and all, sent to the other process: its htu fits, its jti does not.
            replayed = http.get(f"{second}/me", headers=headers)
            assert replayed.status_code == 401
            assert 'error="invalid_dpop_proof"' in replayed.headers["www-authenticate"]
            fresh = {"host": host, **dpop_headers(ES256, BOUND, url=f"{first}/me")}
            assert http.get(f"{second}/me", headers=fresh).status_code == 200


# -- tool calls ---------------------------------------------------------------------------------


def endpoint_app(store: KeptProofs) -> FastAPI:
    """`auth=` verifies the proof of every request to the endpoint; the route's own guard too."""
    app = FastAPI()
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=store)
    resource = ProtectedResource(authorization_servers=[ISSUER], resource=AUDIENCE)
    app.include_router(mcp_routes(app, auth=guard, protected_resource=resource))

    @mcp_tool()
    @app.get("/whoami")
    def whoami(ctx: ToolContext = Depends(), principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        assert isinstance(ctx.principal, Principal)
        return {"subject": principal.subject}

    return app


def route_app(store: KeptProofs) -> FastAPI:
    """No `auth=`: the route's own guard is the first to verify the proof."""
    app = FastAPI()
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=store)
    app.include_router(mcp_routes(app))

    @mcp_tool()
    @app.get("/notes/{note}")
    def read_note(note: str, principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        return {"note": note, "subject": principal.subject}

    @mcp_tool(confirm=True)
    @app.post("/notes/{note}/erase")
    def erase_note(note: str, request: Request, principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        return {"erased": note, "subject": principal.subject, "proof_sent_on": "dpop" in request.headers}

    return app


@asynccontextmanager
async def dpop_client(base_url: str, auth: DpopAuth, mode: str, **options: Any) -> AsyncIterator[Client]:
    """The official MCP client, sending `Authorization: DPoP` and a fresh proof on every request."""
    http = create_mcp_http_client(auth=auth)
    async with http, Client(streamable_http_client(f"{base_url}/mcp", http_client=http), mode=mode, **options) as c:
        yield c


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", STATELESS_VERSION])
@pytest.mark.parametrize("make", [endpoint_app, route_app], ids=["auth=", "route guard"])
async def test_a_tool_call_is_accepted_with_the_proof_of_its_mcp_request(mode: str, make: Any) -> None:
    store = KeptProofs()
    token = issued(EDDSA.jkt)
    auth = DpopAuth(EDDSA, token)
    tool, arguments = ("whoami", {}) if make is endpoint_app else ("read_note", {"note": "n1"})
    with serve(make(store)) as url:
        with anyio.fail_after(WAIT_S):
            async with dpop_client(url, auth, mode) as client:
                first = await client.call_tool(tool, arguments)
                second = await client.call_tool(tool, arguments)
    for result in (first, second):
        assert not result.is_error, result
        assert result.structured_content is not None
        assert result.structured_content["subject"] == "alice"
    # Each HTTP request's proof kept once, however many checked it: with auth=, every request's
    # (and the route's guard finds it kept); without, each tool call's, by the route's guard.
    assert len(store.asked) == len(set(store.asked)) == (auth.sent if make is endpoint_app else 2)


@pytest.mark.anyio
async def test_a_tool_call_without_the_right_key_is_refused_by_the_route() -> None:
    token = issued(ES256.jkt)
    with serve(route_app(KeptProofs())) as url:
        with anyio.fail_after(WAIT_S):
            async with dpop_client(url, DpopAuth(OTHER, token), "legacy") as client:
                result = await client.call_tool("read_note", {"note": "n1"})
    assert result.is_error
    assert "401" in str(result.content[0])


def test_the_calls_of_one_batch_count_the_proof_of_their_request_once() -> None:
    store = KeptProofs()
    token = issued(ES256.jkt)
    with TestClient(route_app(store)) as test_client:
        headers = {**HEADERS, "mcp-protocol-version": "2025-03-26", "authorization": f"DPoP {token}"}
        opened = test_client.post("/mcp", json=initialize("2025-03-26"), headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        test_client.post("/mcp", json=rpc("notifications/initialized", request_id=None), headers=headers)
        batch = [tool_call("read_note", {"note": f"n{i}"}, request_id=i) for i in range(3)]
        sent = {**headers, "accept": "application/json", "dpop": proof(ES256, "POST", "http://testserver/mcp", token)}
        answers = test_client.post("/mcp", json=batch, headers=sent).json()
    assert [answer["result"].get("isError", False) for answer in answers] == [False] * 3, answers
    assert len(store.asked) == 1


@pytest.mark.anyio
async def test_a_gated_call_whose_guards_are_asked_first_counts_the_proof_once() -> None:
    store = KeptProofs()
    token = issued(ES256.jkt)

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={})

    with serve(route_app(store)) as url:
        with anyio.fail_after(WAIT_S):
            async with dpop_client(url, DpopAuth(ES256, token), "legacy", elicitation_callback=on_elicit) as client:
                result = await client.call_tool("erase_note", {"note": "n1"})
    assert not result.is_error, result
    # The DPoP header is the MCP request's: the route does not get it, only what it proved.
    assert result.structured_content == {"erased": "n1", "subject": "alice", "proof_sent_on": False}
    assert len(store.asked) == 1  # the guards asked before the confirmation, then the route: one proof


def test_a_proof_for_the_route_itself_does_not_pass_for_an_mcp_request() -> None:
    token = issued(ES256.jkt)
    with TestClient(route_app(KeptProofs())) as test_client:
        headers = {**HEADERS, "mcp-protocol-version": "2025-11-25", "authorization": f"DPoP {token}"}
        opened = test_client.post("/mcp", json=initialize(), headers=headers)
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        aimed_at_route = proof(ES256, "GET", "http://testserver/notes/n1", token)
        sent = {**headers, "accept": "application/json", "dpop": aimed_at_route}
        answer = test_client.post("/mcp", json=tool_call("read_note", {"note": "n1"}), headers=sent).json()
    assert answer["result"]["isError"] is True


def test_a_missing_scope_at_a_tool_call_is_a_403_step_up_challenged_with_the_dpop_scheme() -> None:
    # A client holding a bound token must ask for a bound one with the scope: the endpoint's
    # step-up challenge speaks the scheme the request used.
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=MemoryStore())
    app = FastAPI()
    app.include_router(mcp_routes(app, auth=guard))

    @mcp_tool()
    @app.get("/notes/{note}/history")
    def history(note: str, principal: Principal = Security(guard, scopes=["notes:history"])) -> dict[str, Any]:  # noqa: B008
        return {"note": note}

    token = issued(ES256.jkt)  # scope notes:read only

    def sent(headers: dict[str, str]) -> dict[str, str]:
        return {**headers, "dpop": proof(ES256, "POST", "http://testserver/mcp", token)}

    with TestClient(app) as test_client:
        headers = {**HEADERS, "mcp-protocol-version": "2025-11-25", "authorization": f"DPoP {token}"}
        opened = test_client.post("/mcp", json=initialize(), headers=sent(headers))
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        answer = test_client.post("/mcp", json=tool_call("history", {"note": "n1"}), headers=sent(headers))
    assert answer.status_code == 403, answer.text
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("DPoP "), challenge
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="notes:history"' in challenge
    assert answer.json()["error"]["data"]["scopes"] == ["notes:history"]


def test_a_task_refused_for_a_scope_challenges_a_dpop_caller_with_the_dpop_scheme_in_its_result() -> None:
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=MemoryStore())
    app = FastAPI()
    app.include_router(mcp_routes(app, auth=guard))

    async def as_task(ctx: ToolContext = Depends()) -> None:  # noqa: B008
        await ctx.start_task()

    @mcp_tool(task="optional")
    @app.get("/notes/archive", dependencies=[Depends(as_task)])
    def archive(principal: Principal = Security(guard, scopes=["notes:archive"])) -> dict[str, Any]:  # noqa: B008
        return {"by": principal.subject}

    token = issued(ES256.jkt)  # scope notes:read only
    meta = {**stateless_meta({"extensions": {TASKS_EXTENSION: {}}})}

    def sent(**extra: str) -> dict[str, str]:
        return {"authorization": f"DPoP {token}", "dpop": proof(ES256, "POST", "http://testserver/mcp", token), **extra}

    with TestClient(app) as test_client:
        params = {"name": "archive", "arguments": {}}
        created = post_stateless(test_client, "tools/call", params, meta=meta, headers=sent())
        assert created.status_code == 200, created.text
        task_id = created.json()["result"]["taskId"]
        deadline = time.monotonic() + WAIT_S  # polled, as a client of a task does
        while True:
            polled = post_stateless(
                test_client, "tasks/get", {"taskId": task_id}, meta=meta, headers=sent(**{"mcp-name": task_id})
            )
            task = polled.json()["result"]
            if task["status"] != "working":
                break
            assert time.monotonic() < deadline, task
            time.sleep(0.05)
    assert task["result"]["isError"] is True
    challenge = task["result"]["_meta"][CHALLENGE_META_KEY]["wwwAuthenticate"]
    assert challenge.startswith('DPoP error="insufficient_scope", scope="notes:archive"'), challenge


@pytest.mark.parametrize("version", ["2025-11-25", STATELESS_VERSION])
def test_a_visible_predicate_reads_a_dpop_bound_principal_from_the_proof_of_the_list_request(version: str) -> None:
    store = KeptProofs()
    guard = JWTBearer(issuer=ISSUER, audience=AUDIENCE, key=PUBLIC, dpop="required", dpop_store=store)
    app = FastAPI()
    app.include_router(mcp_routes(app))

    @mcp_tool(visible=lambda principal, credentials: credentials.get(guard) is not None)
    @app.get("/mine")
    def mine(principal: Principal = Depends(guard)) -> dict[str, Any]:  # noqa: B008
        return {"subject": principal.subject}

    token = issued(ES256.jkt)
    headers = {**HEADERS, "mcp-protocol-version": version, "authorization": f"DPoP {token}"}

    def sent() -> dict[str, str]:
        return {**headers, "dpop": proof(ES256, "POST", "http://testserver/mcp", token)}

    with TestClient(app) as test_client:
        if version != STATELESS_VERSION:
            opened = test_client.post("/mcp", json=initialize(), headers=sent())
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
            listing = test_client.post("/mcp", json=rpc("tools/list"), headers=sent()).json()
        else:
            listing = post_stateless(test_client, "tools/list", headers=sent()).json()
    assert [tool["name"] for tool in listing["result"]["tools"]] == ["mine"]
    assert len(store.asked) == 1  # the list request's proof, checked against it once


def test_proofs_refused_past_a_bound_are_logged_once_a_minute_not_once_each(caplog: pytest.LogCaptureFixture) -> None:
    with TestClient(rest_app(bearer(dpop_max_proofs_per_key=1))) as test_client, caplog.at_level("WARNING"):
        assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 200
        for _ in range(5):
            assert test_client.get("/me", headers=dpop_headers(ES256, BOUND)).status_code == 503
    warnings = [record for record in caplog.records if "DPoP proofs refused" in record.getMessage()]
    assert len(warnings) == 1
    assert "dpop_max_proofs_per_key" in warnings[0].getMessage()
