"""`mcp_routes`' keywords of the previous release: each still works, warns with its new spelling,
and reads exactly as that spelling does; giving both spellings, or a keyword that never was one,
is refused."""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import fastapi_mcp_routes.router
from fastapi_mcp_routes import Limits, Origins, ServerInfo, Streaming, ToolCallEvent, ToolCalls, mcp_routes
from fastapi_mcp_routes.building import Endpoint, EndpointOptions, build_endpoint
from tests.support.jsonrpc import HEADERS, initialize


def audit(event: ToolCallEvent) -> None:
    """An audit hook of the app's own."""


KEY = b"k" * 32

# The old keyword, a value, and the new spelling of the same setting.
OLD_AND_NEW: list[tuple[str, Any, str, Any]] = [
    ("server_name", "stock", "server", ServerInfo(name="stock")),
    ("server_version", "9", "server", ServerInfo(version="9")),
    ("instructions", "Be kind.", "server", ServerInfo(instructions="Be kind.")),
    ("allowed_origins", ["https://a.example"], "origins", Origins(allowed_origins=["https://a.example"])),
    ("allowed_hosts", ["api.example.com"], "origins", Origins(allowed_hosts=["api.example.com"])),
    ("rate_limit", "10/minute", "limits", Limits(rate_limit="10/minute")),
    ("default_subscribe_ms", 1000, "streaming", Streaming(default_subscribe_ms=1000)),
    ("max_subscribe_ms", 10_000, "streaming", Streaming(max_subscribe_ms=10_000)),
    ("max_subscribe_frames", 5, "streaming", Streaming(max_subscribe_frames=5)),
    ("max_stream_seconds", 2.5, "streaming", Streaming(max_stream_seconds=2.5)),
    (
        "require_confirmation_for_mutations",
        False,
        "tool_calls",
        ToolCalls(require_confirmation_for_mutations=False),
    ),
    ("confirmation_ttl_s", 60.0, "tool_calls", ToolCalls(confirmation_ttl_s=60.0)),
    (
        "allowed_server_urls",
        ["https://api.example.com/v1"],
        "tool_calls",
        ToolCalls(allowed_server_urls=["https://api.example.com/v1"]),
    ),
    ("allow_arbitrary_urls", True, "tool_calls", ToolCalls(allow_arbitrary_urls=True)),
    (
        "allowed_server_urls_from_env",
        "HOOK_TARGETS",
        "tool_calls",
        ToolCalls(allowed_server_urls_from_env="HOOK_TARGETS"),
    ),
    ("on_tool_call", audit, "tool_calls", ToolCalls(on_tool_call=audit)),
    ("request_state_key", KEY, "secret", KEY),
]


@pytest.fixture
def read(monkeypatch: pytest.MonkeyPatch) -> list[EndpointOptions]:
    """The options each `mcp_routes` call built its endpoint from, in order."""
    seen: list[EndpointOptions] = []

    def recording(app: FastAPI, options: EndpointOptions) -> Endpoint:
        seen.append(options)
        return build_endpoint(app, options)

    monkeypatch.setattr(fastapi_mcp_routes.router, "build_endpoint", recording)
    return seen


def new_spelling(keyword: str, group: str, value: Any) -> str:
    if group == "secret":
        return "mcp_routes(secret=...)"
    field = {"server_name": "name", "server_version": "version"}.get(keyword, keyword)
    return f"mcp_routes({group}={type(value).__name__}({field}=...))"


@pytest.mark.parametrize(("keyword", "value", "group", "new"), OLD_AND_NEW, ids=[row[0] for row in OLD_AND_NEW])
def test_an_old_keyword_warns_with_its_new_spelling_and_reads_as_it(
    read: list[EndpointOptions], keyword: str, value: Any, group: str, new: Any
) -> None:
    expected = f"mcp_routes({keyword}=...) is deprecated; use {new_spelling(keyword, group, new)}"
    with pytest.warns(DeprecationWarning, match=re.escape(expected)) as caught:
        mcp_routes(FastAPI(), **{keyword: value})
    assert [warning.filename for warning in caught] == [__file__]  # the caller's line, not the library's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mcp_routes(FastAPI(), **{group: new})
    old, current = read
    assert old == current


def test_the_old_keywords_of_one_group_are_read_together(read: list[EndpointOptions]) -> None:
    # Apart, the first would exceed the default of the second.
    with pytest.warns(DeprecationWarning, match="is deprecated; use mcp_routes"):
        mcp_routes(FastAPI(), default_subscribe_ms=60_000, max_subscribe_ms=60_000)
    assert read[0].streaming == Streaming(default_subscribe_ms=60_000, max_subscribe_ms=60_000)


