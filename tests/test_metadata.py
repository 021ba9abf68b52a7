"""Marking a route as a tool: the `mcp_tool` decorator and `openapi_extra={"x-mcp": ...}`."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI

from fastapi_mcp_routes import mcp_tool
from tests.support.discovery import registry_of


def tool_definitions(app: FastAPI) -> dict[str, Any]:
    return {name: tool.definition for name, tool in registry_of(app).table().by_name.items()}


def test_decorator_above_the_route_decorator_marks_the_route() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/ping")
    def ping() -> str:
        return "pong"

    assert list(tool_definitions(app)) == ["ping"]


def test_decorator_below_the_route_decorator_marks_the_route() -> None:
    app = FastAPI()

    @app.get("/ping")
    @mcp_tool()
    def ping() -> str:
        return "pong"

    assert list(tool_definitions(app)) == ["ping"]


def test_decorator_returns_the_endpoint_itself() -> None:
    def ping() -> str:
        return "pong"

    assert mcp_tool(name="p")(ping) is ping
    assert ping() == "pong"


def test_decorator_options_shape_the_tool() -> None:
    app = FastAPI()

    @mcp_tool(name="ping_tool", title="Ping", description="Answers pong.", open_world=False, meta={"team": "core"})
    @app.get("/ping")
    def ping() -> str:
        return "pong"

    definition = tool_definitions(app)["ping_tool"]
    assert definition["title"] == "Ping"
    assert definition["description"] == "Answers pong."
    assert definition["annotations"]["openWorldHint"] is False
    assert definition["_meta"] == {"team": "core"}


def test_openapi_extra_true_marks_the_route_with_derived_options() -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-mcp": True})
    def ping() -> str:
        return "pong"

    definition = tool_definitions(app)["ping"]
    assert definition["description"] == "Calls GET /ping."
    assert definition["annotations"] == {"readOnlyHint": True}


def test_openapi_extra_mapping_sets_the_tool_options() -> None:
    app = FastAPI()
    options = {
        "name": "reset_counter",
        "title": "Reset",
        "description": "Sets the counter to zero.",
        "idempotent": True,
    }

    @app.post("/counter/reset", openapi_extra={"x-mcp": options})
    def reset() -> None:
        return None

    definition = tool_definitions(app)["reset_counter"]
    assert definition["title"] == "Reset"
    assert definition["description"] == "Sets the counter to zero."
    assert definition["annotations"]["idempotentHint"] is True


def test_openapi_extra_false_leaves_the_route_unmarked() -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-mcp": False})
    def ping() -> str:
        return "pong"

    assert tool_definitions(app) == {}


def test_route_without_metadata_is_not_a_tool() -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-other": {"name": "nope"}})
    def ping() -> str:
        return "pong"

    @app.get("/plain")
    def plain() -> str:
        return "plain"

    assert tool_definitions(app) == {}


def test_unknown_option_in_openapi_extra_raises_naming_the_route_and_the_option() -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-mcp": {"colour": "blue"}})
    def ping() -> str:
        return "pong"

    with pytest.raises(ValueError, match=re.escape("route 'ping' (GET /ping): unknown MCP tool option(s) ['colour']")):
        tool_definitions(app)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": 5}, "'name' must be a string, got 5"),
        ({"description": ["a"]}, "'description' must be a string, got ['a']"),
        ({"read_only": "yes"}, "'read_only' must be a bool, got 'yes'"),
        ({"destructive": 1}, "'destructive' must be a bool, got 1"),
        ({"meta": "team=core"}, "'meta' must be a mapping, got 'team=core'"),
    ],
)
def test_option_of_the_wrong_type_in_openapi_extra_raises_naming_the_route(
    options: dict[str, Any], message: str
) -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-mcp": options})
    def ping() -> str:
        return "pong"

    with pytest.raises(ValueError, match=re.escape(f"route 'ping' (GET /ping): MCP tool option {message}")):
        tool_definitions(app)


def test_openapi_extra_neither_true_nor_a_mapping_raises_naming_the_route() -> None:
    app = FastAPI()

    @app.get("/ping", openapi_extra={"x-mcp": "yes"})
    def ping() -> str:
        return "pong"

    with pytest.raises(ValueError, match=re.escape("route 'ping' (GET /ping): openapi_extra['x-mcp'] must be True")):
        tool_definitions(app)


def test_decorator_option_of_the_wrong_type_raises_at_decoration() -> None:
    message = "mcp_tool(): MCP tool option 'read_only' must be a bool, got 'yes'"
    with pytest.raises(ValueError, match=re.escape(message)):
        mcp_tool(read_only="yes")  # type: ignore[arg-type]


def test_both_forms_on_one_route_raise_naming_the_route() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/ping", openapi_extra={"x-mcp": True})
    def ping() -> str:
        return "pong"

    message = "route 'ping' (GET /ping): marked both by @mcp_tool and openapi_extra['x-mcp']; keep one"
    with pytest.raises(ValueError, match=re.escape(message)):
        tool_definitions(app)
