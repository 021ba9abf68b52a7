"""URL arguments on an allowlist: a tool call may pass a route only the server URLs its operator
allows, so a prompt-injected agent cannot make the server fetch internal addresses.

First the parts alone (where a tool's arguments hold URLs, what "under an allowed URL" means,
the options), then a real server: refusals as `isError` results before the confirmation gate,
in both protocol eras, the startup warnings, and REST callers left alone."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI, Query
from pydantic import AnyUrl, BaseModel, HttpUrl

from fastapi_mcp_routes import mcp_routes, mcp_tool
from fastapi_mcp_routes.server.url_match import UrlRefused, is_allowed, parse_server_url
from tests.helpers import tool_of

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


def make_app(**options: Any) -> FastAPI:
    """Tools taking URLs in every place a schema can hold one; `options` go to `mcp_routes`."""
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

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


# -- what "under an allowed server URL" means -----------------------------------------------------

PREFIXES = (parse_server_url(ALLOWED), parse_server_url("https://bücher.example"))


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1",
        "https://api.example.com/v1/",
        "https://api.example.com/v1/items/7?q=1#top",
        "HTTPS://API.Example.COM/v1/x",
        "https://api.example.com:443/v1/x",
        "https://api.example.com/v1/a%20b",
        "https://api.example.com/v1/x#@evil.example",
        "https://bücher.example/any/path",
        "https://xn--bcher-kva.example/",
        "https://BÜCHER.example",
        "https://api。example。com/v1",  # ideographic full stops are dots to every IDNA parser
    ],
)
def test_urls_under_an_allowed_prefix_are_allowed(url: str) -> None:
    assert is_allowed(url, PREFIXES)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v10",
        "https://api.example.com/v",
        "https://api.example.com/",
        "https://api.example.com",
        "https://api.example.com/V1",
        "http://api.example.com/v1",
        "https://api.example.com:8443/v1",
        "https://api.example.com.evil.example/v1",
        "https://evil.example/v1",
        "https://evil.example#@api.example.com/v1",
        "https://evil.example?@api.example.com/v1",
        "https://[::1]/v1",
        "http://169.254.169.254/latest/meta-data/",
        "https://ex\u0430mple.com/v1",  # a Cyrillic a
    ],
)
def test_urls_elsewhere_are_not_allowed(url: str) -> None:
    assert not is_allowed(url, PREFIXES)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://api.example.com@evil.example/v1", "user name or password"),
        ("https://user:pw@api.example.com/v1", "user name or password"),
        ("https://api.example.com:443@evil.example/v1", "user name or password"),
        ("https://api.example.com\\@evil.example/v1", "backslash"),
        ("https:\\\\api.example.com/v1", "backslash"),
        ("https://api%2eexample.com/v1", "percent-encoded host"),
        ("https://api.example.com%40evil.example/v1", "percent-encoded host"),
        ("https://api.example.com./v1", "ending in a dot"),
        ("https://api.example.com。/v1", "ending in a dot"),
        ("https://api..example.com/v1", "not a valid domain name"),
        ("https://[api.example.com]/v1", "cannot be parsed"),
        ("https://[::1/v1", "cannot be parsed"),
        ("https://[fe80::1%25eth0]/v1", "percent-encoded host"),
        ("https://api.example.com/v1/../admin", "'..' segment"),
        ("https://api.example.com/v1/%2E%2e/admin", "'..' segment"),
        ("https://api.example.com/v1/..;/admin", "'..' segment"),
        ("https://api.example.com/v1/./x", "'..' segment"),
        ("https://api.example.com/v1%2f..%2fadmin", "encoded '/'"),
        ("https://api.example.com/v1/%5c..", "encoded '/'"),
        ("https://api.example.com/v1/%0d%0aHost:%20evil", "control character"),
        (" https://api.example.com/v1", "whitespace"),
        ("https://api.example.com/v1\t", "whitespace"),
        ("https://api.example.com/v1\n@evil.example", "whitespace"),
        ("https://api.exam\u200bple.com/v1", "invisible"),
        ("https://api.example.com\u202e/v1", "invisible"),
        ("https:api.example.com/v1", "absolute URL"),
        ("https:///api.example.com/v1", "absolute URL"),
        ("//api.example.com/v1", "absolute URL"),
        ("/v1/items", "absolute URL"),
        ("file:///etc/passwd", "absolute URL"),
        ("https://api.example.com:/v1", "malformed port"),
        ("https://api.example.com:443:1/v1", "malformed port"),
        ("https://api.example.com:99999/v1", "malformed port"),
        ("https://api.example.com:+443/v1", "malformed port"),
        ("https://\uff21\uff30\uff29.example.com/v1", "IDNA versions"),  # full-width letters
        ("https://straße.example/", "IDNA versions"),
    ],
)
def test_ambiguous_urls_are_refused_with_the_reason(url: str, reason: str) -> None:
    with pytest.raises(UrlRefused, match=reason):
        is_allowed(url, PREFIXES)


def test_a_trailing_slash_on_an_allowed_prefix_changes_nothing() -> None:
    with_slash = (parse_server_url("https://api.example.com/v1/"),)
    assert is_allowed("https://api.example.com/v1", with_slash)
    assert is_allowed("https://api.example.com/v1/x", with_slash)
    assert not is_allowed("https://api.example.com/v10", with_slash)


def test_default_ports_are_made_explicit_on_both_sides() -> None:
    assert is_allowed("http://svc.internal/x", (parse_server_url("http://svc.internal:80"),))
    assert is_allowed("http://svc.internal:80/x", (parse_server_url("http://svc.internal"),))
    assert not is_allowed("http://svc.internal:8080/x", (parse_server_url("http://svc.internal"),))


def test_an_allowed_ipv6_address_compares_in_its_compressed_form() -> None:
    assert is_allowed("http://[0:0::1]:8080/x", (parse_server_url("http://[::1]:8080"),))
    assert not is_allowed("http://[::2]:8080/x", (parse_server_url("http://[::1]:8080"),))
