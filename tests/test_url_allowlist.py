"""URL arguments on an allowlist: a tool call may pass a route only the server URLs its operator
allows, so a prompt-injected agent cannot make the server fetch internal addresses.

First the parts alone (where a tool's arguments hold URLs, the options; what "under an allowed
server URL" means is in test_url_match.py), then a real server: refusals as `isError` results
before the confirmation gate, in both protocol eras, the startup warnings, and REST callers
left alone."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Query
from pydantic import AnyUrl, BaseModel, HttpUrl

from fastapi_mcp_routes import ToolCallEvent, ToolCalls, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.urls.policy import UrlPolicy, url_policy
from fastapi_mcp_routes.tools.urls import url_arguments
from tests.support.confirmation import pending_of
from tests.support.discovery import tool_of
from tests.support.jsonrpc import call_tool, open_session
from tests.support.servers import serve
from tests.support.stateless import post_stateless
from tests.support.waits import WAIT_S

ALLOWED = "https://api.example.com/v1"
GOOD = "https://api.example.com/v1/items?page=2"
INTERNAL = "http://169.254.169.254/latest/meta-data/"


class Link(BaseModel):
    href: HttpUrl
    label: str


class Tree(BaseModel):
    url: HttpUrl | None = None
    children: list[Tree] = []


class Hook(BaseModel):
    target: HttpUrl
    links: list[Link] = []
    mirrors: dict[str, AnyUrl] = {}
    tree: Tree | None = None
    note: str = ""


class Ran:
    """What the routes were called with, read across the server's thread."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []


ran = Ran()


def make_app(**calls: Any) -> FastAPI:
    """Tools taking URLs in every place a schema can hold one; `calls` go to `ToolCalls`."""
    app = FastAPI()
    app.include_router(mcp_routes(app, tool_calls=ToolCalls(**calls)))

    @mcp_tool()
    @app.get("/fetch")
    def fetch(url: HttpUrl) -> dict[str, str]:
        ran.calls.append(("fetch", str(url)))
        return {"url": str(url)}

    @mcp_tool()
    @app.get("/maybe")
    def fetch_maybe(url: HttpUrl | None = None) -> dict[str, str | None]:
        ran.calls.append(("fetch_maybe", url))
        return {"url": str(url) if url else None}

    @mcp_tool()
    @app.get("/many")
    def fetch_many(urls: list[HttpUrl] = Query([])) -> dict[str, int]:  # noqa: B008
        ran.calls.append(("fetch_many", urls))
        return {"count": len(urls)}

    @mcp_tool()  # a POST: confirmed before it runs, by default
    @app.post("/hooks")
    def add_hook(hook: Hook) -> dict[str, str]:
        ran.calls.append(("add_hook", hook))
        return {"target": str(hook.target)}

    @mcp_tool()
    @app.get("/echo")
    def echo(text: str) -> dict[str, str]:
        return {"text": text}

    return app


def text_of(result: dict[str, Any]) -> str:
    text: str = result["content"][0]["text"]
    return text


# -- where a tool's arguments hold URLs -----------------------------------------------------------


def test_a_tool_without_url_arguments_has_no_url_places() -> None:
    assert tool_of(make_app(), "echo").urls is None


def test_url_places_are_found_in_optional_list_nested_map_and_recursive_fields() -> None:
    app = make_app()
    assert tool_of(app, "fetch_maybe").urls is not None
    urls = tool_of(app, "add_hook").urls
    assert urls is not None
    # A recursive model's places are named at its first level.
    assert urls.places() == ("links[].href", "mirrors.*", "target", "tree.url")
    assert tool_of(app, "fetch_many").urls is not None


def test_each_url_value_is_found_with_where_it_is() -> None:
    urls = tool_of(make_app(), "add_hook").urls
    assert urls is not None
    arguments = {
        "target": "t",
        "links": [{"href": "l0", "label": "not a URL"}, {"href": "l1", "label": "x"}],
        "mirrors": {"eu": "m"},
        "tree": {"url": "r", "children": [{"children": [{"url": "deep"}]}]},
        "note": "not a URL either",
    }
    assert sorted(urls.values(arguments)) == [
        ("links[0].href", "l0"),
        ("links[1].href", "l1"),
        ("mirrors.eu", "m"),
        ("target", "t"),
        ("tree.children[0].children[0].url", "deep"),
        ("tree.url", "r"),
    ]


