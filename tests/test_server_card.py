"""The Server Card (SEP-2127, experimental) at `{path}/server-card`: served only when the app
asks, in its media type, revalidated by its ETag (304), readable from any origin, public
whatever guards the endpoint, and saying what `server/discover` says."""

from __future__ import annotations

import re
from typing import Any, Final

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.testclient import TestClient
from playwright.sync_api import Browser

from fastapi_mcp_routes import Limits, Origins, ServerCard, ServerInfo, mcp_routes, mcp_tool
from tests.support.jsonrpc import HEADERS, initialize, open_session, rpc
from tests.support.servers import serve
from tests.support.stateless import post_stateless

CARD: Final = ServerCard(name="com.example/notes", description="Notes and their tags.")
CARD_MEDIA_TYPE: Final = "application/mcp-server-card+json"
CARD_SCHEMA: Final = "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json"
# The draft's "CORS Requirements" and "Caching", word for word.
DRAFT_HEADERS: Final = {
    "access-control-allow-origin": "*",
    "access-control-allow-methods": "GET",
    "access-control-allow-headers": "Content-Type, If-None-Match",
    "access-control-expose-headers": "ETag",
    "cache-control": "public, max-age=3600",
}
CORS_HEADERS: Final = {name: value for name, value in DRAFT_HEADERS.items() if name.startswith("access-control-")}
OWN_CACHING: Final = "private, max-age=3600"  # a card naming the Host it was asked on
NAME_PATTERN: Final = re.compile(r"[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+")  # the card schema's


def notes_app(card: ServerCard | None = CARD, *, version: str = "2.3.0", **options: Any) -> FastAPI:
    app = FastAPI(title="Notes", version=version)

    @mcp_tool()
    @app.get("/notes")
    def list_notes() -> list[str]:
        """The notes."""
        return []

    app.include_router(mcp_routes(app, server=ServerInfo(card=card), **options))
    return app


def card_of(http: TestClient, path: str = "/mcp/server-card", **headers: str) -> dict[str, Any]:
    response = http.get(path, headers={"accept": CARD_MEDIA_TYPE, **headers})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == CARD_MEDIA_TYPE
    document: dict[str, Any] = response.json()
    return document


def test_no_card_is_served_unless_the_app_asks() -> None:
    with TestClient(notes_app(card=None)) as http:
        assert http.get("/mcp/server-card").status_code == 404


def test_the_card_names_the_server_and_its_endpoint_with_the_draft_headers() -> None:
    with TestClient(notes_app()) as http:
        response = http.get("/mcp/server-card", headers={"accept": CARD_MEDIA_TYPE})
    assert response.status_code == 200
    assert response.headers["content-type"] == CARD_MEDIA_TYPE
    assert {name: response.headers[name] for name in CORS_HEADERS} == CORS_HEADERS
    assert response.headers["cache-control"] == OWN_CACHING  # its URL is the one it was asked on
    assert response.headers["etag"].startswith('"')
    card = response.json()
    assert card == {
        "$schema": CARD_SCHEMA,
        "name": "com.example/notes",
        "version": "2.3.0",
        "description": "Notes and their tags.",
        "title": "Notes",
        "remotes": [
            {
                "type": "streamable-http",
                "url": "http://testserver/mcp",
                "supportedProtocolVersions": ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"],
            }
        ],
    }
    assert NAME_PATTERN.fullmatch(card["name"])


def test_the_card_says_what_discover_and_initialize_say() -> None:
    server = ServerInfo(name="notes-server", version="7.1.0", card=CARD)
    app = FastAPI(title="Notes")
    app.include_router(mcp_routes(app, server=server))
    with TestClient(app) as http:
        card = card_of(http)
        discovered = post_stateless(http, "server/discover").json()["result"]
        initialized = http.post("/mcp", json=initialize(), headers=HEADERS).json()["result"]
    (remote,) = card["remotes"]
    served = remote["supportedProtocolVersions"]
    assert discovered["_meta"]["io.modelcontextprotocol/serverInfo"] == {
        "name": card["title"],
        "version": card["version"],
    }
    assert initialized["serverInfo"] == {"name": card["title"], "version": card["version"]}
    assert set(discovered["supportedVersions"]) <= set(served)
    assert initialized["protocolVersion"] in served
    assert remote["url"].endswith("/mcp")


