"""RFC 6570 URI templates, levels 1 to 3: what parses, how each operator expands, and how a URI
is matched back to its variables."""

from __future__ import annotations

import re

import pytest

from fastapi_mcp_routes.tools.catalog.uri_template import UriTemplate


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("notes://{id*}", "has the expression {id*}"),
        ("notes://{id:3}", "has the expression {id:3}"),
        ("notes://{id", "has an unmatched brace"),
        ("notes://id}", "has an unmatched brace"),
        ("notes://{{id}}", "has an unmatched brace"),
        ("notes://{id}/{id}", "names a variable twice"),
        ("search://{?q}{&q}", "names a variable twice"),
        ("search://notes{?q}/more", "has text after its query expression"),
        ("search://notes{?q}{id}", "has text after its query expression"),
        ("notes://{}", "has the expression {}"),
        ("notes://{a,}", "has the expression {a,}"),
        ("notes://{=a}", "has the expression {=a}"),
    ],
    ids=[
        "explode",
        "prefix",
        "unclosed",
        "unopened",
        "doubled",
        "duplicate",
        "duplicate-query",
        "text-after-query",
        "expression-after-query",
        "empty",
        "empty-name",
        "reserved-operator",
    ],
)
def test_a_template_beyond_level_3_or_malformed_is_refused_naming_it(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"the URI template {template!r} {message}")):
        UriTemplate.parse(template)


@pytest.mark.parametrize("template", ["", None, 42])
def test_a_template_that_is_not_a_non_empty_string_is_refused(template: object) -> None:
    with pytest.raises(ValueError, match="a resource URI must be a non-empty string"):
        UriTemplate.parse(template)  # type: ignore[arg-type]


def test_variables_are_listed_in_order_with_their_expression() -> None:
    template = UriTemplate.parse("files://{host}/{+path}{?rev,raw}")
    assert template.variables == ("host", "path", "rev", "raw")
    assert template.query_names == ("rev", "raw")
    assert template.variable("path").reserved
    assert not template.variable("host").reserved


# RFC 6570, section 3.2: the examples' variables, as far as levels 1 to 3 reach.
VALUES = {"var": "value", "hello": "Hello World!", "path": "/foo/bar", "x": "1024", "y": "768", "empty": ""}


@pytest.mark.parametrize(
    ("template", "expanded"),
    [
        ("{var}", "value"),
        ("{hello}", "Hello%20World%21"),
        ("{path}", "%2Ffoo%2Fbar"),
        ("{x,y}", "1024,768"),
        ("{+var}", "value"),
        ("{+hello}", "Hello%20World!"),
        ("{+path}/here", "/foo/bar/here"),
        ("here?ref={+path}", "here?ref=/foo/bar"),
        ("{#var}", "#value"),
        ("{#hello}", "#Hello%20World!"),
        ("{#path,x}/here", "#/foo/bar,1024/here"),
        ("X{.var}", "X.value"),
        ("X{.x,y}", "X.1024.768"),
        ("{/var}", "/value"),
        ("{/var,x}/here", "/value/1024/here"),
        ("{/path}", "/%2Ffoo%2Fbar"),
        ("{;x,y}", ";x=1024;y=768"),
        ("{;x,y,empty}", ";x=1024;y=768;empty"),
        ("{?x,y}", "?x=1024&y=768"),
        ("{?x,y,empty}", "?x=1024&y=768&empty="),
        ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{&x,y,empty}", "&x=1024&y=768&empty="),
        ("{?undefined}", ""),
        ("{x,undefined,y}", "1024,768"),
    ],
)
def test_each_operator_expands_as_rfc_6570_shows(template: str, expanded: str) -> None:
    assert UriTemplate.parse(template).expand(VALUES) == expanded


@pytest.mark.parametrize("operator", ["", ".", "/", ";", "?", "&"])
def test_unreserved_expansion_percent_encodes_every_reserved_character(operator: str) -> None:
    expanded = UriTemplate.parse(f"x:{{{operator}v}}").expand({"v": ":/?#[]@!$&'()*+,;= ~"})
    assert expanded.endswith("%3A%2F%3F%23%5B%5D%40%21%24%26%27%28%29%2A%2B%2C%3B%3D%20~")


