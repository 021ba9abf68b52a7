"""A gated call is validated by its route's own models before anyone is asked to confirm it:
a request the route would refuse with 422 gets that 422 at once, in both eras, whether the user
would have been asked (elicitation, a stateless question) or handed a token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, Form, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from mcp import types
from pydantic import BaseModel, Field, field_validator

from fastapi_mcp_routes import ToolCalls, mcp_routes, mcp_tool
from fastapi_mcp_routes.server.confirmation.validation import invalid
from fastapi_mcp_routes.tools.invoke import Caller
from fastapi_mcp_routes.tools.registry import ToolRegistry
from tests.support.confirmation import is_pending, pending_of
from tests.support.discovery import CREDENTIALS
from tests.support.jsonrpc import call_tool, open_session
from tests.support.sdk import mcp_client
from tests.support.servers import serve
from tests.support.stateless import post_stateless, stateless_meta
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

CAPABLE = {"elicitation": {}}  # a client that can ask its user


class Shelf(BaseModel):
    label: str = Field(min_length=1)
    aisle: int = Field(ge=1)


class Crate(BaseModel):
    label: str

    @field_validator("label")
    @classmethod
    def crash(cls, label: str) -> str:
        raise RuntimeError("a validator that fails otherwise than by refusing")


def page_size(size: int = Query(10, ge=1, le=50)) -> int:
    return size


def shelf_of(shelf: Shelf) -> Shelf:
    return shelf


class Lid(BaseModel):
    size: int = Field(ge=1)


class Stock:
    """What the routes did: a route that ran appends here."""

    def __init__(self) -> None:
        self.runs: list[str] = []


stock = Stock()


def add_routes(app: FastAPI) -> None:
    @mcp_tool()
    @app.post("/stores/{store_id}/shelves", status_code=201)
    def create_shelf(store_id: int, shelf: Shelf, note: str = Query("", max_length=20)) -> dict[str, Any]:
        stock.runs.append("create_shelf")
        return {"store": store_id, **shelf.model_dump()}

    @mcp_tool()
    @app.post("/restock")
    def restock(size: Annotated[int, Depends(page_size)]) -> dict[str, int]:
        stock.runs.append("restock")
        return {"size": size}

    @mcp_tool()
    @app.post("/locked", dependencies=[Depends(HTTPBearer())])
    def locked(shelf: Shelf) -> dict[str, str]:
        stock.runs.append("locked")
        return {"label": shelf.label}

    @mcp_tool()
    @app.post("/signs")
    def paint_sign(text: Annotated[str, Form(min_length=2)]) -> dict[str, str]:
        stock.runs.append("paint_sign")
        return {"text": text}

    @mcp_tool()
    @app.post("/crates")
    def pack_crate(crate: Crate) -> dict[str, str]:
        stock.runs.append("pack_crate")
        return {"label": crate.label}

    @mcp_tool()
    @app.post("/moves")
    def move_crate(shelf: Annotated[Shelf, Depends(shelf_of)], lid: Lid) -> dict[str, str]:
        stock.runs.append("move_crate")
        return {"label": shelf.label}

    @mcp_tool()
    @app.post("/lights")
    def dim_lights(x_aisle: Annotated[int, Header(ge=1)]) -> dict[str, int]:
        stock.runs.append("dim_lights")
        return {"aisle": x_aisle}

    @mcp_tool(confirm=False)
    @app.post("/open")
    def open_shelf(shelf: Shelf) -> dict[str, str]:
        stock.runs.append("open_shelf")
        return {"label": shelf.label}


def make_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))
    add_routes(app)
    return app


@pytest.fixture(autouse=True)
def no_runs() -> None:
    stock.runs.clear()


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


def stateless(
    http: httpx.Client, name: str, arguments: dict[str, Any], capabilities: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments, **extra}
    response = post_stateless(http, "tools/call", params, meta=stateless_meta(capabilities))
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()["result"]
    return result


VALID = {"store_id": 7, "label": "tea", "aisle": 3}
# Each refused by the route's own models: the body, the path, the query.
REFUSED = {
    "body": {**VALID, "aisle": 0},
    "path": {**VALID, "store_id": "seven"},
    "query": {**VALID, "note": "n" * 21},
}


def rest_text(arguments: dict[str, Any]) -> str:
    """What the same call answers once it runs: the route's 422, as the tool's error text."""
    ungated = make_app(tool_calls=ToolCalls(require_confirmation_for_mutations=False))
    with serve(ungated) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        result = stateless(http, "create_shelf", arguments)
    assert result["isError"] is True
    text: str = result["content"][0]["text"]
    return text


# -- the token flow and the stateless question ---------------------------------------------------


@pytest.mark.parametrize("where", sorted(REFUSED))
def test_a_refused_request_gets_the_routes_422_at_once_not_a_token(base_url: str, where: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "create_shelf", REFUSED[where])
    assert result["isError"] is True
    assert not is_pending(result)  # no plan, no token
    assert result["content"][0]["text"].startswith("HTTP 422: invalid arguments:")
    assert result["content"][0]["text"] == rest_text(REFUSED[where])
    assert stock.runs == []


@pytest.mark.parametrize("where", sorted(REFUSED))
def test_a_refused_request_is_not_put_to_the_user_as_a_stateless_question(base_url: str, where: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "create_shelf", REFUSED[where], CAPABLE)
    assert result["resultType"] == "complete"  # not input_required
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("HTTP 422: invalid arguments:")


def test_a_valid_request_is_still_confirmed_first(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        pending = pending_of(stateless(http, "create_shelf", VALID))
        asked = stateless(http, "create_shelf", VALID, CAPABLE)
        done = stateless(http, "create_shelf", {**VALID, "confirmationToken": pending["token"]})
    assert asked["resultType"] == "input_required"
    assert done["structuredContent"] == {"store": 7, "label": "tea", "aisle": 3}
    assert stock.runs == ["create_shelf"]


def test_a_dependencys_constrained_query_parameter_is_validated_too(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        refused = stateless(http, "restock", {"size": 51}, CAPABLE)
        asked = stateless(http, "restock", {"size": 50}, CAPABLE)
    assert refused["isError"] is True
    # As the route reports it: a query parameter arrives as text.
    assert (
        refused["content"][0]["text"]
        == "HTTP 422: invalid arguments: 'size': Input should be less than or equal to 50 (got '51')"
    )

    assert asked["resultType"] == "input_required"


def test_a_form_body_is_read_as_the_route_reads_it(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        refused = stateless(http, "paint_sign", {"text": "x"})
        pending = stateless(http, "paint_sign", {"text": "open"})
    assert refused["content"][0]["text"].startswith(
        "HTTP 422: invalid arguments: 'text': String should have at least 2"
    )
    assert pending_of(pending)["plan"]["arguments"] == {"text": "open"}


def test_body_parameters_of_a_dependency_and_the_route_are_read_from_one_body(base_url: str) -> None:
    body = {"shelf": {"label": "", "aisle": 2}, "lid": {"size": 0}}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        refused = stateless(http, "move_crate", body)
        pending = stateless(http, "move_crate", {"shelf": {"label": "top", "aisle": 2}, "lid": {"size": 1}})
        rest = http.post("/moves", json=body)
    assert rest.status_code == 422
    # The dependency's parameter first, then the route's, each a key of the one body.
    assert [error["loc"] for error in rest.json()["detail"]] == [["body", "shelf", "label"], ["body", "lid", "size"]]
    assert refused["content"][0]["text"].startswith("HTTP 422: invalid arguments: 'shelf.label': ")
    assert "; 'lid.size': " in refused["content"][0]["text"]
    assert pending_of(pending)["pending"] is True


def test_a_validator_that_crashes_leaves_the_call_to_the_route(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        result = stateless(http, "pack_crate", {"label": "fragile"})
    assert pending_of(result)["pending"] is True  # confirmed as before; the route answers after
    assert stock.runs == []


def test_a_header_parameter_is_validated_too(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        refused = stateless(http, "dim_lights", {"x-aisle": 0})
        pending = stateless(http, "dim_lights", {"x-aisle": 4})
    assert refused["content"][0]["text"].startswith("HTTP 422: invalid arguments: 'x-aisle': Input should be greater")
    assert pending_of(pending)["pending"] is True


def test_a_guards_refusal_comes_before_validation_as_in_fastapi(base_url: str) -> None:
    invalid_shelf = {"label": "", "aisle": 0}
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        anonymous = stateless(http, "locked", invalid_shelf)
        known = post_stateless(
            http,
            "tools/call",
            {"name": "locked", "arguments": invalid_shelf},
            headers={"authorization": "Bearer someone"},
        ).json()["result"]
    assert anonymous["content"][0]["text"] == "HTTP 401: Not authenticated"
    assert known["content"][0]["text"].startswith("HTTP 422: invalid arguments: 'label'")


def test_the_apps_own_validation_handler_answers() -> None:
    app = make_app()

    @app.exception_handler(RequestValidationError)
    async def problems(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": f"{len(exc.errors())} problem(s)", "body": exc.body}, status_code=400)

    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        result = stateless(http, "create_shelf", REFUSED["body"], CAPABLE)
        rest = http.post("/stores/7/shelves", json={"label": "tea", "aisle": 0})
    assert rest.status_code == 400
    assert result["content"][0]["text"] == "HTTP 400: 1 problem(s)"


def test_the_audit_sees_a_refusal_not_a_confirmation() -> None:
    events: list[str] = []
    app = make_app(tool_calls=ToolCalls(on_tool_call=lambda event: events.append(event.outcome)))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        stateless(http, "create_shelf", REFUSED["body"])
        stateless(http, "create_shelf", VALID)
    assert events == ["error", "confirmation_required"]


# -- the session era, through the official client --------------------------------------------------


async def test_the_sdk_clients_user_is_not_asked_about_a_refused_request(base_url: str) -> None:
    asked: list[str] = []

    async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={})

    with anyio.fail_after(WAIT_S):
        async with mcp_client(base_url, elicitation_callback=on_elicit) as client:
            refused = await client.call_tool("create_shelf", REFUSED["body"])
            done = await client.call_tool("create_shelf", VALID)
    assert refused.is_error
    assert isinstance(refused.content[0], types.TextContent)
    assert refused.content[0].text.startswith("HTTP 422: invalid arguments: 'aisle'")
    assert asked == ['Allow create_shelf to run POST /stores/7/shelves with aisle=3, label="tea", store_id=7?']
    assert not done.is_error
    assert stock.runs == ["create_shelf"]


def test_a_session_without_elicitation_gets_the_422_and_no_token(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        session = open_session(http)
        refused = call_tool(http, "create_shelf", REFUSED["query"], headers=session)
        pending = call_tool(http, "create_shelf", VALID, headers=session)
    assert refused["isError"] is True
    assert not is_pending(refused)
    assert refused["content"][0]["text"].startswith("HTTP 422: invalid arguments: 'note'")
    assert pending_of(pending)["pending"] is True


# -- what is validated, and what is left to the route ---------------------------------------------


def gated_tools(app: FastAPI) -> dict[str, Any]:
    return dict(ToolRegistry(app, CREDENTIALS, confirm_mutations=True).table().by_name)


def caller() -> Caller:
    return Caller((), ("127.0.0.1", 5000), ("127.0.0.1", 8000), "http", "", "1.1", None)


async def test_an_overridden_dependencys_parameters_are_left_to_the_override() -> None:
    app = make_app()
    tool = gated_tools(app)["restock"]
    assert await invalid(app, tool, {"size": 51}, caller()) is not None
    app.dependency_overrides[page_size] = lambda: 10
    assert await invalid(app, tool, {"size": 51}, caller()) is None


def test_only_gated_tools_carry_their_request_models() -> None:
    tools = gated_tools(make_app())
    assert tools["create_shelf"].models is not None
    assert tools["open_shelf"].models is None  # the route validates its own calls
