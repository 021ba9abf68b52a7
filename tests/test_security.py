"""The security table: each row is an attack on an endpoint facing the open internet, tried
against a real server and refused; after every row the server still answers normally.

The endpoint is guarded by `auth=JWTBearer(...)`, binds sessions to the principal, caps bodies,
forwards an `x-api-key` credential, and confirms mutations (the defaults)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import pytest
from fastapi import FastAPI, Header, Request, Security

from fastapi_mcp_routes import JWTBearer, Limits, Principal, mcp_routes, mcp_tool
from tests.support.confirmation import pending_of
from tests.support.jsonrpc import HEADERS, call_tool, initialize, open_session, rpc, tool_call
from tests.support.jwt import AUDIENCE, ISSUER, hs256_with_public_key, public_jwk, token, unsigned
from tests.support.servers import serve
from tests.support.waits import WAIT_S

MAX_BODY = 64 * 1024
ORDER = {"item": "tea"}


class Held:
    """Holds the `hold` route until a row lets it go."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.orders: list[str] = []


held = Held()


def make_app() -> FastAPI:
    app = FastAPI()
    bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk("k1")]})
    app.include_router(
        mcp_routes(app, auth=bearer, limits=Limits(max_body_bytes=MAX_BODY), forward_headers=["x-api-key"])
    )

    @mcp_tool()
    @app.post("/orders")
    def place_order(item: str) -> dict[str, int]:
        held.orders.append(item)
        return {"orders": len(held.orders)}

    @mcp_tool()
    @app.get("/key")
    def echo_key(x_api_key: Annotated[str, Header()], request: Request) -> dict[str, str]:
        return {"key": x_api_key, "authorization": request.headers["authorization"][:7]}

    # Defaults rather than Annotated: the dependency is a local object, which string
    # annotations (from __future__) could not name.
    @mcp_tool(description="Secret numbers for admins.")
    @app.get("/admin/report")
    def admin_report(principal: Principal = Security(bearer, scopes=["admin"])) -> dict[str, int]:  # noqa: B008
        return {"secret": 42}

    @mcp_tool()
    @app.get("/hold")
    def hold() -> dict[str, bool]:
        held.started.set()
        return {"released": held.release.wait(WAIT_S)}

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


@dataclass
class Peer:
    """One HTTP client and what it knows about the server."""

    http: httpx.Client
    base_url: str

    def as_(self, subject: str = "alice", **extra: str) -> dict[str, str]:
        return {**HEADERS, "authorization": f"Bearer {token(sub=subject)}", **extra}

    def open(self, subject: str = "alice") -> dict[str, str]:
        """A session opened by `subject`; the headers its later requests carry."""
        return open_session(self.http, headers=self.as_(subject))

    def call(self, headers: dict[str, str], name: str, arguments: dict[str, Any], request_id: int = 1) -> Any:
        return call_tool(self.http, name, arguments, headers=headers, request_id=request_id)


def pending_token(peer: Peer, headers: dict[str, str], arguments: dict[str, Any]) -> str:
    pending = pending_of(peer.call(headers, "place_order", arguments))
    token: str = pending["token"]
    return token


# -- the rows --------------------------------------------------------------------------------


def session_id_with_other_credentials(peer: Peer) -> None:
    alice = peer.open("alice")
    stolen = peer.as_("mallory", **{"mcp-session-id": alice["mcp-session-id"]})
    response = peer.http.post("/mcp", json=rpc("ping"), headers=stolen)
    assert response.status_code == 404


def cancellation_from_another_session(peer: Peer) -> None:
    held.started.clear()
    held.release.clear()
    alice, mallory = peer.open("alice"), peer.open("alice")  # the same principal, another session
    answers: list[Any] = []
    caller = threading.Thread(target=lambda: answers.append(peer.call(alice, "hold", {}, request_id=7)))
    caller.start()
    assert held.started.wait(WAIT_S)
    cancel = rpc("notifications/cancelled", {"requestId": 7}, request_id=None)
    assert peer.http.post("/mcp", json=cancel, headers=mallory).status_code == 202
    # The notification is handled before its 202: a wrongly cancelled call would be cancelled now.
    held.release.set()
    caller.join(WAIT_S)
    assert answers[0]["structuredContent"] == {"released": True}


def confirmation_token_replayed(peer: Peer) -> None:
    alice = peer.open()
    token = pending_token(peer, alice, ORDER)
    assert "isError" not in peer.call(alice, "place_order", {**ORDER, "confirmationToken": token})
    replayed = peer.call(alice, "place_order", {**ORDER, "confirmationToken": token})
    assert replayed["isError"] is True
    assert "already used" in replayed["content"][0]["text"]


def confirmation_token_for_other_arguments(peer: Peer) -> None:
    alice = peer.open()
    token = pending_token(peer, alice, ORDER)
    refused = peer.call(alice, "place_order", {"item": "gold", "confirmationToken": token})
    assert refused["isError"] is True
    assert "other arguments" in refused["content"][0]["text"]


def confirmation_token_from_another_caller(peer: Peer) -> None:
    token = pending_token(peer, peer.open("alice"), ORDER)
    refused = peer.call(peer.open("mallory"), "place_order", {**ORDER, "confirmationToken": token})
    assert refused["isError"] is True
    assert "not issued to this caller" in refused["content"][0]["text"]


