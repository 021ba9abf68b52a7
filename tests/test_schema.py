"""Tool schemas read from the route's OpenAPI operation: arguments, bodies, `$defs`, outputs."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import Body, Cookie, FastAPI, File, Form, Header, Path, Query, UploadFile
from pydantic import BaseModel

from fastapi_mcp_routes import mcp_tool
from fastapi_mcp_routes.tools.schema import Argument, BodyMode
from tests.support.discovery import CREDENTIALS, tool_of


def input_schema(app: FastAPI, name: str, credential_headers: frozenset[str] = CREDENTIALS) -> dict[str, Any]:
    return dict(tool_of(app, name, credential_headers).definition["inputSchema"])


def refs_in(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs_in(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs_in(item)


class Colour(enum.StrEnum):
    red = "red"
    blue = "blue"


class Item(BaseModel):
    name: str
    price: float = 0.0


class Address(BaseModel):
    city: str


class Person(BaseModel):
    home: Address
    work: Address | None = None


class Shop(BaseModel):
    address: Address


class Node(BaseModel):
    label: str
    children: list[Node] = []


# The models as a tool's schema writes them out where they are used.
ITEM = {
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "price": {"type": "number", "title": "Price", "default": 0.0},
    },
    "type": "object",
    "required": ["name"],
    "title": "Item",
}
ADDRESS = {
    "properties": {"city": {"type": "string", "title": "City"}},
    "type": "object",
    "required": ["city"],
    "title": "Address",
}


def parameters_app() -> FastAPI:
    app = FastAPI()

    @mcp_tool()
    @app.get("/items/{item_id}")
    def find_items(
        *,
        item_id: Annotated[int, Path(ge=1, description="The item's number.")],
        q: Annotated[str, Query(min_length=2, max_length=50, examples=["lamp"])],
        x_region: Annotated[str, Header()],
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        colour: Colour = Colour.red,
        sort: Annotated[str, Query(openapi_examples={"by name": {"value": "name"}, "newest": {"value": "-date"}})] = "",
        old: Annotated[str | None, Query(deprecated=True)] = None,
        x_trace: Annotated[str, Header()] = "none",
        visit: Annotated[str | None, Cookie()] = None,
    ) -> None:
        return None

    return app


def test_path_query_and_header_parameters_are_arguments_in_their_places_and_cookies_are_not() -> None:
    tool = tool_of(parameters_app(), "find_items")
    assert tool.schema.arguments == {
        "item_id": Argument("path", "item_id"),
        "q": Argument("query", "q"),
        "limit": Argument("query", "limit"),
        "colour": Argument("query", "colour"),
        "sort": Argument("query", "sort"),
        "old": Argument("query", "old"),
        "x-trace": Argument("header", "x-trace"),
        "x-region": Argument("header", "x-region"),
    }
    assert tool.schema.body_mode is BodyMode.NONE


def test_required_lists_exactly_the_parameters_without_defaults() -> None:
    schema = input_schema(parameters_app(), "find_items")
    assert sorted(schema["required"]) == ["item_id", "q", "x-region"]


def test_parameter_defaults_are_kept() -> None:
    properties = input_schema(parameters_app(), "find_items")["properties"]
    assert properties["limit"]["default"] == 10
    assert properties["colour"]["default"] == "red"
    assert properties["x-trace"]["default"] == "none"
    assert "default" not in properties["q"]


def test_enum_parameter_keeps_its_values_written_out_in_place() -> None:
    schema = input_schema(parameters_app(), "find_items")
    assert schema["properties"]["colour"] == {
        "type": "string",
        "enum": ["red", "blue"],
        "title": "Colour",
        "default": "red",
    }
    assert "$defs" not in schema


def test_parameter_constraints_are_kept() -> None:
    properties = input_schema(parameters_app(), "find_items")["properties"]
    assert properties["item_id"]["minimum"] == 1
    assert (properties["limit"]["minimum"], properties["limit"]["maximum"]) == (1, 100)
    assert (properties["q"]["minLength"], properties["q"]["maxLength"]) == (2, 50)


def test_parameter_description_is_kept() -> None:
    properties = input_schema(parameters_app(), "find_items")["properties"]
    assert properties["item_id"]["description"] == "The item's number."


def test_parameter_examples_are_kept_as_a_list_of_values() -> None:
    properties = input_schema(parameters_app(), "find_items")["properties"]
    assert properties["q"]["examples"] == ["lamp"]
    assert properties["sort"]["examples"] == ["name", "-date"]


def test_deprecated_parameter_is_flagged() -> None:
    properties = input_schema(parameters_app(), "find_items")["properties"]
    assert properties["old"]["deprecated"] is True


def test_top_level_additional_properties_are_refused_and_required_is_listed_even_when_empty() -> None:
    app = parameters_app()

    @mcp_tool()
    @app.get("/ping")
    def ping() -> None:
        return None

    assert input_schema(app, "find_items")["additionalProperties"] is False
    assert input_schema(app, "ping") == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_credential_headers_are_not_arguments() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/me")
    def who_am_i(
        authorization: Annotated[str, Header()],
        api_key: Annotated[str | None, Header(alias="X-API-Key")] = None,
        x_tenant_secret: Annotated[str | None, Header()] = None,
        x_trace: Annotated[str | None, Header()] = None,
    ) -> None:
        return None

    default = input_schema(app, "who_am_i")
    assert sorted(default["properties"]) == ["x-tenant-secret", "x-trace"]
    assert default["required"] == []

    custom = input_schema(app, "who_am_i", CREDENTIALS | {"x-tenant-secret"})
    assert sorted(custom["properties"]) == ["x-trace"]


def test_single_body_model_fields_are_top_level_arguments() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/items")
    def create_item(item: Item) -> Item:
        return item

    tool = tool_of(app, "create_item")
    schema = tool.definition["inputSchema"]
    assert schema["properties"] == {
        "name": {"type": "string", "title": "Name"},
        "price": {"type": "number", "title": "Price", "default": 0.0},
    }
    assert schema["required"] == ["name"]
    assert tool.schema.body_mode is BodyMode.FIELDS
    assert tool.schema.arguments["price"] == Argument("body", "price")


def test_body_field_named_like_a_parameter_puts_the_whole_body_under_body() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.put("/items/{name}")
    def replace_item(name: str, item: Item) -> Item:
        return item

    tool = tool_of(app, "replace_item")
    schema = tool.definition["inputSchema"]
    assert sorted(schema["properties"]) == ["body", "name"]
    assert schema["properties"]["body"] == ITEM
    assert sorted(schema["required"]) == ["body", "name"]
    assert tool.schema.body_mode is BodyMode.WHOLE


def test_optional_body_model_is_kept_whole_under_body_and_not_required() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/items")
    def create_item(item: Item | None = None) -> None:
        return None

    schema = input_schema(app, "create_item")
    assert list(schema["properties"]) == ["body"]
    assert schema["required"] == []


def test_embedded_body_is_a_named_argument() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/items")
    def create_item(item: Annotated[Item, Body(embed=True)]) -> None:
        return None

    tool = tool_of(app, "create_item")
    schema = tool.definition["inputSchema"]
    assert schema["properties"] == {"item": ITEM}
    assert schema["required"] == ["item"]
    assert tool.schema.arguments["item"] == Argument("body", "item")


def test_two_body_parameters_are_named_arguments() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/orders")
    def place_order(item: Item, buyer: Person, quantity: Annotated[int, Body(gt=0)]) -> None:
        return None

    schema = input_schema(app, "place_order")
    assert schema["properties"]["item"] == ITEM
    assert schema["properties"]["buyer"]["properties"]["home"] == ADDRESS
    assert schema["properties"]["quantity"]["exclusiveMinimum"] == 0
    assert sorted(schema["required"]) == ["buyer", "item", "quantity"]


def test_form_fields_are_top_level_arguments() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/login")
    def log_in(username: Annotated[str, Form()], remember: Annotated[bool, Form()] = False) -> None:
        return None

    tool = tool_of(app, "log_in")
    schema = tool.definition["inputSchema"]
    assert sorted(schema["properties"]) == ["remember", "username"]
    assert schema["required"] == ["username"]
    assert tool.schema.body_mode is BodyMode.FIELDS
    assert tool.schema.body_media_type == "application/x-www-form-urlencoded"


def test_recursive_model_is_described_through_defs() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/trees")
    def plant_tree(root: Node) -> Node:
        return root

    tool = tool_of(app, "plant_tree")
    for schema in (tool.definition["inputSchema"], tool.definition["outputSchema"]):
        assert "#/components/" not in json.dumps(schema)
        refs = set(refs_in(schema))
        assert refs
        assert all(ref.startswith("#/$defs/") for ref in refs)
        assert {ref.removeprefix("#/$defs/") for ref in refs} <= set(schema["$defs"])
    (node_def,) = tool.definition["inputSchema"]["$defs"].values()
    assert node_def["properties"]["children"]["items"]["$ref"].startswith("#/$defs/Node")


def test_shared_nested_model_is_written_out_wherever_it_is_used() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/directory")
    def register(person: Person, shop: Shop) -> None:
        return None

    schema = input_schema(app, "register")
    assert "$defs" not in schema
    assert not list(refs_in(schema))
    assert schema["properties"]["shop"]["properties"]["address"] == ADDRESS
    assert schema["properties"]["person"]["properties"]["home"] == ADDRESS
    assert schema["properties"]["person"]["properties"]["work"]["anyOf"] == [ADDRESS, {"type": "null"}]


def test_object_response_model_is_the_output_schema_as_is() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/items/{item_id}")
    def get_item(item_id: int) -> Item:
        return Item(name="lamp")

    tool = tool_of(app, "get_item")
    output = tool.definition["outputSchema"]
    assert output["type"] == "object"
    assert sorted(output["properties"]) == ["name", "price"]
    assert output["required"] == ["name"]
    assert tool.schema.output_wrapped is False


@pytest.mark.parametrize(
    ("returns", "result_schema"),
    [
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (int, {"type": "integer"}),
    ],
    ids=["list", "int"],
)
def test_non_object_response_is_wrapped_under_result(returns: Any, result_schema: dict[str, Any]) -> None:
    app = FastAPI()

    def count() -> Any:
        return None

    app.add_api_route("/count", mcp_tool()(count), methods=["GET"], response_model=returns)
    tool = tool_of(app, "count")
    output = tool.definition["outputSchema"]
    assert output["type"] == "object"
    assert output["required"] == ["result"]
    assert list(output["properties"]) == ["result"]
    assert result_schema.items() <= output["properties"]["result"].items()
    assert tool.schema.output_wrapped is True


def test_list_of_models_response_has_the_model_written_out_under_result() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/items")
    def list_items() -> list[Item]:
        return []

    output = tool_of(app, "list_items").definition["outputSchema"]
    assert output["properties"]["result"]["items"] == ITEM
    assert "$defs" not in output


def test_route_without_response_model_has_no_output_schema() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/ping")
    def ping():  # type: ignore[no-untyped-def]
        return "pong"

    tool = tool_of(app, "ping")
    assert "outputSchema" not in tool.definition
    assert tool.schema.output_schema is None


async def upload_file(document: UploadFile) -> None:
    return None


async def upload_bytes(document: Annotated[bytes, File()]) -> None:
    return None


async def upload_files(document: list[UploadFile], note: Annotated[str, Form()] = "") -> None:
    return None


@pytest.mark.parametrize("endpoint", [upload_file, upload_bytes, upload_files], ids=lambda endpoint: endpoint.__name__)
def test_file_upload_raises_naming_the_route_and_the_field(endpoint: Any) -> None:
    app = FastAPI()
    app.add_api_route("/documents", mcp_tool()(endpoint), methods=["POST"], name="upload")
    message = "route 'upload' (POST /documents): the file upload field 'document' cannot be a tool argument"
    with pytest.raises(ValueError, match=re.escape(message)):
        tool_of(app, "upload")


def test_two_parameters_of_one_name_in_different_places_raise() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/records")
    def find_records(
        query_id: Annotated[str, Query(alias="id")],
        header_id: Annotated[str | None, Header(alias="id")] = None,
    ) -> None:
        return None

    with pytest.raises(ValueError, match=re.escape("route 'find_records' (GET /records)")):
        tool_of(app, "find_records")
