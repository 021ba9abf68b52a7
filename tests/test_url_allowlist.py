"""URL arguments on an allowlist: a tool call may pass a route only the server URLs its operator
allows, so a prompt-injected agent cannot make the server fetch internal addresses.

First the parts alone (where a tool's arguments hold URLs, what "under an allowed URL" means,
the options), then a real server: refusals as `isError` results before the confirmation gate,
in both protocol eras, the startup warnings, and REST callers left alone."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Query
from pydantic import AnyUrl, BaseModel, HttpUrl

from fastapi_mcp_routes import mcp_routes, mcp_tool
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