def confirmation_token_forged(peer: Peer) -> None:
    refused = peer.call(peer.open(), "place_order", {**ORDER, "confirmationToken": "A" * 32})
    assert refused["isError"] is True
    assert "not valid" in refused["content"][0]["text"]


def origin(value: Callable[[str], str]) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        port = peer.base_url.rsplit(":", 1)[1]
        headers = {**peer.as_(), "origin": value(port)}
        assert peer.http.post("/mcp", json=initialize(), headers=headers).status_code == 403

    return attack


def jwt(bad: str) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        headers = {**HEADERS, "authorization": f"Bearer {bad}"}
        response = peer.http.post("/mcp", json=rpc("ping"), headers=headers)
        assert response.status_code == 401
        assert 'error="invalid_token"' in response.headers["www-authenticate"]

    return attack


def tool_needing_a_scope_the_token_lacks(peer: Peer) -> None:
    alice = peer.open()  # scope notes:read, not admin
    listing = peer.http.post("/mcp", json=rpc("tools/list"), headers=alice).json()
    # Listed, with the scopes it needs, so that alice's client knows what it may step up to.
    tools = {tool["name"]: tool for tool in listing["result"]["tools"]}
    assert tools["admin_report"]["_meta"]["fastapi-mcp-routes/scopes"] == ["admin"]
    refused = peer.http.post("/mcp", json=tool_call("admin_report"), headers=alice)
    assert refused.status_code == 403  # the step-up challenge, and nothing of the route's answer
    assert "insufficient_scope" in refused.headers["www-authenticate"]
    assert "Secret numbers" not in refused.text
    assert "42" not in refused.text


def argument_named_like_a_credential_header(peer: Peer) -> None:
    alice = peer.open()
    mine = {**alice, "x-api-key": "alices-key"}
    forged = peer.call(mine, "echo_key", {"x-api-key": "forged", "authorization": "Bearer forged"})
    assert forged["isError"] is True
    assert "Unknown argument" in forged["content"][0]["text"]
    own = peer.call(mine, "echo_key", {})
    assert own["structuredContent"] == {"key": "alices-key", "authorization": "Bearer "}


def oversized_body(peer: Peer) -> None:
    alice = peer.open()
    body = tool_call("place_order", {"item": "x" * (MAX_BODY + 1)})
    assert peer.http.post("/mcp", json=body, headers=alice).status_code == 413


def deeply_nested_json(peer: Peer) -> None:
    alice = peer.open()
    response = peer.http.post("/mcp", content=b"[" * 30_000 + b"]" * 30_000, headers=alice)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    nested: Any = "deep"
    for _ in range(50):  # within Limits.max_argument_depth; parses, but is no order: refused before a token
        nested = {"item": nested}
    refused = peer.call(alice, "place_order", {"item": nested})
    assert refused["isError"] is True
    assert "_meta" not in refused  # no plan, no token
    assert "must be a string" in refused["content"][0]["text"]


ROWS: list[tuple[str, Callable[[Peer], None]]] = [
    ("session id reused with other credentials -> 404", session_id_with_other_credentials),
    ("cancellation from another session -> no effect", cancellation_from_another_session),
    ("confirmation token replayed -> refused", confirmation_token_replayed),
    ("confirmation token for other arguments -> refused", confirmation_token_for_other_arguments),
    ("confirmation token from another caller -> refused", confirmation_token_from_another_caller),
    ("confirmation token forged -> refused", confirmation_token_forged),
    ("Origin null -> 403", origin(lambda port: "null")),
    ("Origin on another port -> 403", origin(lambda port: "http://127.0.0.1:1")),
    ("Origin with another scheme -> 403", origin(lambda port: f"https://127.0.0.1:{port}")),
    ("Origin on a look-alike host -> 403", origin(lambda port: f"http://127.0.0.1.evil.example:{port}")),
    ("JWT alg none -> 401", jwt(unsigned())),
    ("JWT for another audience -> 401", jwt(token(aud="https://other.example"))),
    ("JWT from another issuer -> 401", jwt(token(iss="https://evil.example"))),
    ("JWT expired -> 401", jwt(token(exp=int(time.time()) - 3600))),
    ("JWT HS256-signed with the RSA public key -> 401", jwt(hs256_with_public_key())),
    ("JWT with an unknown kid -> 401", jwt(token(kid="k9"))),
    (
        "a tool needing a scope the token lacks -> listed with it, called: 403 step-up",
        tool_needing_a_scope_the_token_lacks,
    ),
    ("argument named like a credential header -> not the caller's credential", argument_named_like_a_credential_header),
    ("oversized body -> 413", oversized_body),
    ("deeply nested JSON -> parse error, no crash", deeply_nested_json),
]


@pytest.mark.parametrize("attack", [row[1] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_attack_is_refused_and_the_server_keeps_serving(base_url: str, attack: Callable[[Peer], None]) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        peer = Peer(http, base_url)
        attack(peer)
        alice = peer.open()
        pong = http.post("/mcp", json=rpc("ping", request_id=9), headers=alice)
        assert pong.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}
        echoed = peer.call({**alice, "x-api-key": "k"}, "echo_key", {})
        assert echoed["structuredContent"] == {"key": "k", "authorization": "Bearer "}
