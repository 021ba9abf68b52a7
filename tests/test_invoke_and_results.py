"""A tool call as the route's HTTP request (`build_request`), and its response as a tool result."""

from __future__ import annotations

import base64
import json
import logging
import re
from typing import Annotated, Any

import anyio
import pytest
from fastapi import Cookie, FastAPI, Form, Header, HTTPException, Query, Request
from pydantic import BaseModel
from starlette.requests import Request as StarletteRequest

from fastapi_mcp_routes import mcp_tool
from fastapi_mcp_routes.tools.invoke import Caller, CapturedResponse, build_request, invoke
from fastapi_mcp_routes.tools.recipe import Tool
from fastapi_mcp_routes.tools.results import tool_result
from fastapi_mcp_routes.wire.errors import ToolError
from tests.support.discovery import registry_of

CALL_TIMEOUT_S = 5.0
JSON = ((b"content-type", b"application/json"),)

CALLER = Caller(
    headers=((b"authorization", b"Bearer caller-token"), (b"cookie", b"session=caller-session; theme=dark")),
    client=("203.0.113.7", 50000),
    server=("127.0.0.1", 8000),
    scheme="http",
    root_path="",
    http_version="1.1",
    state=None,
)


class Item(BaseModel):
    name: str
    price: float = 0.0


def build_app() -> FastAPI:
    app = FastAPI()

    @mcp_tool()
    @app.get("/items/{item_id}")
    def get_item(item_id: str, request: Request) -> dict[str, Any]:
        return {"item_id": item_id, "authorization": request.headers.get("authorization")}

    @mcp_tool()
    @app.get("/pairs/{first}/{second}")
    def get_pair(first: str, second: str) -> None:
        return None

    @mcp_tool()
    @app.get("/files/{file_path:path}")
    def read_file(file_path: str) -> None:
        return None

    @mcp_tool()
    @app.get("/search")
    def search(
        tags: Annotated[list[str], Query()] = [],  # noqa: B006 - FastAPI copies the default
        exact: bool = False,
        page: int | None = None,
        x_trace: Annotated[str | None, Header()] = None,
        session: Annotated[str | None, Cookie()] = None,
    ) -> list[str]:
        return tags

    @mcp_tool()
    @app.post("/items")
    def create_item(item: Item) -> Item:
        return item

    @mcp_tool()
    @app.put("/items/{name}")
    def replace_item(name: str, item: Item) -> Item:
        return item

    @mcp_tool()
    @app.post("/login")
    def log_in(username: Annotated[str, Form()], remember: Annotated[bool, Form()] = False) -> None:
        return None

    @mcp_tool()
    @app.get("/photo")
    def get_photo():  # type: ignore[no-untyped-def]
        raise HTTPException(404, "Photo not found")

    return app


APP = build_app()
REGISTRY = registry_of(APP)


def tool(name: str) -> Tool:
    found = REGISTRY.lookup(name)
    assert found is not None
    return found


def request_of(name: str, arguments: dict[str, Any], caller: Caller = CALLER) -> StarletteRequest:
    scope, _ = build_request(tool(name), arguments, caller)
    return StarletteRequest(scope)


def text_of(result: dict[str, Any]) -> str:
    (block,) = result["content"]
    assert block["type"] == "text"
    return str(block["text"])


# build_request


def test_path_values_are_percent_encoded_in_the_raw_path() -> None:
    scope, body = build_request(tool("get_item"), {"item_id": "a b?#%é"}, CALLER)
    assert scope["path"] == "/items/a b?#%é"
    assert scope["raw_path"] == b"/items/a%20b%3F%23%25%C3%A9"
    assert scope["method"] == "GET"
    assert body == b""


