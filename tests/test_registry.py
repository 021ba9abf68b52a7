"""Tool discovery: names, descriptions, titles, annotations, included routers, a live route table."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Depends, FastAPI, Query

from fastapi_mcp_routes import mcp_tool
from fastapi_mcp_routes.tools.paging import decode_cursor
from fastapi_mcp_routes.tools.registry import ToolRegistry
from tests.support.discovery import registry_of, tool_of


def definition_of(app: FastAPI, name: str) -> dict[str, Any]:
    return dict(tool_of(app, name).definition)


def test_tool_name_defaults_to_the_function_name() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> list[str]:
        return []

    assert list(registry_of(app).table().by_name) == ["list_widgets"]


def test_explicit_name_replaces_the_function_name() -> None:
    app = FastAPI()

    @mcp_tool(name="widgets.list")
    @app.get("/widgets")
    def list_widgets() -> list[str]:
        return []

    table = registry_of(app).table()
    assert list(table.by_name) == ["widgets.list"]
    assert table.by_name["widgets.list"].definition["name"] == "widgets.list"


@pytest.mark.parametrize("name", ["a b", "x" * 129, "tool/name"], ids=["space", "129-chars", "slash"])
def test_invalid_tool_name_raises_naming_the_route(name: str) -> None:
    app = FastAPI()

    @mcp_tool(name=name)
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    with pytest.raises(ValueError, match=re.escape(f"route 'list_widgets' (GET /widgets): the tool name {name!r}")):
        registry_of(app).table()


def test_empty_route_name_raises_naming_the_route() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets", name="")
    def list_widgets() -> None:
        return None

    with pytest.raises(ValueError, match=re.escape("route '' (GET /widgets): the tool name ''")):
        registry_of(app).table()


def test_empty_explicit_name_raises_naming_the_route() -> None:
    app = FastAPI()

    @mcp_tool(name="")
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    with pytest.raises(ValueError, match=re.escape("route 'list_widgets' (GET /widgets): the tool name ''")):
        registry_of(app).table()


def test_name_of_128_characters_is_accepted() -> None:
    app = FastAPI()
    name = "n" * 128

    @mcp_tool(name=name)
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    assert list(registry_of(app).table().by_name) == [name]


def test_two_tools_with_one_name_raise_naming_both_routes() -> None:
    app = FastAPI()

    @mcp_tool(name="fetch")
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    @mcp_tool(name="fetch")
    @app.get("/gadgets")
    def list_gadgets() -> None:
        return None

    with pytest.raises(ValueError, match="two tools are named 'fetch'") as raised:
        registry_of(app).table()
    assert "route 'list_widgets' (GET /widgets)" in str(raised.value)
    assert "route 'list_gadgets' (GET /gadgets)" in str(raised.value)


def test_explicit_description_comes_first() -> None:
    app = FastAPI()

    @mcp_tool(description="From the decorator.")
    @app.get("/widgets", summary="From the summary", description="From the route.")
    def list_widgets() -> None:
        """From the docstring."""

    assert definition_of(app, "list_widgets")["description"] == "From the decorator."


def test_route_description_comes_before_summary_and_docstring() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets", summary="From the summary", description="From the route.")
    def list_widgets() -> None:
        """From the docstring."""

    assert definition_of(app, "list_widgets")["description"] == "From the route."


def test_docstring_is_the_description_and_summary_the_title() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/notes", summary="Create a note")
    def create_note() -> None:
        """Create a note. Needs the API key.

        \f
        Not for the model: FastAPI cuts the docstring here.
        """

    definition = definition_of(app, "create_note")
    assert definition["description"] == "Create a note. Needs the API key."
    assert definition["title"] == "Create a note"


def test_summary_describes_a_route_without_description_or_docstring() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets", summary="From the summary")
    def list_widgets() -> None:
        return None

    assert definition_of(app, "list_widgets")["description"] == "From the summary"


def test_docstring_describes_a_route_without_description_or_summary() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> None:
        """From the docstring.

        Second paragraph.
        """

    assert definition_of(app, "list_widgets")["description"] == "From the docstring.\n\nSecond paragraph."


def test_route_without_any_text_is_described_by_its_method_and_path() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.delete("/widgets/{widget_id}")
    def delete_widget(widget_id: int) -> None:
        return None

    assert definition_of(app, "delete_widget")["description"] == "Calls DELETE /widgets/{widget_id}."


def test_title_is_the_route_summary() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets", summary="List widgets")
    def list_widgets() -> None:
        return None

    assert definition_of(app, "list_widgets")["title"] == "List widgets"


def test_explicit_title_wins_over_the_summary() -> None:
    app = FastAPI()

    @mcp_tool(title="Widgets")
    @app.get("/widgets", summary="List widgets")
    def list_widgets() -> None:
        return None

    assert definition_of(app, "list_widgets")["title"] == "Widgets"


def test_route_without_summary_has_no_title() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    assert "title" not in definition_of(app, "list_widgets")


@pytest.mark.parametrize(
    ("method", "hints"),
    [
        ("GET", {"readOnlyHint": True}),
        ("POST", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}),
        ("PUT", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}),
        ("PATCH", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}),
        ("DELETE", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}),
    ],
)
def test_annotation_hints_follow_the_http_method(method: str, hints: dict[str, bool]) -> None:
    app = FastAPI()

    def change_widget() -> None:
        return None

    app.add_api_route("/widgets", mcp_tool()(change_widget), methods=[method])
    assert definition_of(app, "change_widget")["annotations"] == hints


def test_explicit_hints_override_the_method_hints() -> None:
    app = FastAPI()

    @mcp_tool(destructive=False, open_world=False)
    @app.delete("/cache")
    def clear_cache() -> None:
        return None

    @mcp_tool(read_only=False, idempotent=True)
    @app.get("/jobs/next")
    def take_next_job() -> None:
        return None

    assert definition_of(app, "clear_cache")["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert definition_of(app, "take_next_job")["annotations"] == {"readOnlyHint": False, "idempotentHint": True}


def test_route_on_an_included_router_has_the_prefix_and_the_router_dependencies() -> None:
    def tenant(tenant: Annotated[str, Query(description="The tenant id.")]) -> str:
        return tenant

    app = FastAPI()
    router = APIRouter(prefix="/v1", dependencies=[Depends(tenant)])

    @mcp_tool()
    @router.get("/widgets/{widget_id}")
    def get_widget(widget_id: int) -> dict[str, int]:
        return {"id": widget_id}

    app.include_router(router, prefix="/api")
    tool = registry_of(app).table().by_name["get_widget"]
    assert tool.path_format == "/api/v1/widgets/{widget_id}"
    assert tool.definition["description"] == "Calls GET /api/v1/widgets/{widget_id}."
    assert tool.definition["inputSchema"]["properties"]["tenant"]["description"] == "The tenant id."
    assert sorted(tool.definition["inputSchema"]["required"]) == ["tenant", "widget_id"]


def test_table_is_reused_while_the_routes_are_unchanged() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    registry = registry_of(app)
    assert registry.table() is registry.table()


def test_route_added_after_the_first_build_is_found_by_table() -> None:
    app = FastAPI()
    registry = registry_of(app)
    assert registry.table().by_name == {}

    @mcp_tool()
    @app.get("/late")
    def late_tool() -> None:
        return None

    assert list(registry.table().by_name) == ["late_tool"]


def test_route_added_after_the_first_build_is_found_by_lookup() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/early")
    def early_tool() -> None:
        return None

    registry = registry_of(app)
    assert registry.lookup("early_tool") is not None

    @mcp_tool()
    @app.get("/late")
    def late_tool() -> None:
        return None

    tool = registry.lookup("late_tool")
    assert tool is not None
    assert tool.path_format == "/late"


def test_route_added_to_an_included_router_after_the_first_build_is_found() -> None:
    app = FastAPI()
    router = APIRouter(prefix="/v1")
    app.include_router(router)
    registry = registry_of(app)
    assert registry.table().by_name == {}

    @mcp_tool()
    @router.get("/late")
    def late_tool() -> None:
        return None

    tool = registry.lookup("late_tool")
    assert tool is not None
    assert tool.path_format == "/v1/late"


def test_lookup_of_an_unknown_name_is_none() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    assert registry_of(app).lookup("list_gadgets") is None


def test_tools_are_in_name_order() -> None:
    app = FastAPI()
    for name in ["zeta", "alpha", "Mid", "beta"]:
        app.add_api_route(f"/{name}", mcp_tool(name=name)(lambda: None), methods=["GET"])

    table = registry_of(app).table()
    assert list(table.by_name) == ["Mid", "alpha", "beta", "zeta"]
    page = json.loads(table.pages[0].data)
    assert [tool["name"] for tool in page["tools"]] == ["Mid", "alpha", "beta", "zeta"]
    assert "nextCursor" not in page


def test_tools_list_is_split_into_pages_linked_by_cursors() -> None:
    app = FastAPI()
    for name in ["c", "a", "e", "b", "d"]:
        app.add_api_route(f"/{name}", mcp_tool(name=name)(lambda: None), methods=["GET"])

    pages = [json.loads(page.data) for page in ToolRegistry(app, frozenset(), page_size=2).table().pages]
    assert [[tool["name"] for tool in page["tools"]] for page in pages] == [["a", "b"], ["c", "d"], ["e"]]
    assert [page.get("nextCursor") for page in pages] == ["p1", "p2", None]
    assert [decode_cursor(page["nextCursor"], len(pages)) for page in pages[:2]] == [1, 2]


def test_app_without_tools_has_one_empty_page() -> None:
    pages = registry_of(FastAPI()).table().pages
    assert [json.loads(page.data) for page in pages] == [{"tools": []}]


@pytest.mark.parametrize("cursor", ["p0", "p3", "p01", "1", "", None, 1, "p1 "])
def test_cursor_that_names_no_page_decodes_to_none(cursor: object) -> None:
    assert decode_cursor(cursor, 3) is None


def test_marked_route_excluded_from_the_schema_raises() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/internal", include_in_schema=False)
    def internal() -> None:
        return None

    with pytest.raises(ValueError, match=re.escape("route 'internal' (GET /internal): a route with include_in_schema")):
        registry_of(app).table()


# FastAPI's own OpenAPI generation warns that a multi-method route repeats its operation id.
@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")
def test_multi_method_route_gives_one_tool_per_method() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.api_route("/widgets", methods=["GET", "POST"])
    def widgets() -> None:
        return None

    by_name = registry_of(app).table().by_name
    assert list(by_name) == ["widgets_get", "widgets_post"]
    assert by_name["widgets_get"].method == "GET"
    assert by_name["widgets_get"].definition["annotations"] == {"readOnlyHint": True}
    assert by_name["widgets_post"].method == "POST"
    assert by_name["widgets_post"].definition["annotations"]["readOnlyHint"] is False


def test_multi_method_route_with_an_explicit_name_raises() -> None:
    app = FastAPI()

    @mcp_tool(name="widgets")
    @app.api_route("/widgets", methods=["GET", "POST"])
    def widgets() -> None:
        return None

    with pytest.raises(ValueError, match=re.escape("one tool name 'widgets' cannot serve 2 methods")):
        registry_of(app).table()


def test_a_router_included_again_with_other_dependencies_is_a_new_tool_list() -> None:
    def tenant(tenant: Annotated[str, Query()]) -> None:
        return None

    app = FastAPI()
    router = APIRouter()

    @mcp_tool()
    @router.get("/widgets")
    def list_widgets() -> None:
        return None

    app.include_router(router)
    registry = registry_of(app)
    assert registry.table().restricted is False
    app.router.routes.pop()  # the inclusion, replaced by one that asks for a tenant
    app.include_router(router, dependencies=[Depends(tenant)])
    assert "tenant" in registry.table().by_name["list_widgets"].definition["inputSchema"]["properties"]


def test_a_route_that_is_not_a_tool_added_at_runtime_costs_no_rebuild() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/widgets")
    def list_widgets() -> None:
        return None

    registry = registry_of(app)
    before = registry.table()

    @app.get("/health")
    def health() -> None:
        return None

    after = registry.table()
    assert after is not before  # it knows the new route table
    assert after.pages is before.pages  # and kept the tools as they were
    assert after.generation == before.generation