@pytest.mark.parametrize("operator", ["+", "#"])
def test_reserved_expansion_keeps_reserved_characters_and_encodes_the_rest(operator: str) -> None:
    expanded = UriTemplate.parse(f"x:{{{operator}v}}").expand({"v": ":/?#[]@!$&'()*+,;= ~%é"})
    assert expanded.endswith(":/?#[]@!$&'()*+,;=%20~%25%C3%A9")


@pytest.mark.parametrize(
    ("template", "values"),
    [
        ("notes://{id}", {"id": "a b/c?d,e"}),
        ("notes://{a,b}", {"a": "1", "b": "x,y"}),
        ("files:///{+path}", {"path": "docs/a b.txt"}),
        ("files:///{+path}", {"path": "docs/a,b.txt"}),
        ("files:///{+dir}/{+name}", {"dir": "a/b", "name": "c"}),
        ("page://x{#section}", {"section": "intro/part 1"}),
        ("host://api{.format}", {"format": "json"}),
        ("host://api{.major,minor}", {"major": "1", "minor": "2"}),
        ("tree://root{/a,b}", {"a": "x y", "b": "z/w"}),
        ("matrix://m{;a,b}", {"a": "1", "b": "two words"}),
        ("matrix://m{;a,b}", {"a": "1", "b": ""}),
        ("search://notes{?q,limit}", {"q": "a&b=c", "limit": "5"}),
        ("search://notes{?q}{&limit}", {"q": "x", "limit": "5"}),
        ("search://notes?fixed=yes{&q}", {"q": "x y"}),
        ("search://notes{?q}", {"q": ""}),
    ],
)
def test_matching_an_expansion_gives_back_its_values(template: str, values: dict[str, str]) -> None:
    parsed = UriTemplate.parse(template)
    assert parsed.match(parsed.expand(values)) == values


def test_query_parameters_are_read_by_name_in_any_order() -> None:
    template = UriTemplate.parse("search://notes{?q,limit}")
    assert template.match("search://notes?limit=5&q=x") == {"q": "x", "limit": "5"}
    assert template.match("search://notes?q=x") == {"q": "x"}
    assert template.match("search://notes") == {}


@pytest.mark.parametrize(
    "uri", ["search://notes?page=2", "search://notes?q=x&page=2", "search://notes?q=x&q=y", "search://other?q=x"]
)
def test_a_query_the_template_does_not_name_matches_nothing(uri: str) -> None:
    assert UriTemplate.parse("search://notes{?q,limit}").match(uri) is None


def test_a_literal_query_must_be_there_before_the_continued_query() -> None:
    template = UriTemplate.parse("search://notes?fixed=yes{&q}")
    assert template.match("search://notes?fixed=yes") == {}
    assert template.match("search://notes?fixed=yes&q=x") == {"q": "x"}
    assert template.match("search://notes?fixed=no&q=x") is None
    assert template.match("search://notes?q=x") is None


def test_values_are_percent_decoded() -> None:
    template = UriTemplate.parse("notes://{id}{?q}")
    assert template.match("notes://caf%C3%A9%20au%20lait?q=a%26b") == {"id": "café au lait", "q": "a&b"}


def test_a_simple_variable_is_one_segment_and_a_reserved_one_spans_slashes() -> None:
    assert UriTemplate.parse("notes://{id}").match("notes://a/b") is None
    assert UriTemplate.parse("notes://{id}/raw").match("notes://a/raw") == {"id": "a"}
    assert UriTemplate.parse("files:///{+path}").match("files:///a/b/c.txt") == {"path": "a/b/c.txt"}


def test_a_simple_or_reserved_variable_must_have_a_value() -> None:
    assert UriTemplate.parse("notes://{id}").match("notes://") is None
    assert UriTemplate.parse("files:///{+path}").match("files:///") is None


def test_a_static_uri_matches_only_itself() -> None:
    template = UriTemplate.parse("config://app")
    assert template.variables == ()
    assert template.expand({}) == "config://app"
    assert template.match("config://app") == {}
    for other in ("config://app2", "config://ap", "config://app?x=1", "CONFIG://app"):
        assert template.match(other) is None


def test_literal_text_is_matched_literally_not_as_a_pattern() -> None:
    template = UriTemplate.parse("a.b+c://{id}")
    assert template.match("a.b+c://1") == {"id": "1"}
    assert template.match("aXbbc://1") is None