def test_arguments_that_make_a_url_longer_than_a_request_line_are_refused_before_the_route() -> None:
    with pytest.raises(ToolError, match=re.escape("past the 8,192 a server accepts in a request line")):
        build_request(tool("get_item"), {"item_id": "x" * 200_000}, CALLER)
    scope, _ = build_request(tool("get_item"), {"item_id": "x" * 8_000}, CALLER)
    assert len(scope["raw_path"]) < 8_192


def test_path_value_containing_a_slash_is_refused() -> None:
    with pytest.raises(ToolError, match=re.escape("Argument 'item_id' must be a non-empty path segment")):
        build_request(tool("get_item"), {"item_id": "../admin"}, CALLER)


def test_empty_path_value_is_refused() -> None:
    with pytest.raises(ToolError, match="non-empty path segment"):
        build_request(tool("get_item"), {"item_id": ""}, CALLER)


def test_path_convertor_lets_a_value_contain_slashes() -> None:
    scope, _ = build_request(tool("read_file"), {"file_path": "docs/read me.txt"}, CALLER)
    assert scope["path"] == "/files/docs/read me.txt"
    assert scope["raw_path"] == b"/files/docs/read%20me.txt"


def test_path_value_that_looks_like_a_placeholder_is_taken_literally() -> None:
    scope, _ = build_request(tool("get_pair"), {"first": "{second}", "second": "b"}, CALLER)
    assert scope["raw_path"] == b"/pairs/%7Bsecond%7D/b"
    assert scope["path"] == "/pairs/{second}/b"


def test_list_argument_becomes_repeated_query_parameters() -> None:
    request = request_of("search", {"tags": ["red", "blue & green"]})
    assert request.query_params.getlist("tags") == ["red", "blue & green"]


def test_booleans_become_true_and_false() -> None:
    assert request_of("search", {"exact": True}).url.query == "exact=true"
    assert request_of("search", {"exact": False}).url.query == "exact=false"
    assert request_of("log_in", {"username": "ada", "remember": True}).headers["content-type"] == (
        "application/x-www-form-urlencoded"
    )
    _, body = build_request(tool("log_in"), {"username": "ada", "remember": True}, CALLER)
    assert body == b"username=ada&remember=true"


def test_null_optional_argument_is_left_out() -> None:
    request = request_of("search", {"page": None, "x-trace": None})
    assert request.url.query == ""
    assert "x-trace" not in request.headers
    assert request.cookies == {"session": "caller-session", "theme": "dark"}


def test_header_argument_is_sent_as_a_header() -> None:
    assert request_of("search", {"x-trace": "abc"}).headers["x-trace"] == "abc"


def test_unknown_arguments_are_refused_listing_what_the_tool_takes() -> None:
    with pytest.raises(ToolError) as raised:
        build_request(tool("get_item"), {"item_id": "1", "verbose": True, "colour": "red"}, CALLER)
    # In the order they were sent: no sort of what may be hundreds of thousands of names.
    assert str(raised.value) == "Unknown argument(s) 'verbose', 'colour'; the tool 'get_item' takes: item_id."


def test_missing_required_arguments_are_refused_by_name() -> None:
    with pytest.raises(ToolError) as raised:
        build_request(tool("get_pair"), {}, CALLER)
    assert str(raised.value) == "Missing required argument(s): 'first', 'second'."


def test_non_scalar_parameter_value_is_refused() -> None:
    with pytest.raises(ToolError, match=re.escape("Argument 'item_id' must be a string, number or boolean")):
        build_request(tool("get_item"), {"item_id": {"id": 1}}, CALLER)


def test_cookie_parameters_are_credentials_a_model_cannot_send() -> None:
    assert "session" not in tool("search").schema.arguments
    with pytest.raises(ToolError, match="Unknown argument"):
        build_request(tool("search"), {"session": "model-session"}, CALLER)
    assert request_of("search", {}).cookies == {"session": "caller-session", "theme": "dark"}


