"""What "under an allowed server URL" means: the strict parse and the prefix match alone.

Each table row is one URL; the refused ones name the reason the model is told."""

from __future__ import annotations

import pytest

from fastapi_mcp_routes.server.urls.match import UrlRefused, is_allowed, parse_server_url

ALLOWED = "https://api.example.com/v1"

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
        ("https://api.example.com/v1/\uff0e\uff0e/admin", "'..' segment"),  # full-width dots
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