def test_an_old_keyword_joins_a_group_given_without_its_field(read: list[EndpointOptions]) -> None:
    with pytest.warns(DeprecationWarning, match=re.escape("use mcp_routes(limits=Limits(rate_limit=...))")):
        mcp_routes(FastAPI(), limits=Limits(max_body_bytes=1000), rate_limit="10/minute")
    assert read[0].limits == Limits(max_body_bytes=1000, rate_limit="10/minute")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"confirmation_ttl_s": 60, "tool_calls": ToolCalls(confirmation_ttl_s=30)},
            re.escape("mcp_routes(confirmation_ttl_s=...) is the old spelling of ")
            + re.escape("mcp_routes(tool_calls=ToolCalls(confirmation_ttl_s=...)): give one of them, got both"),
        ),
        (
            {"server_name": "a", "server": ServerInfo(name="b")},
            re.escape("old spelling of mcp_routes(server=ServerInfo(name=...)): give one of them, got both"),
        ),
        (
            {"request_state_key": KEY, "secret": KEY},
            re.escape("mcp_routes(request_state_key=...) is the old spelling of mcp_routes(secret=...)"),
        ),
    ],
)
def test_both_spellings_of_one_setting_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.warns(DeprecationWarning, match="is deprecated"), pytest.raises(ValueError, match=message):
        mcp_routes(FastAPI(), **options)


def test_a_keyword_that_never_was_an_option_is_a_type_error_naming_it() -> None:
    with pytest.raises(TypeError, match=re.escape("mcp_routes() got an unexpected keyword argument 'colour'")):
        mcp_routes(FastAPI(), colour="blue")


def test_a_wrong_old_value_is_refused_naming_its_new_place() -> None:
    with (
        pytest.warns(DeprecationWarning, match=re.escape("mcp_routes(confirmation_ttl_s=...) is deprecated")),
        pytest.raises(ValueError, match=re.escape("ToolCalls.confirmation_ttl_s must be a positive")),
    ):
        mcp_routes(FastAPI(), confirmation_ttl_s=-5)


def test_an_old_request_state_key_must_still_be_long_bytes() -> None:
    with (
        pytest.warns(DeprecationWarning, match=re.escape("mcp_routes(request_state_key=...) is deprecated")),
        pytest.raises(ValueError, match="request_state_key must be at least 32 bytes"),
    ):
        mcp_routes(FastAPI(), request_state_key=b"short")


def test_the_old_identity_keywords_are_served() -> None:
    app = FastAPI()
    with pytest.warns(DeprecationWarning, match=re.escape("use mcp_routes(server=ServerInfo(")):
        app.include_router(mcp_routes(app, server_name="stock", server_version="9", instructions="Be kind."))
    with TestClient(app) as client:
        result = client.post("/mcp", json=initialize(), headers=HEADERS).json()["result"]
    assert (result["serverInfo"], result["instructions"]) == ({"name": "stock", "version": "9"}, "Be kind.")


def test_an_old_true_or_false_keyword_takes_any_value_as_it_did(read: list[EndpointOptions]) -> None:
    with pytest.warns(DeprecationWarning, match="is deprecated; use mcp_routes"):
        mcp_routes(FastAPI(), require_confirmation_for_mutations=0, allowed_server_urls_from_env="MY_URLS")
    assert read[0].tool_calls == ToolCalls(
        require_confirmation_for_mutations=False, allowed_server_urls_from_env="MY_URLS"
    )


def test_an_old_keyword_the_group_refuses_is_named_in_the_refusal() -> None:
    with (
        pytest.warns(DeprecationWarning, match="default_subscribe_ms"),
        pytest.raises(ValueError, match=r"^mcp_routes\(default_subscribe_ms=\.\.\.\): "),
    ):
        mcp_routes(FastAPI(), default_subscribe_ms=-5)


def test_an_old_keyword_is_logged_as_a_warning_where_deprecation_warnings_are_hidden(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        pytest.warns(DeprecationWarning, match="server_name"),
        caplog.at_level(logging.WARNING, logger="fastapi_mcp_routes"),
    ):
        mcp_routes(FastAPI(), server_name="Notes")
    assert [record.getMessage() for record in caplog.records] == [
        "mcp_routes(server_name=...) is deprecated; use mcp_routes(server=ServerInfo(name=...))"
    ]