def test_header_argument_with_a_line_break_or_non_ascii_is_refused() -> None:
    for value in ("a\r\nX-Api-Key: stolen", "h\u00e9llo"):
        with pytest.raises(ToolError, match="printable ASCII"):
            build_request(tool("search"), {"x-trace": value}, CALLER)


def test_callers_headers_and_connection_are_forwarded() -> None:
    scope, _ = build_request(tool("get_item"), {"item_id": "1"}, CALLER)
    request = StarletteRequest(scope)
    assert request.headers["authorization"] == "Bearer caller-token"
    assert request.headers["accept"] == "application/json"
    assert scope["client"] == ("203.0.113.7", 50000)
    assert scope["server"] == ("127.0.0.1", 8000)


def test_callers_root_path_prefixes_the_route_path() -> None:
    caller = Caller((), None, None, "https", "/api", "1.1", {"db": "pool"})
    scope, _ = build_request(tool("get_item"), {"item_id": "a b"}, caller)
    assert (scope["path"], scope["raw_path"], scope["root_path"]) == ("/api/items/a b", b"/api/items/a%20b", "/api")
    assert scope["scheme"] == "https"
    assert scope["state"] == {"db": "pool"}


def test_body_fields_are_sent_as_one_json_object() -> None:
    scope, body = build_request(tool("create_item"), {"name": "lamp", "price": 2.5}, CALLER)
    assert json.loads(body) == {"name": "lamp", "price": 2.5}
    headers = StarletteRequest(scope).headers
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))


def test_whole_body_argument_is_sent_as_the_body() -> None:
    scope, body = build_request(tool("replace_item"), {"name": "lamp", "body": {"name": "lamp", "price": 3}}, CALLER)
    assert scope["path"] == "/items/lamp"
    assert json.loads(body) == {"name": "lamp", "price": 3}


@pytest.mark.anyio
async def test_route_sees_the_decoded_path_value_and_the_callers_credentials() -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        response = await invoke(APP, tool("get_item"), {"item_id": "a b"}, CALLER)
    assert response.status == 200
    assert json.loads(response.body) == {"item_id": "a b", "authorization": "Bearer caller-token"}


# tool_result


def test_json_success_with_an_output_schema_gives_structured_content_and_the_same_text() -> None:
    body = b'{"name":"lamp","price":2.5}'
    result = tool_result(tool("create_item"), CapturedResponse(200, JSON, body))
    assert result == {
        "content": [{"type": "text", "text": body.decode()}],
        "structuredContent": {"name": "lamp", "price": 2.5},
    }


def test_json_success_without_an_output_schema_gives_text_only() -> None:
    result = tool_result(tool("get_photo"), CapturedResponse(200, JSON, b'{"ok":true}'))
    assert result == {"content": [{"type": "text", "text": '{"ok":true}'}]}


def test_wrapped_output_puts_the_value_under_result() -> None:
    result = tool_result(tool("search"), CapturedResponse(200, JSON, b'["red","blue"]'))
    assert result["structuredContent"] == {"result": ["red", "blue"]}
    assert text_of({"content": result["content"]}) == '["red","blue"]'


def test_png_is_image_content_in_base64() -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    response = CapturedResponse(200, ((b"content-type", b"image/png"),), png)
    assert tool_result(tool("get_photo"), response) == {
        "content": [{"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"}]
    }


def test_audio_is_audio_content_in_base64() -> None:
    wav = b"RIFF\x24\x00\x00\x00WAVEfmt \xff\xfe"
    response = CapturedResponse(200, ((b"content-type", b"audio/wav"),), wav)
    assert tool_result(tool("get_photo"), response) == {
        "content": [{"type": "audio", "data": base64.b64encode(wav).decode(), "mimeType": "audio/wav"}]
    }


def test_plain_text_is_text_content() -> None:
    response = CapturedResponse(200, ((b"content-type", b"text/plain; charset=utf-8"),), "héllo".encode())
    assert tool_result(tool("get_photo"), response) == {"content": [{"type": "text", "text": "héllo"}]}


