"""The confirmation table: attacks on mutation confirmation, and the clients it must not break,
tried against a real server; after every row a fresh session still gets its answers.

The endpoint has no `auth=`: each route guards itself, so anonymous callers reach the gate.
Mutations are confirmed (the default); the app answers 403 through its own handler."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Request, Security
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyCookie, APIKeyHeader, HTTPBearer
from pydantic import BaseModel, create_model
from starlette.exceptions import HTTPException

from fastapi_mcp_routes import JWTBearer, Principal, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.call import QUESTION_KEY
from tests.support.confirmation import pending_of
from tests.support.jsonrpc import call_tool, open_session, rpc
from tests.support.jwt import AUDIENCE, ISSUER, public_jwk, token
from tests.support.servers import serve
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

WIDE_FIELDS = 150
Wide: type[BaseModel] = create_model("Wide", **{f"f{i:03}": (str | None, None) for i in range(WIDE_FIELDS)})


class Ledger:
    """What the routes did, read by the rows across the server's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[str] = []

    def add(self, what: str) -> None:
        with self.lock:
            self.done.append(what)

    def take(self) -> list[str]:
        with self.lock:
            done, self.done = self.done, []
            return done


ledger = Ledger()
bearer = JWTBearer(issuer=ISSUER, audience=AUDIENCE, jwks={"keys": [public_jwk("k1")]})
api_key = APIKeyHeader(name="x-api-key")
session_cookie = APIKeyCookie(name="session")
optional_bearer = HTTPBearer(auto_error=False)
overridden_key = APIKeyHeader(name="x-api-key")