def test_values_that_are_not_strings_are_left_to_the_route_but_a_list_at_a_url_place_is_checked() -> None:
    urls = tool_of(make_app(), "fetch").urls
    assert urls is not None
    assert list(urls.values({"url": 42})) == []
    assert list(urls.values({"url": {"host": "x"}})) == []
    # A query parameter sends every item of a list and the route reads one: each is a URL.
    assert list(urls.values({"url": ["a", 1, "b"]})) == [("url[0]", "a"), ("url[2]", "b")]


def test_a_key_named_by_a_model_is_not_taken_for_a_map_value() -> None:
    urls = tool_of(make_app(), "add_hook").urls
    assert urls is not None
    assert list(urls.values({"links": [{"href": "h", "label": "plain"}]})) == [("links[0].href", "h")]


def test_a_cycle_of_references_is_walked_once_and_a_reference_under_not_is_no_url_place() -> None:
    uri = {"type": "string", "format": "uri"}
    schema = {
        "type": "object",
        "properties": {"alias": {"$ref": "#/$defs/A"}, "negated": {"$ref": "#/$defs/N"}},
        "$defs": {
            "A": {"anyOf": [{"$ref": "#/$defs/B"}, uri]},
            "B": {"$ref": "#/$defs/A"},  # A and B name each other without descending
            "N": {"not": {"$ref": "#/$defs/U"}},
            "U": uri,
        },
    }
    urls = url_arguments(schema)
    assert urls is not None
    assert urls.places() == ("alias",)
    assert list(urls.values({"alias": "a", "negated": "n"})) == [("alias", "a")]


# -- the options ----------------------------------------------------------------------------------