def test_undecodable_binary_is_an_embedded_resource() -> None:
    blob = b"\xff\xfe\x00\x81"
    response = CapturedResponse(200, ((b"content-type", b"application/octet-stream"),), blob)
    (block,) = tool_result(tool("get_photo"), response)["content"]
    assert block == {
        "type": "resource",
        "resource": {"uri": "/photo", "mimeType": "application/octet-stream", "blob": base64.b64encode(blob).decode()},
    }


def test_204_without_a_body_says_which_request_succeeded() -> None:
    done = {"content": [{"type": "text", "text": "POST /login: 204 No Content"}]}
    assert tool_result(tool("log_in"), CapturedResponse(204, (), b"")) == done


@pytest.mark.anyio
async def test_422_names_the_failing_arguments_without_their_location() -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        response = await invoke(APP, tool("create_item"), {"name": "lamp", "price": "cheap"}, CALLER)
    assert response.status == 422
    text = text_of(tool_result(tool("create_item"), response))
    assert text.startswith("HTTP 422: invalid arguments: 'price': Input should be a valid number")
    assert "(got 'cheap')" in text
    assert "body" not in text


def test_422_for_query_and_form_arguments_drops_the_location() -> None:
    detail = [
        {"type": "int_parsing", "loc": ["query", "page"], "msg": "Input should be a valid integer", "input": "x"},
        {"type": "missing", "loc": ["body", "username"], "msg": "Field required", "input": None},
    ]
    response = CapturedResponse(422, JSON, json.dumps({"detail": detail}).encode())
    result = tool_result(tool("log_in"), response)
    assert result["isError"] is True
    assert text_of(result) == (
        "HTTP 422: invalid arguments: 'page': Input should be a valid integer (got 'x'); 'username': Field required"
    )


def test_422_for_a_whole_body_names_the_field_inside_the_body_argument() -> None:
    detail = [{"type": "missing", "loc": ["body", "name"], "msg": "Field required", "input": {}}]
    response = CapturedResponse(422, JSON, json.dumps({"detail": detail}).encode())
    text = text_of(tool_result(tool("replace_item"), response))
    assert text == "HTTP 422: invalid arguments: 'body.name': Field required"


def test_404_is_an_error_with_the_detail_text() -> None:
    response = CapturedResponse(404, JSON, b'{"detail":"Item 7 not found"}')
    result = tool_result(tool("get_item"), response)
    assert result == {"content": [{"type": "text", "text": "HTTP 404: Item 7 not found"}], "isError": True}


def test_500_is_a_generic_error_with_a_reference_and_not_the_body(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="fastapi_mcp_routes")
    response = CapturedResponse(500, JSON, b'{"detail":"password=hunter2 at db.internal:5432"}')
    result = tool_result(tool("get_item"), response)
    assert result["isError"] is True
    text = text_of(result)
    match = re.fullmatch(r"The tool failed with HTTP 500\. Reference: ([0-9a-f]{12})\.", text)
    assert match is not None
    assert "hunter2" not in text
    # The body stays in the server log under the same reference.
    assert match.group(1) in caplog.text
    assert "hunter2" in caplog.text


def test_429_mentions_retry_after() -> None:
    headers = (*JSON, (b"Retry-After", b"30"))
    response = CapturedResponse(429, headers, b'{"detail":"Too many requests"}')
    result = tool_result(tool("get_item"), response)
    assert result["isError"] is True
    assert text_of(result) == "HTTP 429 (retry after 30 seconds): Too many requests"


def test_429_with_a_retry_after_date_does_not_call_it_seconds() -> None:
    date = "Wed, 21 Oct 2026 07:28:00 GMT"
    response = CapturedResponse(429, (*JSON, (b"retry-after", date.encode())), b'{"detail":"Slow down"}')
    text = text_of(tool_result(tool("get_item"), response))
    assert date in text
    assert f"{date} seconds" not in text