def make_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, forward_headers=["x-api-key"]))

    @app.exception_handler(403)
    async def forbidden(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": f"Refused here: {exc.detail}"}, 403, exc.headers)

    @mcp_tool()
    @app.post("/orders")
    def place_order(item: str) -> dict[str, str]:
        ledger.add(f"order {item}")
        return {"ordered": item}

    @mcp_tool()
    @app.post("/posts")
    def publish(title: str, who: Principal = Security(bearer, scopes=["posts:write"])) -> dict[str, str]:  # noqa: B008
        ledger.add(f"post {title}")
        return {"published": title}

    @mcp_tool()
    @app.post("/keys", dependencies=[Depends(api_key)])
    def rotate_key() -> dict[str, bool]:
        ledger.add("rotated")
        return {"rotated": True}

    @mcp_tool()
    @app.post("/cart", dependencies=[Depends(session_cookie)])
    def add_to_cart(item: str) -> dict[str, str]:
        ledger.add(f"cart {item}")
        return {"added": item}

    @mcp_tool()
    @app.post("/comments")
    def comment(text: str, credentials: Any = Depends(optional_bearer)) -> dict[str, str]:  # noqa: B008
        ledger.add(f"comment {text}")
        return {"commented": text}

    @mcp_tool(visible=lambda principal: principal is not None)
    @app.post("/feedback")
    def feedback(text: str) -> dict[str, str]:
        ledger.add(f"feedback {text}")
        return {"thanks": text}

    @mcp_tool()
    @app.post("/backups", dependencies=[Depends(overridden_key)])
    def back_up() -> dict[str, bool]:
        ledger.add("backed up")
        return {"backed_up": True}

    @app.post("/items/mine")  # declared first: a REST route, unguarded, that a tool's path can reach
    def touch_mine() -> dict[str, str]:
        ledger.add("touched mine")
        return {"touched": "mine"}

    @mcp_tool()
    @app.post("/items/{item_id}", dependencies=[Depends(bearer)])
    def touch_item(item_id: str) -> dict[str, str]:
        ledger.add(f"touched {item_id}")
        return {"touched": item_id}

    @mcp_tool()
    @app.post("/forms")
    def submit_form(form: Wide) -> dict[str, int]:
        ledger.add("form")
        return {"fields": len(form.model_dump(exclude_none=True))}

    # The app's tests stand in for the key check, as many apps' test suites do.
    app.dependency_overrides[overridden_key] = lambda: "test-key"
    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


@pytest.fixture(autouse=True)
def nothing_done_yet() -> None:
    ledger.take()


@dataclass
class Peer:
    """One HTTP client, calling as anyone or as `subject`."""

    http: httpx.Client

    def open(self, **credentials: str) -> dict[str, str]:
        """A new session, opened with these credential headers; the headers its requests carry."""
        return open_session(self.http, headers=credentials)

    def call(self, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return call_tool(self.http, name, arguments, headers=headers)

    def stateless(self, name: str, arguments: dict[str, Any], *, asks: bool = False, **headers: str) -> dict[str, Any]:
        """One 2026-07-28 call from a client that can ask its user (`asks`) or cannot."""
        meta = stateless_meta({"elicitation": {}} if asks else {})
        response = post_stateless(
            self.http, "tools/call", {"name": name, "arguments": arguments}, meta=meta, headers=headers
        )
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        return result


def bearer_of(subject: str = "alice", scope: str = "notes:read") -> str:
    return f"Bearer {token(sub=subject, scope=scope)}"


def text_of(result: dict[str, Any]) -> str:
    text: str = result["content"][0]["text"]
    return text


def assert_refused_without_asking(result: dict[str, Any], text: str) -> None:
    assert result.get("resultType") != "input_required"
    assert "structuredContent" not in result  # no plan, no token
    assert result["isError"] is True
    assert text_of(result) == text


def pending_token(result: dict[str, Any]) -> str:
    pending = pending_of(result)
    found: str = pending["token"]
    return found


# -- tokens belong to the caller, not the session ------------------------------------------------


def token_reused_in_the_callers_next_session(peer: Peer) -> None:
    alice = {"authorization": bearer_of()}
    first = peer.open(**alice)
    token_ = pending_token(peer.call(first, "place_order", {"item": "tea"}))
    assert peer.http.delete("/mcp", headers=first).status_code == 204
    done = peer.call(peer.open(**alice), "place_order", {"item": "tea", "confirmationToken": token_})
    replayed = peer.call(peer.open(**alice), "place_order", {"item": "tea", "confirmationToken": token_})
    assert done["structuredContent"] == {"ordered": "tea"}
    assert "already used" in text_of(replayed)
    assert ledger.take() == ["order tea"]


def token_taken_to_a_session_with_other_credentials(peer: Peer) -> None:
    token_ = pending_token(peer.call(peer.open(authorization=bearer_of()), "place_order", {"item": "tea"}))
    mallory = peer.open(authorization=bearer_of("mallory"))
    refused = peer.call(mallory, "place_order", {"item": "tea", "confirmationToken": token_})
    anonymous = peer.call(peer.open(), "place_order", {"item": "tea", "confirmationToken": token_})
    assert "not issued to this caller" in text_of(refused)
    assert "not issued to this caller" in text_of(anonymous)
    assert ledger.take() == []


# -- a caller the route refuses is refused before anyone is asked --------------------------------


def anonymous_caller_on_a_guarded_mutation(peer: Peer) -> None:
    rest = peer.http.post("/posts", params={"title": "hi"})
    expected = f"HTTP 401: {rest.json()['detail']}"
    asked = peer.stateless("publish", {"title": "hi"}, asks=True)
    session = peer.call(peer.open(), "publish", {"title": "hi"})
    assert_refused_without_asking(asked, expected)
    assert_refused_without_asking(session, expected)
    assert ledger.take() == []


def principal_lacking_the_routes_scope(peer: Peer) -> None:
    reader = bearer_of(scope="notes:read")
    rest = peer.http.post("/posts", params={"title": "hi"}, headers={"authorization": reader})
    assert rest.json()["detail"] == "Refused here: The token lacks a required scope."  # the app's own handler
    params = {"name": "publish", "arguments": {"title": "hi"}}
    meta = stateless_meta({"elicitation": {}})
    asked = post_stateless(peer.http, "tools/call", params, meta=meta, headers={"authorization": reader})
    # A step-up challenge the client can act on, before anyone is asked: no plan, no token.
    assert asked.status_code == 403
    assert 'scope="posts:write"' in asked.headers["www-authenticate"]
    assert "result" not in asked.json()
    writer = bearer_of(scope="posts:write")
    token_ = pending_token(peer.stateless("publish", {"title": "hi"}, authorization=writer))
    done = peer.stateless("publish", {"title": "hi", "confirmationToken": token_}, authorization=writer)
    assert done["structuredContent"] == {"published": "hi"}
    assert ledger.take() == ["post hi"]


def anonymous_token_flood_on_guarded_tools(peer: Peer) -> None:
    anonymous = peer.open()
    own = pending_token(peer.call(anonymous, "place_order", {"item": "tea"}))
    for n in range(100):  # past the 64 tokens a caller may hold: had any been issued, `own` would go
        refused = peer.call(anonymous, "rotate_key", {})
        assert_refused_without_asking(refused, "HTTP 401: Not authenticated")
        refused = peer.stateless("publish", {"title": f"spam {n}"})
        assert_refused_without_asking(refused, "HTTP 401: A valid bearer token is required.")
    done = peer.call(anonymous, "place_order", {"item": "tea", "confirmationToken": own})
    assert done["structuredContent"] == {"ordered": "tea"}
    keyed = peer.open(**{"x-api-key": "k"})
    token_ = pending_token(peer.call(keyed, "rotate_key", {}))
    assert peer.call(keyed, "rotate_key", {"confirmationToken": token_})["structuredContent"] == {"rotated": True}
    assert ledger.take() == ["order tea", "rotated"]


def credential_in_a_cookie(peer: Peer) -> None:
    refused = peer.call(peer.open(), "add_to_cart", {"item": "tea"})
    assert_refused_without_asking(refused, "HTTP 401: Not authenticated")
    cookie = {**peer.open(), "cookie": "session=s1"}
    token_ = pending_token(peer.call(cookie, "add_to_cart", {"item": "tea"}))
    done = peer.call(cookie, "add_to_cart", {"item": "tea", "confirmationToken": token_})
    assert done["structuredContent"] == {"added": "tea"}
    assert ledger.take() == ["cart tea"]


def route_that_lets_anonymous_callers_in(peer: Peer) -> None:
    # auto_error=False: the route decides, so the gate cannot refuse for it, and asks.
    asked = peer.stateless("comment", {"text": "hi"}, asks=True)
    assert asked["resultType"] == "input_required"
    assert ledger.take() == []


def tool_hidden_by_its_visible_predicate(peer: Peer) -> None:
    # A listing hint, not a guard: the call is still confirmed, never refused by it nor run unasked.
    anonymous = peer.open()
    listed = peer.http.post("/mcp", json=rpc("tools/list"), headers=anonymous).json()["result"]["tools"]
    assert "feedback" not in {tool["name"] for tool in listed}
    token_ = pending_token(peer.call(anonymous, "feedback", {"text": "hi"}))
    assert ledger.take() == []
    done = peer.call(anonymous, "feedback", {"text": "hi", "confirmationToken": token_})
    assert done["structuredContent"] == {"thanks": "hi"}
    assert ledger.take() == ["feedback hi"]


def guard_the_app_overrides(peer: Peer) -> None:
    # The override lets everyone in: the gate does not refuse for the real guard, it confirms.
    anonymous = peer.open()
    token_ = pending_token(peer.call(anonymous, "back_up", {}))
    assert ledger.take() == []
    assert peer.call(anonymous, "back_up", {"confirmationToken": token_})["structuredContent"] == {"backed_up": True}
    assert ledger.take() == ["backed up"]


def tool_path_reaching_an_earlier_unguarded_route(peer: Peer) -> None:
    # POST /items/mine is served by the route declared first; refused for the tool's own guard,
    # the call runs nothing at all, rather than run that route unconfirmed.
    refused = peer.call(peer.open(), "touch_item", {"item_id": "mine"})
    assert refused["isError"] is True
    assert text_of(refused).startswith("HTTP 401")
    assert ledger.take() == []


# -- the question shows every argument ------------------------------------------------------------


def title_hidden_behind_padding(peer: Peer) -> None:
    arguments = {"form": {"f000": " " * 600 + "see f001", "f001": "DROP EVERYTHING"}}
    asked = peer.stateless("submit_form", arguments["form"], asks=True)
    question = asked["inputRequests"][QUESTION_KEY]["params"]
    assert 'f000="⟨600 blanks⟩see f001", f001="DROP EVERYTHING"' in question["message"]
    assert question["_meta"]["fastapi-mcp-routes/plan"]["arguments"] == arguments["form"]
    assert ledger.take() == []


def value_forging_another_argument(peer: Peer) -> None:
    forged = {"f000": 'ok", f001="harmless', "f001": "DROP\u202e EVERYTHING"}
    asked = peer.stateless("submit_form", forged, asks=True)
    message = asked["inputRequests"][QUESTION_KEY]["params"]["message"]
    assert 'f000="ok\\", f001=\\"harmless", f001="DROP\\u202e EVERYTHING"' in message
    assert ledger.take() == []


def arguments_too_many_to_show(peer: Peer) -> None:
    crowd = {f"f{i:03}": "x" * 100 for i in range(WIDE_FIELDS)}
    refused = peer.stateless("submit_form", crowd, asks=True)
    assert_refused_without_asking(refused, text_of(refused))
    assert "cannot all be shown to the user" in text_of(refused)
    # A client that cannot ask gets the plan, every argument in full, as for any call.
    pending = pending_of(peer.stateless("submit_form", crowd))
    assert pending["plan"]["arguments"] == crowd
    assert ledger.take() == []


ROWS: list[tuple[str, Callable[[Peer], None]]] = [
    ("token reused in the caller's next session -> runs once", token_reused_in_the_callers_next_session),
    ("token taken to a session with other credentials -> refused", token_taken_to_a_session_with_other_credentials),
    ("anonymous caller on a guarded mutation -> the route's 401, never asked", anonymous_caller_on_a_guarded_mutation),
    ("principal lacking the route's scope -> the app's 403, never asked", principal_lacking_the_routes_scope),
    ("anonymous token flood on guarded tools -> no token issued", anonymous_token_flood_on_guarded_tools),
    ("credential in a cookie -> confirmed; none -> 401", credential_in_a_cookie),
    ("route that lets anonymous callers in -> still asked", route_that_lets_anonymous_callers_in),
    ("tool hidden by its visible predicate -> still confirmed", tool_hidden_by_its_visible_predicate),
    ("guard the app overrides -> the override decides, confirmed", guard_the_app_overrides),
    ("tool path reaching an earlier unguarded route -> nothing runs", tool_path_reaching_an_earlier_unguarded_route),
    ("title hidden behind padding -> every argument named", title_hidden_behind_padding),
    ("value forging another argument -> escaped", value_forging_another_argument),
    ("arguments too many to show -> refused, not asked", arguments_too_many_to_show),
]


@pytest.mark.parametrize("attack", [row[1] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_row_holds_and_the_server_keeps_serving(base_url: str, attack: Callable[[Peer], None]) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        peer = Peer(http)
        attack(peer)
        fresh = peer.open(authorization=bearer_of(scope="posts:write"))
        pong = http.post("/mcp", json=rpc("ping", request_id=9), headers=fresh)
        assert pong.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}
        token_ = pending_token(peer.call(fresh, "publish", {"title": "after"}))
        done = peer.call(fresh, "publish", {"title": "after", "confirmationToken": token_})
        assert done["structuredContent"] == {"published": "after"}
        assert ledger.take() == ["post after"]