def test_without_options_every_url_is_refused() -> None:
    policy = url_policy(None, False, False, {})
    assert policy == UrlPolicy()


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("api.example.com", "plain scheme://host"),
        ("https://", "plain scheme://host"),
        ("https://user@api.example.com", "user name or password"),
        ("https://api.example.com/v1?key=1", "query or a fragment"),
        ("https://api.example.com/v1#top", "query or a fragment"),
        ("https://api.example.com/v1?", "query or a fragment"),
        ("https://api.example.com./v1", "ending in a dot"),
    ],
)
def test_an_invalid_entry_stops_the_app_naming_it(entry: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        mcp_routes(FastAPI(), tool_calls=ToolCalls(allowed_server_urls=[entry]))
    assert repr(entry) in str(raised.value)
    assert "allowed_server_urls" in str(raised.value)


def test_allow_arbitrary_urls_with_an_allowlist_is_a_contradiction() -> None:
    with pytest.raises(ValueError, match="allow_arbitrary_urls=True accepts every URL"):
        mcp_routes(FastAPI(), tool_calls=ToolCalls(allowed_server_urls=[ALLOWED], allow_arbitrary_urls=True))
    with pytest.raises(ValueError, match="not both"):
        mcp_routes(FastAPI(), tool_calls=ToolCalls(allowed_server_urls_from_env=True, allow_arbitrary_urls=True))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"allowed_server_urls": ALLOWED}, "a list of URLs, got the single string"),
        ({"allowed_server_urls": [b"https://api.example.com"]}, "must be URL strings"),
        ({"allow_arbitrary_urls": "yes"}, "allow_arbitrary_urls must be True or False"),
        ({"allowed_server_urls_from_env": ""}, "the name of an environment variable"),
        ({"allowed_server_urls_from_env": 1}, "the name of an environment variable"),
    ],
)
def test_options_of_the_wrong_kind_stop_the_app(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mcp_routes(FastAPI(), tool_calls=ToolCalls(**options))


def test_entries_from_the_environment_are_separated_by_commas_or_whitespace_and_added_to_the_list() -> None:
    environ = {"MCP_ALLOWED_SERVER_URLS": f" {ALLOWED},https://a.example\n http://b.example:8080 ,"}
    policy = url_policy(["https://c.example"], False, True, environ)
    hosts = [entry.host for entry in policy.allowed]
    assert hosts == ["c.example", "api.example.com", "a.example", "b.example"]


def test_a_string_names_another_environment_variable() -> None:
    policy = url_policy(None, False, "HOOK_TARGETS", {"HOOK_TARGETS": ALLOWED, "MCP_ALLOWED_SERVER_URLS": "x"})
    assert [entry.host for entry in policy.allowed] == ["api.example.com"]


def test_an_invalid_entry_in_the_environment_is_named_with_its_variable() -> None:
    with pytest.raises(ValueError, match=r"HOOK_TARGETS entries .*'https://u@evil.example'"):
        url_policy(None, False, "HOOK_TARGETS", {"HOOK_TARGETS": f"{ALLOWED} https://u@evil.example"})


# -- a real server --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_server() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


@pytest.fixture(scope="module")
def allowed_server() -> Iterator[str]:
    with serve(make_app(allowed_server_urls=[ALLOWED, "https://cdn.example"])) as url:
        yield url


@contextmanager
def session(base_url: str) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    """A client, and the headers of a session it opened."""
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        yield http, open_session(http)


def test_by_default_a_url_argument_is_refused_naming_the_argument_and_the_option(default_server: str) -> None:
    ran.calls.clear()
    with session(default_server) as (http, headers):
        result = call_tool(http, "fetch", {"url": GOOD}, headers=headers)
    assert result["isError"] is True
    text = text_of(result)
    assert "'url'" in text
    assert repr(GOOD) in text
    assert "no server URL is allowed" in text
    assert "allowed_server_urls" in text
    assert "allow_arbitrary_urls" in text
    assert ran.calls == []


def test_a_long_refused_value_is_shown_cut_short(default_server: str) -> None:
    long_url = "https://evil.example/" + "a" * 5000
    with session(default_server) as (http, headers):
        text = text_of(call_tool(http, "fetch", {"url": long_url}, headers=headers))
    assert "a" * 5000 not in text
    assert "https://evil.example/aaa" in text
    assert len(text) < 600


def test_a_call_without_a_url_value_runs_even_without_an_allowlist(default_server: str) -> None:
    with session(default_server) as (http, headers):
        assert call_tool(http, "fetch_maybe", {}, headers=headers)["structuredContent"] == {"url": None}
        assert call_tool(http, "fetch_maybe", {"url": None}, headers=headers)["structuredContent"] == {"url": None}
        assert call_tool(http, "echo", {"text": INTERNAL}, headers=headers)["structuredContent"] == {"text": INTERNAL}


def test_a_url_under_an_allowed_prefix_reaches_the_route(allowed_server: str) -> None:
    ran.calls.clear()
    with session(allowed_server) as (http, headers):
        result = call_tool(http, "fetch", {"url": GOOD}, headers=headers)
        many = call_tool(http, "fetch_many", {"urls": [GOOD, "https://cdn.example/a.png"]}, headers=headers)
    assert result["structuredContent"] == {"url": GOOD}
    assert many["structuredContent"] == {"count": 2}
    assert [name for name, _ in ran.calls] == ["fetch", "fetch_many"]


@pytest.mark.parametrize(
    "url",
    [
        INTERNAL,
        "http://127.0.0.1:8000/admin",
        "https://api.example.com/v10",
        "https://api.example.com@evil.example/v1",
        "https://evil.example#@api.example.com/v1",
        "https://api.example.com\\@evil.example/v1",
        "https://api.example.com/v1/../admin",
        "https://api.example.com/v1/%2e%2e/admin",
        "https://api%2eexample.com/v1",
        "https://api.example.com./v1",
        "https://[::1]/v1",
        "https://[::ffff:169.254.169.254]/",
        "https://api.example.com:8443/v1",
        "http://api.example.com/v1",
        "https://api.example.com/v1\t",
        "https://api.exam\u200bple.com/v1",
        "https:api.example.com/v1",
        "//api.example.com/v1",
    ],
)
def test_each_bypass_is_refused_and_the_route_does_not_run(allowed_server: str, url: str) -> None:
    ran.calls.clear()
    with session(allowed_server) as (http, headers):
        result = call_tool(http, "fetch", {"url": url}, headers=headers)
    assert result["isError"] is True
    assert "The argument 'url' of fetch was refused" in text_of(result)
    assert ran.calls == []


@pytest.mark.parametrize(
    ("tool", "arguments", "where"),
    [
        ("fetch_maybe", {"url": INTERNAL}, "url"),
        ("fetch_many", {"urls": [GOOD, INTERNAL]}, "urls[1]"),
        ("fetch", {"url": [GOOD, INTERNAL]}, "url[1]"),  # a list sent as a repeated query parameter
    ],
)
def test_optional_and_list_url_arguments_are_checked(
    allowed_server: str, tool: str, arguments: dict[str, Any], where: str
) -> None:
    ran.calls.clear()
    with session(allowed_server) as (http, headers):
        result = call_tool(http, tool, arguments, headers=headers)
    assert result["isError"] is True
    assert f"The argument {where!r} of {tool} was refused" in text_of(result)
    assert ran.calls == []


@pytest.mark.parametrize(
    ("hook", "where"),
    [
        ({"target": INTERNAL}, "target"),
        ({"target": GOOD, "links": [{"href": GOOD, "label": "a"}, {"href": INTERNAL, "label": "b"}]}, "links[1].href"),
        ({"target": GOOD, "mirrors": {"eu": INTERNAL}}, "mirrors.eu"),
        (
            {"target": GOOD, "tree": {"children": [{"children": [{"url": INTERNAL}]}]}},
            "tree.children[0].children[0].url",
        ),
    ],
)
def test_urls_nested_in_a_body_are_refused_before_confirmation_and_no_token_is_issued(
    allowed_server: str, hook: dict[str, Any], where: str
) -> None:
    ran.calls.clear()
    with session(allowed_server) as (http, headers):
        result = call_tool(http, "add_hook", hook, headers=headers)
    assert result["isError"] is True
    assert "structuredContent" not in result  # no plan, no token
    assert f"The argument {where!r} of add_hook was refused" in text_of(result)
    assert "confirmationToken" not in str(result)
    assert ran.calls == []


def test_a_gated_call_with_allowed_urls_is_offered_for_confirmation_and_then_runs(allowed_server: str) -> None:
    ran.calls.clear()
    hook = {"target": GOOD, "links": [{"href": "https://cdn.example/x", "label": "x"}]}
    with session(allowed_server) as (http, headers):
        pending = pending_of(call_tool(http, "add_hook", hook, headers=headers))
        done = call_tool(http, "add_hook", {**hook, "confirmationToken": pending["token"]}, headers=headers)
    assert done["structuredContent"] == {"target": GOOD}
    assert [name for name, _ in ran.calls] == ["add_hook"]


def test_a_confirmation_token_does_not_carry_a_refused_url_past_the_check(allowed_server: str) -> None:
    with session(allowed_server) as (http, headers):
        token = pending_of(call_tool(http, "add_hook", {"target": GOOD}, headers=headers))["token"]
        result = call_tool(http, "add_hook", {"target": INTERNAL, "confirmationToken": token}, headers=headers)
    assert result["isError"] is True
    assert "The argument 'target' of add_hook was refused" in text_of(result)


def test_a_stateless_call_is_checked_too(allowed_server: str) -> None:
    ran.calls.clear()
    with httpx.Client(base_url=allowed_server, timeout=WAIT_S) as http:
        refused = post_stateless(http, "tools/call", {"name": "fetch", "arguments": {"url": INTERNAL}})
        allowed = post_stateless(http, "tools/call", {"name": "fetch", "arguments": {"url": GOOD}})
    assert refused.status_code == 200
    result = refused.json()["result"]
    assert result["isError"] is True
    assert "The argument 'url' of fetch was refused" in text_of(result)
    assert allowed.json()["result"]["structuredContent"] == {"url": GOOD}
    assert ran.calls == [("fetch", GOOD)]


def test_rest_callers_are_not_checked(default_server: str) -> None:
    with httpx.Client(base_url=default_server, timeout=WAIT_S) as http:
        response = http.get("/fetch", params={"url": INTERNAL})
    assert response.status_code == 200
    assert response.json() == {"url": INTERNAL}


def test_allow_arbitrary_urls_passes_every_url() -> None:
    ran.calls.clear()
    with serve(make_app(allow_arbitrary_urls=True)) as base_url, session(base_url) as (http, headers):
        result = call_tool(http, "fetch", {"url": INTERNAL}, headers=headers)
    assert result["structuredContent"] == {"url": INTERNAL}
    assert ran.calls == [("fetch", INTERNAL)]


def test_allowed_urls_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_ALLOWED_SERVER_URLS", f"https://other.example, {ALLOWED}")
    app = make_app(allowed_server_urls_from_env=True)
    monkeypatch.delenv("MCP_ALLOWED_SERVER_URLS")  # read once, when mcp_routes was called
    with serve(app) as base_url, session(base_url) as (http, headers):
        allowed = call_tool(http, "fetch", {"url": GOOD}, headers=headers)
        refused = call_tool(http, "fetch", {"url": INTERNAL}, headers=headers)
    assert allowed["structuredContent"] == {"url": GOOD}
    assert refused["isError"] is True


def test_a_refusal_is_audited_as_refused() -> None:
    events: list[ToolCallEvent] = []
    with serve(make_app(on_tool_call=events.append)) as base_url, session(base_url) as (http, headers):
        call_tool(http, "fetch", {"url": INTERNAL}, headers=headers)
    assert [(event.tool, event.outcome) for event in events] == [("fetch", "refused")]


# -- warnings at startup --------------------------------------------------------------------------


def startup_warnings(caplog: pytest.LogCaptureFixture, app: FastAPI) -> list[str]:
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_routes"), serve(app):
        pass
    return [r.getMessage() for r in caplog.records if r.name == "fastapi_mcp_routes" and r.levelno == logging.WARNING]


def test_without_an_allowlist_one_warning_names_the_tools_taking_urls_and_how_to_allow_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    [warning] = startup_warnings(caplog, make_app())
    assert "add_hook (links[].href, mirrors.*, target, tree.url)" in warning
    assert "fetch (url)" in warning
    assert "fetch_many (urls[])" in warning
    assert "echo" not in warning
    assert "allowed_server_urls=[...]" in warning
    assert "MCP_ALLOWED_SERVER_URLS" in warning
    assert "allow_arbitrary_urls=True" in warning


def test_an_allowlist_variable_left_unset_is_named_in_the_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NEVER_SET_ALLOWED_URLS", raising=False)
    [warning] = startup_warnings(caplog, make_app(allowed_server_urls_from_env="NEVER_SET_ALLOWED_URLS"))
    assert "no server URL is allowed (NEVER_SET_ALLOWED_URLS is unset or empty)" in warning


def test_allow_arbitrary_urls_is_warned_about_at_startup(caplog: pytest.LogCaptureFixture) -> None:
    [warning] = startup_warnings(caplog, make_app(allow_arbitrary_urls=True))
    assert warning.startswith("allow_arbitrary_urls=True: URL arguments of MCP tool calls are not checked")
    assert "fetch (url)" in warning


def test_an_allowlist_or_no_url_tools_means_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    assert startup_warnings(caplog, make_app(allowed_server_urls=[ALLOWED])) == []
    plain = FastAPI()
    plain.include_router(mcp_routes(plain))

    @mcp_tool()
    @plain.get("/echo")
    def echo(text: str) -> dict[str, str]:
        return {"text": text}

    assert startup_warnings(caplog, plain) == []