def test_a_matching_if_none_match_gets_304_and_any_other_the_card() -> None:
    with TestClient(notes_app()) as http:
        tag = http.get("/mcp/server-card").headers["etag"]
        unchanged = [
            http.get("/mcp/server-card", headers={"if-none-match": value})
            for value in (tag, f"W/{tag}", f'"other", {tag}', "*")
        ]
        changed = http.get("/mcp/server-card", headers={"if-none-match": '"other"'})
    for response in unchanged:
        assert response.status_code == 304
        assert response.content == b""
        assert response.headers["etag"] == tag
        assert response.headers["cache-control"] == OWN_CACHING
    assert changed.status_code == 200
    assert changed.json()["name"] == CARD.name


def test_a_new_version_of_the_server_gets_a_new_etag() -> None:
    with TestClient(notes_app(version="1.0.0")) as old, TestClient(notes_app(version="1.0.1")) as new:
        tag = old.get("/mcp/server-card").headers["etag"]
        revalidated = new.get("/mcp/server-card", headers={"if-none-match": tag})
    assert revalidated.status_code == 200
    assert revalidated.headers["etag"] != tag
    assert revalidated.json()["version"] == "1.0.1"


def test_any_origin_reads_the_card_and_its_preflight_is_answered() -> None:
    foreign = {"origin": "https://registry.example"}
    with TestClient(notes_app()) as http:
        preflight = http.options(
            "/mcp/server-card",
            headers={
                **foreign,
                "access-control-request-method": "GET",
                "access-control-request-headers": "if-none-match",
            },
        )
        read = http.get("/mcp/server-card", headers=foreign)
        endpoint = http.post("/mcp", json=initialize(), headers={**HEADERS, **foreign})
    assert preflight.status_code == 204
    assert {name: preflight.headers[name] for name in CORS_HEADERS} == CORS_HEADERS
    assert read.status_code == 200
    assert read.headers["access-control-allow-origin"] == "*"
    assert endpoint.status_code == 403  # the endpoint itself still refuses a foreign origin


def test_the_card_is_public_where_the_endpoint_needs_credentials() -> None:
    def key_required(request: Request) -> str:
        if request.headers.get("x-api-key") != "k":
            raise HTTPException(401, "a key is required")
        return "caller"

    with TestClient(notes_app(auth=key_required)) as http:
        refused = http.post("/mcp", json=initialize(), headers=HEADERS)
        card = card_of(http)
    assert refused.status_code == 401
    assert card["name"] == CARD.name


def test_the_card_follows_the_endpoint_path_and_names_the_public_url_given() -> None:
    card = ServerCard(name="com.example/notes", description="Notes.", url="https://api.example.com/agents")
    with TestClient(notes_app(card, path="/agents")) as http:
        served = card_of(http, "/agents/server-card")
        elsewhere = http.get("/mcp/server-card")
        session = http.post("/agents", json=initialize(), headers=HEADERS)
    assert served["remotes"][0]["url"] == "https://api.example.com/agents"
    assert elsewhere.status_code == 404
    assert session.status_code == 200  # the endpoint at its path is untouched by the card's route


def test_the_endpoint_answers_as_before_beside_its_card() -> None:
    with TestClient(notes_app()) as http:
        session = open_session(http)
        listed = http.post("/mcp", json=rpc("tools/list", {}), headers=session)
    assert [tool["name"] for tool in listed.json()["result"]["tools"]] == ["list_notes"]


