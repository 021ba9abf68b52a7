"""The review of resources, prompts and completion: what an attacker and a new user found, each
tried against the endpoint (in process, or on a real uvicorn server where it crosses a wire).

- A URI matched against a template of several variables took time growing with its length
  cubed (`version://{major}.{minor}.{patch}`: 6 s for 2 kB, in the event loop), and a read
  took URIs as long as the body.
- A 2026-07-28 `subscriptions/listen` asked no guard: a caller without the API key a resource's
  route requires heard each update of it, which `resources/subscribe` refuses.
- A session's GET stream looked the session up in the store for every update of any resource,
  subscribed or not: with Redis, each write cost a round trip per open GET stream of the
  deployment, and streams that fell behind lost the updates they subscribed to.
- The endpoint's plain route turned away every path that did not end with its own path, taken
  as literal: an endpoint under a path parameter (`/t/{tenant}/mcp`) answered 404.
- A write to a resource's path while the shared store was down raised out of the app after its
  response: a traceback in the log for every REST write, through every middleware around it.
- A new user's prompt whose body model has a field named like a path parameter was refused
  with a sentence saying the body must not be "a list or a single value", which it was not.
- A new user's resource behind a guard reading its own header (`x_admin: str = Header()`) was
  refused at startup because "the URI cannot fill" the header, without a word of what to do.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel

from fastapi_mcp_routes import Limits, RedisStore, mcp_prompt, mcp_resource, mcp_routes, notify_resource_updated
from fastapi_mcp_routes.store.base import SessionRecord
from fastapi_mcp_routes.store.memory import MemoryStore
from fastapi_mcp_routes.tools.catalog.uri_template import UriTemplate
from tests.resources_app import API_KEY, MISSING_KEY, WRONG_KEY, notes_resources_app
from tests.support.discovery import registry_of
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, final_message, initialize, rpc
from tests.support.redis import gone_redis_url
from tests.support.servers import connected, serve
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

# Far more than a linear match of these URIs takes, far less than the backtracking one took.
QUICK_S = 0.5


async def session(http: httpx.AsyncClient, headers: dict[str, str] | None = None) -> dict[str, str]:
    """Open a session; the headers its requests carry."""
    sent = {**HEADERS, "mcp-protocol-version": SESSION_VERSION, **(headers or {})}
    opened = await http.post("/mcp", json=initialize(), headers=sent)
    assert opened.status_code == 200, opened.text
    return {**sent, "mcp-session-id": opened.headers["mcp-session-id"]}


async def answer(http: httpx.AsyncClient, headers: dict[str, str], method: str, params: dict[str, Any]) -> Any:
    """The JSON-RPC message that answers one request of the session."""
    with anyio.fail_after(WAIT_S):
        response = await http.post("/mcp", json=rpc(method, params), headers=headers)
    return final_message(response)


# -- URI templates: matching takes time in proportion to the URI ------------------------------


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("version://{major}.{minor}.{patch}", "version://" + "1." * 1024 + "/"),
        ("logs://{service}-{level}-{day}", "logs://" + "a-" * 1024 + "/"),
        ("files:///{+root}/{+dir}/{+name}", "files:///" + "a/" * 1024 + "?"),
        ("pages://{#a}{#b}{#c}", "pages://#" + "#" * 2048 + "\n"),
    ],
)
def test_a_uri_that_almost_matches_a_template_of_several_variables_is_refused_at_once(template: str, uri: str) -> None:
    parsed = UriTemplate.parse(template)
    started = time.perf_counter()
    assert parsed.match(uri) is None
    assert time.perf_counter() - started < QUICK_S


@pytest.mark.parametrize(
    ("template", "uri", "values"),
    [
        ("version://{major}.{minor}.{patch}", "version://1.2.3", {"major": "1", "minor": "2", "patch": "3"}),
        ("files://{name}.{ext}", "files://archive.tar.gz", {"name": "archive.tar", "ext": "gz"}),
        ("files:///{+dir}/{name}", "files:///a/b/c.txt", {"dir": "a/b", "name": "c.txt"}),
        ("files:///{+dir}/{+name}", "files:///a/b/c.txt", {"dir": "a/b", "name": "c.txt"}),
        ("files:///{+dir}/x/{+rest}", "files:///a/x/b/x/c", {"dir": "a/x/b", "rest": "c"}),
        ("notes://{id}/x/{+rest}", "notes://1/x/a/x/b", {"id": "1", "rest": "a/x/b"}),
        ("logs://{service}--{day}", "logs://a-b--c-d", {"service": "a-b", "day": "c-d"}),
    ],
)
def test_where_a_value_could_hold_the_text_after_it_the_earlier_value_takes_the_most(
    template: str, uri: str, values: dict[str, str]
) -> None:
    assert UriTemplate.parse(template).match(uri) == values


@pytest.mark.parametrize("template", ["x://{a}{b}", "x://{a}{+b}", "x://{+a}{b}", "x://{a,b}{c}", "x://{#a}{b}"])
def test_a_template_with_two_values_and_nothing_between_them_is_refused_naming_them(template: str) -> None:
    with pytest.raises(ValueError, match="nothing between them"):
        UriTemplate.parse(template)


def uri_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

    @mcp_resource("version://{major}.{minor}.{patch}")
    @app.get("/versions/{major}/{minor}/{patch}", response_class=PlainTextResponse)
    def version(major: str, minor: str, patch: str) -> str:
        return f"{major}.{minor}.{patch}"

    return app


@pytest.mark.parametrize("method", ["resources/read", "resources/unsubscribe"])
async def test_a_uri_longer_than_max_uri_chars_is_refused_before_it_is_matched(method: str) -> None:
    async with connected(uri_app(limits=Limits(max_uri_chars=64))) as http:
        headers = await session(http)
        fits = await answer(http, headers, method, {"uri": "version://1.2." + "3" * 50})
        refused = await answer(http, headers, method, {"uri": "version://1.2." + "3" * 51})
    assert "result" in fits
    assert refused["error"]["code"] == -32602
    assert "64 characters" in refused["error"]["message"]
    assert "Limits.max_uri_chars" in refused["error"]["message"]


# -- subscriptions/listen asks the route's guards, as resources/subscribe does ----------------


def listen_request(uris: list[str]) -> dict[str, Any]:
    return stateless_request("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})


async def messages_of(stream: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in stream.aiter_lines():
        if line.startswith("data: {"):
            yield json.loads(line[len("data: ") :])


async def test_listening_to_a_guarded_resource_without_its_key_is_refused_as_the_route_refuses() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.post(
                "/mcp",
                json=listen_request(["notes://1", "secrets://vault"]),
                headers=stateless_headers("subscriptions/listen"),
            )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["message"], error["data"]) == (-32602, f"HTTP 401: {MISSING_KEY}", {"status": 401})


async def test_listening_with_a_wrong_key_is_refused_as_the_routes_own_check_refuses() -> None:
    # The key's value is checked by a plain dependency, not a security scheme: only the read
    # itself runs it, so a subscription reads the resource once, as the caller.
    wrong = stateless_headers("subscriptions/listen", **{"x-api-key": "not-" + API_KEY})
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.post("/mcp", json=listen_request(["secrets://vault"]), headers=wrong)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert (error["code"], error["message"], error["data"]) == (-32602, f"HTTP 403: {WRONG_KEY}", {"status": 403})


async def test_a_session_with_a_wrong_key_cannot_subscribe_to_the_guarded_resource() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url, headers={"x-api-key": "not-" + API_KEY}) as http:
            headers = await session(http)
            refused = await answer(http, headers, "resources/subscribe", {"uri": "secrets://vault"})
            public = await answer(http, headers, "resources/subscribe", {"uri": "notes://1"})
    assert (refused["error"]["code"], refused["error"]["data"]) == (-32602, {"status": 403})
    assert public["result"] == {}


async def test_a_caller_with_the_key_listens_to_the_guarded_resource_and_hears_it_change() -> None:
    app = notes_resources_app()
    keyed = stateless_headers("subscriptions/listen", **{"x-api-key": API_KEY})
    with serve(app) as url, anyio.fail_after(WAIT_S):
        async with (
            httpx.AsyncClient(base_url=url) as http,
            http.stream("POST", "/mcp", json=listen_request(["secrets://vault"]), headers=keyed) as stream,
        ):
            assert stream.status_code == 200
            messages = messages_of(stream)
            acknowledged = await anext(messages)
            await notify_resource_updated(app, "secrets://vault")
            updated = await anext(messages)
    assert acknowledged["params"]["notifications"] == {"resourceSubscriptions": ["secrets://vault"]}
    assert (updated["method"], updated["params"]["uri"]) == ("notifications/resources/updated", "secrets://vault")


# -- a session's GET stream reads its subscriptions again only when they change ---------------


class CountingStore(MemoryStore):
    """The default store, counting how often a session is looked up."""

    def __init__(self) -> None:
        super().__init__()
        self.lookups = 0

    async def find_session(self, session_id: str, idle_s: float) -> SessionRecord | None:
        self.lookups += 1
        return await super().find_session(session_id, idle_s)


@asynccontextmanager
async def session_stream(http: httpx.AsyncClient) -> AsyncIterator[tuple[dict[str, str], AsyncIterator[Any]]]:
    """A session and its GET stream, open (listening) once entered; yields the session's
    headers and the stream's messages."""
    headers = await session(http)
    async with http.stream("GET", "/mcp", headers={**headers, "accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        yield headers, messages_of(stream)


async def test_updates_of_resources_a_session_did_not_subscribe_to_cost_its_stream_no_store_lookup() -> None:
    store = CountingStore()
    app = notes_resources_app(store=store)
    with serve(app) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, session_stream(http) as (headers, messages):
            await answer(http, headers, "resources/subscribe", {"uri": "notes://1"})
            before = store.lookups
            for number in range(20):
                await http.put("/notes/2", params={"text": f"version {number}"})
            await http.put("/notes/1", params={"text": "heard"})
            heard = await anext(messages)
            lookups = store.lookups - before
    assert heard["params"] == {"uri": "notes://1"}
    assert lookups <= 2  # one read of its subscriptions, and perhaps a renewal of the stream's lease


async def test_a_session_stops_hearing_a_resource_once_it_unsubscribes_and_hears_one_it_subscribes_to() -> None:
    with serve(notes_resources_app()) as url, anyio.fail_after(WAIT_S):
        async with httpx.AsyncClient(base_url=url) as http, session_stream(http) as (headers, messages):
            await answer(http, headers, "resources/subscribe", {"uri": "notes://1"})
            await http.put("/notes/1", params={"text": "first"})
            first = await anext(messages)
            await answer(http, headers, "resources/unsubscribe", {"uri": "notes://1"})
            await answer(http, headers, "resources/subscribe", {"uri": "notes://2"})
            await http.put("/notes/1", params={"text": "not heard"})
            await http.put("/notes/2", params={"text": "second"})
            second = await anext(messages)
    assert [first["params"], second["params"]] == [{"uri": "notes://1"}, {"uri": "notes://2"}]


# -- the endpoint under a path parameter --------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "path", "url"),
    [
        ("/t/{tenant}", "/mcp", "/t/acme/mcp"),
        ("", "/{tenant}/mcp", "/acme/mcp"),
        ("/v1", "/mcp/{tenant}", "/v1/mcp/acme"),
    ],
)
async def test_an_endpoint_under_a_path_parameter_is_served(prefix: str, path: str, url: str) -> None:
    app = FastAPI()
    app.include_router(mcp_routes(app, path=path), prefix=prefix)
    async with connected(app) as http:
        opened = await http.post(url, json=initialize(), headers={**HEADERS, "mcp-protocol-version": SESSION_VERSION})
        elsewhere = await http.post(url + "/x", json=initialize(), headers=HEADERS)
    assert opened.status_code == 200, opened.text
    assert opened.json()["result"]["protocolVersion"] == SESSION_VERSION
    assert elsewhere.status_code == 404


# -- the app's writes while the shared store is down ------------------------------------------


async def test_writes_to_a_resource_while_the_store_is_down_are_answered_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = notes_resources_app(store=RedisStore.from_url(gone_redis_url()))
    caplog.set_level(logging.WARNING, logger="fastapi_mcp_routes")
    async with connected(app) as http:  # the transport raises what the app raises
        caplog.clear()
        written = [await http.put(f"/notes/{number}", params={"text": "kept"}) for number in (1, 2, 1)]
        read = await http.get("/notes/2")
    assert [response.status_code for response in written] == [200, 200, 200]
    assert read.text == "kept"
    logged = [record.getMessage() for record in caplog.records]
    assert len([message for message in logged if "cannot be announced" in message]) == 1, logged


# -- a prompt whose body cannot be its arguments --------------------------------------------------


class Brief(BaseModel):
    topic: str
    tone: str = "plain"


def test_a_prompt_whose_body_has_a_field_named_like_a_parameter_is_refused_saying_so() -> None:
    app = FastAPI()

    @mcp_prompt()
    @app.post("/prompts/{topic}")
    def brief(topic: str, body: Brief) -> str:
        return topic

    with pytest.raises(ValueError, match="a field named like one of its path or query parameters"):
        registry_of(app).table()


# -- a resource behind a guard that reads a header of its own ---------------------------------


def admin_only(x_admin: str = Header()) -> None:
    if x_admin != "yes":
        raise HTTPException(403, "Admins only.")


def admin_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

    @mcp_resource("admin://{name}")
    @app.get("/admin/{name}", dependencies=[Depends(admin_only)], response_class=PlainTextResponse)
    def admin_page(name: str) -> str:
        return f"admin page {name}"

    return app


def test_a_resource_whose_guard_reads_a_header_is_refused_naming_forward_headers() -> None:
    with pytest.raises(ValueError, match=r"\['x-admin'\].*forward_headers"):
        registry_of(admin_app()).table()


async def test_with_the_header_forwarded_the_resource_is_read_with_the_callers_header() -> None:
    async with connected(admin_app(forward_headers=("x-admin",))) as http:
        admin = await session(http, {"x-admin": "yes"})
        anyone = await session(http)
        read = await answer(http, admin, "resources/read", {"uri": "admin://a"})
        refused = await answer(http, anyone, "resources/read", {"uri": "admin://a"})
    assert read["result"]["contents"][0]["text"] == "admin page a"
    assert refused["error"]["data"] == {"status": 422}
