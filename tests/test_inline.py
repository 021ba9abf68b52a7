"""Models written out where they are used (tools/inline.py): recursive ones kept in `$defs`,
the keywords beside a reference, discriminators, hand-written `$defs`, and the size bound."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Iterator
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import anyio
import pytest
from fastapi import Body, FastAPI
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel, Field, create_model

from fastapi_mcp_routes import mcp_tool
from fastapi_mcp_routes.tools.inline import INLINED_SCHEMA_LIMIT, inline_models
from fastapi_mcp_routes.wire.json import dumps
from tests.support.discovery import registry_of, tool_of
from tests.support.waits import WAIT_S


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


def resolve(schema: dict[str, Any], reference: str) -> Any:
    """What a `#/...` JSON pointer names in `schema` (RFC 6901, in a URI fragment)."""
    assert reference.startswith("#/"), reference
    node: Any = schema
    for token in unquote(reference[2:]).split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]
    return node


class Address(BaseModel):
    city: str


class Node(BaseModel):
    label: str
    address: Address | None = None
    children: list[Node] = []


class Forest(BaseModel):
    trees: list[Node]


class Parent(BaseModel):
    name: str
    child: Child | None = None


class Child(BaseModel):
    name: str
    parent: Parent | None = None


class Family(BaseModel):
    head: Parent


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: int


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int = 0


class Owner(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind", description="The pet.")]


def test_a_recursive_model_stays_in_defs_and_the_models_it_holds_are_written_out_inside_it() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/forests")
    def plant(forest: Forest) -> Forest:
        return forest

    definition = tool_of(app, "plant").definition
    for schema in (definition["inputSchema"], definition["outputSchema"]):
        (name,) = schema["$defs"]  # Node-Input or Node-Output: FastAPI names each side's model
        assert set(refs_in(schema)) == {f"#/$defs/{name}"}
        assert schema["properties"]["trees"]["items"] == {"$ref": f"#/$defs/{name}"}
        node = schema["$defs"][name]
        assert node["properties"]["children"]["items"] == {"$ref": f"#/$defs/{name}"}
        address = node["properties"]["address"]["anyOf"][0]
        assert address["properties"] == {"city": {"type": "string", "title": "City"}}


def test_models_that_hold_each_other_stay_in_defs_and_a_model_holding_them_is_written_out() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/families")
    def register(family: Family) -> None:
        return None

    schema = tool_of(app, "register").definition["inputSchema"]
    assert sorted(schema["$defs"]) == ["Child", "Parent"]
    assert schema["properties"]["head"] == {"$ref": "#/$defs/Parent"}
    assert schema["$defs"]["Parent"]["properties"]["child"]["anyOf"][0] == {"$ref": "#/$defs/Child"}


def test_a_discriminators_mapping_points_at_the_variants_written_out() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.post("/owners")
    def adopt(owner: Owner, note: Annotated[str, Body()] = "") -> None:
        return None

    schema = tool_of(app, "adopt").definition["inputSchema"]
    assert "$defs" not in schema
    pet = schema["properties"]["owner"]["properties"]["pet"]
    assert pet["description"] == "The pet."
    assert pet["discriminator"]["propertyName"] == "kind"
    mapping = pet["discriminator"]["mapping"]
    assert mapping == {
        "cat": "#/properties/owner/properties/pet/oneOf/0",
        "dog": "#/properties/owner/properties/pet/oneOf/1",
    }
    assert resolve(schema, mapping["cat"])["title"] == "Cat"
    assert resolve(schema, mapping["dog"])["properties"]["barks"]["default"] == 0


def test_a_mapping_pointer_escapes_what_a_pointer_and_a_fragment_cannot_hold() -> None:
    cat = {"type": "object", "properties": {"kind": {"const": "cat"}}}
    schema = {
        "type": "object",
        "properties": {
            "a/b c~": {"oneOf": [{"$ref": "#/$defs/Cat"}], "discriminator": {"mapping": {"cat": "#/$defs/Cat"}}}
        },
        "$defs": {"Cat": cat},
    }
    inlined = inline_models(schema, {"Cat"})
    assert inlined is not None
    pointer = inlined["properties"]["a/b c~"]["discriminator"]["mapping"]["cat"]
    assert pointer == "#/properties/a~1b%20c~0/oneOf/0"
    assert resolve(inlined, pointer) == cat


def test_a_model_a_mapping_names_outside_its_variants_stays_in_defs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pet": {
                "anyOf": [{"$ref": "#/$defs/Cat"}],
                "discriminator": {"mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}},
            }
        },
        "$defs": {"Cat": {"type": "object"}, "Dog": {"type": "object"}},
    }
    inlined = inline_models(schema, {"Cat", "Dog"})
    assert inlined is not None
    assert inlined["$defs"] == {"Dog": {"type": "object"}}
    assert inlined["properties"]["pet"]["discriminator"]["mapping"] == {
        "cat": "#/properties/pet/anyOf/0",
        "dog": "#/$defs/Dog",
    }


def test_a_description_or_default_given_where_a_model_is_used_wins_over_the_models_own() -> None:
    schema = {
        "type": "object",
        "properties": {"colour": {"$ref": "#/$defs/Colour", "description": "The paint.", "default": "red"}},
        "$defs": {"Colour": {"type": "string", "enum": ["red", "blue"], "title": "Colour", "description": "A colour."}},
    }
    assert inline_models(schema, {"Colour"}) == {
        "type": "object",
        "properties": {
            "colour": {
                "type": "string",
                "enum": ["red", "blue"],
                "title": "Colour",
                "description": "The paint.",
                "default": "red",
            }
        },
    }


def test_a_validation_keyword_on_both_sides_of_a_reference_keeps_both_under_all_of() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"$ref": "#/$defs/Code", "maxLength": 3}},
        "$defs": {"Code": {"type": "string", "maxLength": 8}},
    }
    inlined = inline_models(schema, {"Code"})
    assert inlined is not None
    assert inlined["properties"]["code"] == {"allOf": [{"type": "string", "maxLength": 8}], "maxLength": 3}


def test_a_reference_to_a_place_inside_a_model_keeps_the_model_in_defs() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "name": {"$ref": "#/$defs/A/properties/name"}},
        "$defs": {"A": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }
    inlined = inline_models(schema, {"A"})
    assert inlined is not None
    assert inlined == schema


def test_instances_are_copied_as_they_are_even_where_they_look_like_references() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A", "default": {"$ref": "#/$defs/A"}, "examples": [{"$ref": "x"}]}},
        "$defs": {"A": {"type": "object"}},
    }
    inlined = inline_models(schema, {"A"})
    assert inlined is not None
    assert inlined["properties"]["a"] == {
        "type": "object",
        "default": {"$ref": "#/$defs/A"},
        "examples": [{"$ref": "x"}],
    }


def test_a_hand_written_schemas_own_defs_stay_as_written_beside_the_models_written_out() -> None:
    app = FastAPI()
    body = {
        "type": "object",
        "$defs": {"point": {"$anchor": "pointDef", "type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {"at": {"$ref": "#/$defs/point"}, "where": {"$ref": "#/components/schemas/Address"}},
        "required": ["at"],
    }

    @mcp_tool()
    @app.post(
        "/pins", openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": body}}}}
    )
    def pin(address: Address | None = None) -> None:
        return None

    schema = tool_of(app, "pin").definition["inputSchema"]
    assert schema["$defs"] == {"point": body["$defs"]["point"]}
    assert schema["properties"]["at"] == {"$ref": "#/$defs/point"}
    assert schema["properties"]["where"]["properties"] == {"city": {"type": "string", "title": "City"}}


class Reading(BaseModel):
    where: Address
    value: float


def test_a_streamed_items_models_are_written_out_in_the_output_schema() -> None:
    app = FastAPI()

    @mcp_tool()
    @app.get("/readings", response_class=EventSourceResponse)
    async def readings() -> AsyncIterable[Reading]:
        yield Reading(where=Address(city="Oslo"), value=1.0)  # pragma: no cover - never served

    output = tool_of(app, "readings").definition["outputSchema"]
    assert "$defs" not in output
    data = output["properties"]["frames"]["items"]["properties"]["data"]
    assert data["properties"]["where"]["properties"] == {"city": {"title": "City", "type": "string"}}


def doubling_chain(depth: int) -> type[BaseModel]:
    """A model whose schema doubles at each of `depth` levels once written out: each level holds
    the next one twice."""
    level: type[BaseModel] = create_model("Level0", text=(str, ""))
    for number in range(1, depth + 1):
        level = create_model(f"Level{number}", left=(level, ...), right=(level, ...))
    return level


def chained_app(depth: int) -> FastAPI:
    app = FastAPI()
    top = doubling_chain(depth)

    def deep(node: BaseModel) -> dict[str, int]:
        return {}

    deep.__annotations__["node"] = top  # a type made at run time: the annotation must be the class itself
    app.add_api_route("/deep", mcp_tool()(deep), methods=["POST"], response_model=dict[str, int])

    @mcp_tool()
    @app.post("/flat")
    def flat(address: Address) -> Address:
        return address

    return app


def test_a_schema_that_would_pass_the_limit_keeps_its_defs_and_discovery_warns_naming_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    depth = 12  # 4,096 copies of the innermost level once written out: far past 64 KiB
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_routes"):
        table = registry_of(chained_app(depth)).table()
    deep = table.by_name["deep"].definition
    assert set(deep["inputSchema"]["$defs"]) == {f"Level{n}" for n in range(depth)}  # Level12 is the body
    assert deep["inputSchema"]["properties"]["left"] == {"$ref": f"#/$defs/Level{depth - 1}"}
    assert len(dumps(deep["inputSchema"])) < INLINED_SCHEMA_LIMIT
    assert "$defs" not in deep["outputSchema"]  # the output is small: written out all the same
    assert "$defs" not in table.by_name["flat"].definition["inputSchema"]
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "the inputSchema of the tool 'deep' keeps its models in $defs" in warnings[0]
    assert "route 'deep' (POST /deep)" in warnings[0]
    assert f"{INLINED_SCHEMA_LIMIT} bytes" in warnings[0]


def test_a_streamed_item_that_would_pass_the_limit_keeps_its_defs_and_discovery_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FastAPI()
    item = doubling_chain(12)

    async def ticks() -> AsyncIterable[BaseModel]:
        yield item()  # pragma: no cover - never served

    ticks.__annotations__["return"] = AsyncIterable[item]  # a type made at run time, as in chained_app
    app.add_api_route("/ticks", mcp_tool()(ticks), methods=["GET"], response_class=EventSourceResponse)
    with caplog.at_level(logging.WARNING, logger="fastapi_mcp_routes"):
        output = tool_of(app, "ticks").definition["outputSchema"]
    assert "Level0" in output["$defs"]
    (warning,) = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert "the outputSchema of the tool 'ticks' keeps its models in $defs" in warning


def test_a_schema_just_under_the_limit_is_written_out() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/A"}},
        "$defs": {"A": {"type": "string", "description": "x" * 1000}},
    }
    inlined = inline_models(schema, {"A"}, limit=len(dumps(schema)) + 1000)
    assert inlined is not None
    assert inlined["properties"]["a"] == inlined["properties"]["b"] == schema["$defs"]["A"]
    assert inline_models(schema, {"A"}, limit=len(dumps(schema)) + 900) is None


def test_a_large_model_used_once_is_written_out_though_it_is_past_the_limit() -> None:
    fields = {f"field_{n}": {"type": "string", "description": "d" * 100} for n in range(1000)}
    schema = {
        "type": "object",
        "properties": {"big": {"$ref": "#/$defs/Big"}},
        "$defs": {"Big": {"type": "object", "properties": fields}},
    }
    assert len(dumps(schema)) > INLINED_SCHEMA_LIMIT
    inlined = inline_models(schema, {"Big"})
    assert inlined is not None
    assert inlined["properties"]["big"]["properties"] == fields


@pytest.mark.anyio
async def test_a_model_shared_a_billion_times_over_costs_no_more_than_the_limit() -> None:
    app = chained_app(30)  # 2**30 copies written out: the work must stop at the bound
    with anyio.fail_after(WAIT_S):
        table = await anyio.to_thread.run_sync(lambda: registry_of(app).table(), abandon_on_cancel=True)
    assert "$defs" in table.by_name["deep"].definition["inputSchema"]


def test_a_model_written_out_twice_is_two_copies_and_the_definitions_stay_untouched() -> None:
    definition = {"type": "object", "properties": {"city": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"$ref": "#/$defs/A"}},
        "$defs": {"A": definition},
    }
    inlined = inline_models(schema, {"A"})
    assert inlined is not None
    inlined["properties"]["a"]["properties"]["city"]["maxLength"] = 3
    assert inlined["properties"]["b"] == definition == {"type": "object", "properties": {"city": {"type": "string"}}}