def test_a_website_url_is_carried_and_a_long_app_title_is_left_out() -> None:
    card = ServerCard(name="com.example/notes", description="Notes.", website_url="https://example.com/notes")
    app = FastAPI(title="N" * 101)
    app.include_router(mcp_routes(app, server=ServerInfo(card=card)))
    with TestClient(app) as http:
        served = card_of(http)
    assert served["websiteUrl"] == "https://example.com/notes"
    assert "title" not in served  # the card's schema bounds a title to 100 characters


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "notes", "description": "d"}, "ServerCard.name must be a reverse-DNS name with one slash"),
        ({"name": "com.example/a/b", "description": "d"}, "ServerCard.name must be a reverse-DNS name"),
        ({"name": "a/" + "b" * 199, "description": "d"}, "of 3 to 200 characters"),
        ({"name": "com.example/notes", "description": ""}, "ServerCard.description must be 1 to 100 characters"),
        ({"name": "com.example/notes", "description": "d" * 101}, "ServerCard.description must be 1 to 100"),
        ({"name": "com.example/notes", "description": "d", "url": "ftp://x"}, "ServerCard.url must be an http"),
        ({"name": "com.example/notes", "description": "d", "website_url": 3}, "ServerCard.website_url must be"),
    ],
)
def test_a_wrong_card_is_refused_when_made(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ServerCard(**fields)


def test_server_info_takes_only_a_server_card() -> None:
    with pytest.raises(ValueError, match=re.escape("ServerInfo.card must be a ServerCard(...) or None, got 'yes'")):
        ServerInfo(card="yes")  # type: ignore[arg-type]


# -- a real browser on another origin, as the draft's CORS headers are for ------------------------


def page_app() -> FastAPI:
    """An origin of its own, serving an empty page the browser reads the card from."""
    app = FastAPI()

    @app.get("/", response_class=HTMLResponse)
    def page() -> str:
        return "<!doctype html><title>registry</title>"

    return app


READ_TWICE: Final = """async (url) => {
    const asked = {"Accept": "application/mcp-server-card+json", "If-None-Match": '"none"'};
    const first = await fetch(url, {headers: asked});
    const tag = first.headers.get("ETag");
    const card = await first.json();
    const again = await fetch(url, {headers: {"If-None-Match": tag}, cache: "no-store"});
    return {status: first.status, type: first.headers.get("Content-Type"), tag, card, again: again.status};
}"""


@pytest.mark.browser
def test_a_page_of_another_origin_reads_the_card_and_revalidates_it(browser: Browser) -> None:
    with serve(notes_app()) as server, serve(page_app()) as registry:
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(registry + "/")
            read = page.evaluate(READ_TWICE, server + "/mcp/server-card")
        finally:
            context.close()
    assert read["status"] == 200
    assert read["type"] == CARD_MEDIA_TYPE
    assert read["tag"].startswith('"')  # exposed to the page (Access-Control-Expose-Headers)
    assert read["card"]["name"] == CARD.name
    assert read["again"] == 304


def test_reads_of_the_card_count_against_the_endpoints_rate_limit() -> None:
    with TestClient(notes_app(limits=Limits(rate_limit="2/minute"))) as http:
        answers = [http.get("/mcp/server-card") for _ in range(3)]
        endpoint = http.post("/mcp", json=initialize(), headers=HEADERS)
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert int(answers[2].headers["retry-after"]) >= 1
    assert answers[2].headers["access-control-allow-origin"] == "*"
    assert endpoint.status_code == 429  # one budget per caller, the endpoint's


# -- a caller's Host never becomes the card others are served --------------------------------------


def test_a_host_the_endpoint_refuses_is_refused_by_the_card_too() -> None:
    with serve(notes_app()) as server:
        answers = {
            host: httpx.get(server + "/mcp/server-card", headers={"host": host})
            for host in ("evil.example", "evil.example:443", "evil.example@127.0.0.1", "127.0.0.1/x")
        }
        endpoint = httpx.post(server + "/mcp", json=initialize(), headers={**HEADERS, "host": "evil.example"})
        served = httpx.get(server + "/mcp/server-card")
    assert endpoint.status_code == 403
    for host, answer in answers.items():
        assert answer.status_code == 403, host
        assert answer.json()["error"]["message"] == "Forbidden: this Host is not allowed."
        assert "evil.example" not in answer.text
        assert answer.headers["access-control-allow-origin"] == "*"  # a page of another origin may read why
    assert served.status_code == 200
    assert served.json()["remotes"][0]["url"] == server + "/mcp"


def test_a_refusal_of_the_card_is_never_cached_for_an_hour() -> None:
    # A shared cache keeping a 429 or a 403 for the card's hour would refuse everyone it serves.
    with serve(notes_app(limits=Limits(rate_limit="1/minute"))) as server:
        served = httpx.get(server + "/mcp/server-card")
        limited = httpx.get(server + "/mcp/server-card")
        foreign = httpx.get(server + "/mcp/server-card", headers={"host": "evil.example"})
    assert served.headers["cache-control"].endswith("max-age=3600")
    assert (limited.status_code, foreign.status_code) == (429, 403)
    for refusal in (limited, foreign):
        assert "cache-control" not in refusal.headers
        assert refusal.headers["access-control-allow-origin"] == "*"


def test_a_card_naming_the_host_it_was_asked_on_is_kept_from_shared_caches() -> None:
    # Where any Host is answered (off loopback, or allowed_hosts=["*"] behind a proxy), a shared
    # cache keyed without the Host (nginx's default key) kept the card one caller's Host named
    # and served it to everyone for an hour.
    everywhere = Origins(allowed_hosts=["*"])
    public = ServerCard(name="com.example/notes", description="Notes.", url="https://api.example.com/mcp")
    with serve(notes_app(origins=everywhere)) as asked_on, serve(notes_app(public, origins=everywhere)) as given:
        named = httpx.get(asked_on + "/mcp/server-card", headers={"host": "evil.example"})
        revalidated = httpx.get(
            asked_on + "/mcp/server-card", headers={"host": "evil.example", "if-none-match": named.headers["etag"]}
        )
        fixed = httpx.get(given + "/mcp/server-card", headers={"host": "evil.example"})
    assert named.json()["remotes"][0]["url"] == "http://evil.example/mcp"  # the caller's own answer
    assert named.headers["cache-control"] == OWN_CACHING
    assert (revalidated.status_code, revalidated.headers["cache-control"]) == (304, OWN_CACHING)
    assert fixed.json()["remotes"][0]["url"] == "https://api.example.com/mcp"
    assert fixed.headers["cache-control"] == DRAFT_HEADERS["cache-control"]


def test_the_card_names_the_endpoint_where_it_is_served_under_an_include_prefix_or_a_mount() -> None:
    prefixed = FastAPI()
    prefixed.include_router(mcp_routes(prefixed, server=ServerInfo(card=CARD)), prefix="/v1")
    outer, inner = FastAPI(), FastAPI()
    inner.include_router(mcp_routes(inner, server=ServerInfo(card=CARD)))
    outer.mount("/sub", inner)
    for app, path in ((prefixed, "/v1/mcp"), (outer, "/sub/mcp"), (notes_app(), "/mcp")):
        with serve(app) as server:
            named = httpx.get(server + path + "/server-card").json()["remotes"][0]["url"]
            answered = httpx.post(named, json=initialize(), headers=HEADERS)
        assert named == server + path
        assert answered.status_code == 200, path


def test_the_card_names_the_endpoint_behind_the_root_path_a_proxy_strips() -> None:
    with TestClient(notes_app(), root_path="/proxy") as http:
        named = card_of(http)["remotes"][0]["url"]
    assert named == "http://testserver/proxy/mcp"


def test_an_if_none_match_past_its_bound_is_not_read_and_gets_the_card() -> None:
    # Splitting megabytes of commas froze the event loop for a third of a second a request.
    with serve(notes_app()) as server:
        tag = httpx.get(server + "/mcp/server-card").headers["etag"]
        others = ", ".join(f'"{n:032x}"' for n in range(200))  # 7 kB: a list still read
        read = httpx.get(server + "/mcp/server-card", headers={"if-none-match": f"{others}, {tag}"})
        unread = httpx.get(server + "/mcp/server-card", headers={"if-none-match": "," * 2_000_000 + tag})
    assert read.status_code == 304
    assert unread.status_code == 200
    assert unread.json()["name"] == CARD.name


def test_a_caller_flooding_the_card_is_refused_while_another_address_is_served() -> None:
    with serve(notes_app(limits=Limits(rate_limit="5/minute"))) as server:
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2")) as flooder:
            flooded = [flooder.get(server + "/mcp/server-card").status_code for _ in range(50)]
        other = httpx.get(server + "/mcp/server-card")
        session = httpx.post(server + "/mcp", json=initialize(), headers=HEADERS)
    assert (flooded.count(200), flooded.count(429)) == (5, 45)
    assert other.status_code == 200
    assert session.status_code == 200
