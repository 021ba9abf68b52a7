"""Resources, prompts and completion over the endpoint, served in process: reads and their
errors in both eras, path variables that could reach another path, prompts and what their
routes return, completion, capabilities, paging, cache hints, visibility and subscriptions."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI, HTTPException, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from fastapi_mcp_routes import (
    ContentResponse,
    Limits,
    PromptMessage,
    PromptResponse,
    mcp_completion,
    mcp_prompt,
    mcp_resource,
    mcp_routes,
    mcp_tool,
    text_content,
)
from tests.support.deployments import SECRET
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, final_message, initialize, rpc
from tests.support.servers import connected
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S

pytestmark = pytest.mark.anyio

SESSION = "session"  # 2025-11-25, in a session
STATELESS = "stateless"  # 2026-07-28
PIXEL = b"\x89PNG\r\n\x1a\n\x00\x01"
# The parameter each named method repeats in Mcp-Name (2026-07-28).
NAMED_BY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


@pytest.fixture(params=[SESSION, STATELESS])
def era(request: pytest.FixtureRequest) -> str:
    era_name: str = request.param
    return era_name


# -- a client of the endpoint, in either era ---------------------------------------------------


@dataclass
class Peer:
    """One client of the app's endpoint: `headers` go with every request (a session's id, a
    credential); without a session it speaks 2026-07-28."""

    http: httpx.AsyncClient
    era: str
    headers: dict[str, str] = field(default_factory=dict)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> httpx.Response:
        params = params or {}
        if self.era == SESSION:
            message, headers = rpc(method, params), self.headers
        else:
            named = params.get(NAMED_BY.get(method, ""))
            routing = stateless_headers(method, mcp_name(named) if isinstance(named, str) else None)
            message, headers = stateless_request(method, params), {**routing, **self.headers}
        with anyio.fail_after(WAIT_S):
            return await self.http.post("/mcp", json=message, headers=headers)

    async def result(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.send(method, params)
        message = final_message(response)
        assert response.status_code == 200, response.text
        assert message is not None, response.text
        assert "result" in message, response.text
        result: dict[str, Any] = message["result"]
        return result

    async def error(self, method: str, params: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """The HTTP status and the JSON-RPC error of a request that fails."""
        response = await self.send(method, params)
        message = final_message(response)
        assert message is not None, response.text
        assert "error" in message, response.text
        error: dict[str, Any] = message["error"]
        return response.status_code, error


def mcp_name(value: str) -> str:
    """A value as Mcp-Name carries it: base64 unless it is printable ASCII."""
    if value.isascii() and value.isprintable():
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


async def join(http: httpx.AsyncClient, era: str, headers: dict[str, str] | None = None) -> Peer:
    """A new client in `era`: a session opened with `initialize`, or the stateless revision."""
    extra = headers or {}
    if era == STATELESS:
        return Peer(http, era, extra)
    sent = {**HEADERS, "mcp-protocol-version": SESSION_VERSION, **extra}
    with anyio.fail_after(WAIT_S):
        opened = await http.post("/mcp", json=initialize(), headers=sent)
    assert opened.status_code == 200, opened.text
    session_id = opened.headers.get("mcp-session-id")
    return Peer(http, era, {**sent, "mcp-session-id": session_id} if session_id else sent)


def not_found_code(era: str) -> tuple[int, int]:
    """The HTTP status and the JSON-RPC code of an unknown resource, by era (SEP-2164)."""
    return (200, -32002) if era == SESSION else (400, -32602)


def invalid_params_status(era: str) -> int:
    return 200 if era == SESSION else 400


# -- the app -------------------------------------------------------------------------------------


@dataclass
class Features:
    app: FastAPI
    ran: list[str] = field(default_factory=list)  # the paths the resource routes ran for


def only_the_owner() -> None:
    raise HTTPException(403, "Only the owner may read it.")


def features_app(**options: Any) -> Features:
    """An app with resources of every kind, prompts, and completions; `options` go to
    `mcp_routes`."""
    app = FastAPI(title="Features")
    app.include_router(mcp_routes(app, **options))
    served = Features(app)

    @mcp_resource("config://app", title="App configuration")
    @app.get("/config", response_class=PlainTextResponse)
    def config() -> str:
        return "debug = false"

    @mcp_resource("images://pixel")
    @app.get("/pixel", response_class=Response)
    def pixel() -> Response:
        return Response(PIXEL, media_type="image/png")

    @mcp_resource("notes://{note_id}", description="One note.")
    @app.get("/notes/{note_id}")
    def read_note(note_id: str) -> dict[str, str]:
        served.ran.append(f"/notes/{note_id}")
        if note_id == "missing":
            raise HTTPException(404, "No such note.")
        return {"id": note_id, "text": f"Note {note_id}"}

    @mcp_resource("files:///{+path}", mime_type="text/plain")
    @app.get("/files/{path:path}", response_class=PlainTextResponse)
    def read_file(path: str) -> str:
        served.ran.append(f"/files/{path}")
        return f"contents of {path}"

    @mcp_resource("docs://{name}")
    @app.get("/docs/{name:path}", response_class=PlainTextResponse)
    def read_doc(name: str) -> str:
        served.ran.append(f"/docs/{name}")
        return f"doc {name}"

    @mcp_resource("items://{item_id}")
    @app.get("/items/{item_id}", response_class=PlainTextResponse)
    def read_item(item_id: str) -> str:
        served.ran.append(f"/items/{item_id}")
        return f"item {item_id}"

    @mcp_resource("search://notes{?q,limit}")
    @app.get("/search", response_class=PlainTextResponse)
    def search(q: str = "", limit: int = 10) -> str:
        return f"{limit} notes matching {q!r}"

    @mcp_resource("owned://{note_id}")
    @app.get("/owned/{note_id}", dependencies=[Depends(only_the_owner)])
    def owned(note_id: str) -> dict[str, str]:
        served.ran.append(f"/owned/{note_id}")
        return {}

    @mcp_resource("failing://status")
    @app.get("/failing/status")
    def failing_status() -> JSONResponse:
        return JSONResponse({"detail": "database password is hunter2"}, status_code=500)

    @mcp_resource("failing://crash")
    @app.get("/failing/crash")
    def failing_crash() -> str:
        raise RuntimeError("database password is hunter2")

    @mcp_resource("reports://{period}")
    @app.get("/reports/{period}")
    def report(period: Literal["daily", "weekly", "monthly"]) -> dict[str, str]:
        return {"period": period}

    @mcp_prompt(description="Greets someone.")
    @app.get("/prompts/greet")
    def greet(name: Annotated[str, Query(description="Whom to greet.")], excited: bool = False) -> str:
        return f"Hello, {name}{'!' if excited else '.'}"

    @mcp_prompt()
    @app.get("/prompts/plain", response_class=PlainTextResponse)
    def plain() -> str:
        return "Say something plain."

    @mcp_prompt()
    @app.get("/prompts/dialogue")
    def dialogue() -> list[PromptMessage]:
        return [
            PromptMessage(role="user", content=text_content("What is MCP?")),
            PromptMessage(role="assistant", content=text_content("A protocol.")),
        ]

    @mcp_prompt()
    @app.get("/prompts/described")
    def described() -> PromptResponse:
        return PromptResponse(
            description="A described prompt.", messages=[PromptMessage(role="user", content=text_content("Hi."))]
        )

    @mcp_prompt()
    @app.get("/prompts/blocks", response_class=ContentResponse)
    def blocks() -> ContentResponse:
        return ContentResponse([text_content("First."), text_content("Second.")])

    @mcp_prompt()
    @app.get("/prompts/garbage")
    def garbage() -> int:
        return 42

    @mcp_prompt()
    @app.get("/prompts/write")
    def write(tone: Literal["Formal", "friendly", "fun", "plain"], topic: str = "") -> str:
        return f"Write about {topic} in a {tone} tone."

    @mcp_completion(prompt="write", argument="topic")
    @app.get("/complete/topic")
    def complete_topic(value: str, tone: str = "none") -> list[str]:
        return [f"{tone}:{value}{number}" for number in range(150)]

    return served


# -- resources/read ------------------------------------------------------------------------------


async def test_resources_and_templates_are_listed(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        resources = (await peer.result("resources/list"))["resources"]
        templates = (await peer.result("resources/templates/list"))["resourceTemplates"]
    assert [resource["uri"] for resource in resources] == sorted(
        ["config://app", "images://pixel", "failing://status", "failing://crash"]
    )
    assert resources[0] == {
        "uri": "config://app",
        "name": "config",
        "title": "App configuration",
        "mimeType": "text/plain",
    }
    assert [template["uriTemplate"] for template in templates] == [
        "notes://{note_id}",
        "files:///{+path}",
        "docs://{name}",
        "items://{item_id}",
        "search://notes{?q,limit}",
        "owned://{note_id}",
        "reports://{period}",
    ]
    assert templates[0] == {
        "uriTemplate": "notes://{note_id}",
        "name": "read_note",
        "description": "One note.",
        "mimeType": "application/json",
    }


async def test_a_read_answers_text_blobs_and_json_as_the_route_does(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        text = await peer.result("resources/read", {"uri": "config://app"})
        blob = await peer.result("resources/read", {"uri": "images://pixel"})
        note = await peer.result("resources/read", {"uri": "notes://7"})
        search = await peer.result("resources/read", {"uri": "search://notes?limit=3&q=tea%20time"})
    assert text["contents"] == [{"uri": "config://app", "mimeType": "text/plain", "text": "debug = false"}]
    assert blob["contents"] == [
        {"uri": "images://pixel", "mimeType": "image/png", "blob": base64.b64encode(PIXEL).decode()}
    ]
    assert note["contents"] == [
        {"uri": "notes://7", "mimeType": "application/json", "text": '{"id":"7","text":"Note 7"}'}
    ]
    assert search["contents"][0]["text"] == "3 notes matching 'tea time'"


async def test_a_reserved_variable_reads_a_nested_path() -> None:
    served = features_app()
    async with connected(served.app) as http:
        peer = await join(http, SESSION)
        read = await peer.result("resources/read", {"uri": "files:///docs/a%20b,c.txt"})
    assert read["contents"][0]["text"] == "contents of docs/a b,c.txt"
    assert served.ran == ["/files/docs/a b,c.txt"]


async def test_a_simple_variable_reads_one_decoded_segment(era: str) -> None:
    served = features_app()
    async with connected(served.app) as http:
        peer = await join(http, era)
        item = await peer.result("resources/read", {"uri": "items://a%20b"})
        doc = await peer.result("resources/read", {"uri": "docs://read%20me"})
    assert item["contents"][0]["text"] == "item a b"
    assert doc["contents"][0]["text"] == "doc read me"
    assert served.ran == ["/items/a b", "/docs/read me"]


async def test_an_unknown_uri_is_the_eras_not_found_error_naming_it(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        status, error = await peer.error("resources/read", {"uri": "nothing://here"})
    assert (status, error["code"]) == not_found_code(era)
    assert error["data"] == {"uri": "nothing://here"}


async def test_a_route_answering_404_is_the_same_not_found_error(era: str) -> None:
    served = features_app()
    async with connected(served.app) as http:
        peer = await join(http, era)
        status, error = await peer.error("resources/read", {"uri": "notes://missing"})
    assert (status, error["code"]) == not_found_code(era)
    assert error == {"code": error["code"], "message": "Resource not found", "data": {"uri": "notes://missing"}}
    assert served.ran == ["/notes/missing"]


async def test_a_route_guard_refusing_is_invalid_params_with_its_status_and_detail(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        status, error = await peer.error("resources/read", {"uri": "owned://1"})
    assert status == invalid_params_status(era)
    assert error == {"code": -32602, "message": "HTTP 403: Only the owner may read it.", "data": {"status": 403}}


@pytest.mark.parametrize("uri", ["failing://status", "failing://crash"])
async def test_a_failing_route_is_an_internal_error_with_a_reference_and_nothing_of_its_own(
    era: str, uri: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="fastapi_mcp_routes")  # the failure is logged, on purpose
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        response = await peer.send("resources/read", {"uri": uri})
    message = final_message(response)
    assert message is not None, response.text
    error = message["error"]
    assert error["code"] == -32603
    assert "Reference: " in error["message"]
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text
    assert "RuntimeError" not in response.text


# -- variables that could reach another path -----------------------------------------------------


@pytest.mark.parametrize(
    "uri",
    [
        "files:///../etc/passwd",
        "files:///docs/../../etc/passwd",
        "files:///docs/..",
        "files:///docs/./a",
        "files:///docs//a",
        "files:////etc/passwd",
        "files:///%2e%2e/etc/passwd",
        "files:///docs/%2E%2E/%2e%2E/etc",
        "files:///docs/a%2F..%2F..%2Fb",
        "files:///%2Fetc/passwd",
        "files:///docs/a%00.txt",
        "files:///docs/a\x00.txt",
        "files:///docs/a%0A.txt",
        "files:///docs/a%7F.txt",
        "items://..",
        "items://%2e%2e",
        "items://.",
        "items://a%2Fb",
        "items://%2F",
        "items://a%00",
        "docs://a%2F..%2F..%2Fsecret",
        "docs://a%2Fb",
        "docs://%2e%2e",
    ],
)
async def test_a_value_that_could_reach_another_path_is_refused_before_the_route_runs(era: str, uri: str) -> None:
    served = features_app()
    async with connected(served.app) as http:
        peer = await join(http, era)
        status, error = await peer.error("resources/read", {"uri": uri})
    assert status == invalid_params_status(era)
    assert error["code"] == -32602, error
    assert served.ran == []


# -- prompts/get ---------------------------------------------------------------------------------


async def test_prompts_are_listed_with_their_arguments(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        prompts = (await peer.result("prompts/list"))["prompts"]
    assert [prompt["name"] for prompt in prompts] == [
        "blocks",
        "described",
        "dialogue",
        "garbage",
        "greet",
        "plain",
        "write",
    ]
    assert prompts[4] == {
        "name": "greet",
        "description": "Greets someone.",
        "arguments": [
            {"name": "name", "title": "Name", "description": "Whom to greet.", "required": True},
            {"name": "excited", "title": "Excited", "required": False},
        ],
    }


async def test_a_prompt_route_returning_a_string_is_one_user_message(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        greeted = await peer.result("prompts/get", {"name": "greet", "arguments": {"name": "Ada", "excited": "true"}})
        plain = await peer.result("prompts/get", {"name": "plain"})
    assert greeted["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}]
    assert plain["messages"] == [{"role": "user", "content": {"type": "text", "text": "Say something plain."}}]


async def test_a_prompt_route_returns_messages_a_prompt_response_or_content_blocks(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        dialogue = await peer.result("prompts/get", {"name": "dialogue"})
        described = await peer.result("prompts/get", {"name": "described"})
        blocks = await peer.result("prompts/get", {"name": "blocks"})
    assert dialogue["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "What is MCP?"}},
        {"role": "assistant", "content": {"type": "text", "text": "A protocol."}},
    ]
    assert described["description"] == "A described prompt."
    assert described["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hi."}}]
    assert "description" not in dialogue
    assert blocks["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "First."}},
        {"role": "user", "content": {"type": "text", "text": "Second."}},
    ]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"name": "greet"}, "Invalid params: the prompt 'greet' needs the argument(s) name."),
        ({"name": "greet", "arguments": {"name": "Ada", "mood": "x"}}, "Invalid params: the prompt 'greet' takes no"),
        ({"name": "greet", "arguments": {"name": 7}}, "Invalid params: 'arguments' must be an object of strings."),
        ({"name": "greet", "arguments": ["Ada"]}, "Invalid params: 'arguments' must be an object of strings."),
        ({"name": "nobody"}, "Invalid params: unknown prompt 'nobody'."),
        ({"name": "greet", "arguments": {"name": "Ada", "excited": "very"}}, "HTTP 422: invalid arguments: "),
    ],
    ids=["missing", "unknown", "not-a-string", "not-an-object", "unknown-prompt", "invalid"],
)
async def test_a_prompt_request_with_bad_arguments_is_invalid_params(
    era: str, params: dict[str, Any], message: str
) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        status, error = await peer.error("prompts/get", params)
    assert status == invalid_params_status(era)
    assert error["code"] == -32602
    assert error["message"].startswith(message)


async def test_a_prompt_route_returning_something_else_is_an_internal_error_with_a_reference(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.CRITICAL, logger="fastapi_mcp_routes")
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        status, error = await peer.error("prompts/get", {"name": "garbage"})
    assert status == 200
    assert error["code"] == -32603
    assert error["message"].startswith("Internal error: the prompt route must return a string, a list of messages")
    assert "Reference: " in error["message"]


# -- completion/complete ---------------------------------------------------------------------------


def prompt_ref(name: str) -> dict[str, str]:
    return {"type": "ref/prompt", "name": name}


async def test_a_literal_argument_is_completed_by_prefix_ignoring_case(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        f = await peer.result(
            "completion/complete", {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": "f"}}
        )
        fr = await peer.result(
            "completion/complete", {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": "FR"}}
        )
        none = await peer.result(
            "completion/complete", {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": "x"}}
        )
        period = await peer.result(
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": "reports://{period}"},
                "argument": {"name": "period", "value": "w"},
            },
        )
    assert f["completion"] == {"values": ["Formal", "friendly", "fun"], "total": 3, "hasMore": False}
    assert fr["completion"]["values"] == ["friendly"]
    assert none["completion"] == {"values": [], "total": 0, "hasMore": False}
    assert period["completion"]["values"] == ["weekly"]


async def test_a_completion_route_gets_the_value_and_the_arguments_given_and_is_cut_to_100(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        completed = await peer.result(
            "completion/complete",
            {
                "ref": prompt_ref("write"),
                "argument": {"name": "topic", "value": "te"},
                "context": {"arguments": {"tone": "fun", "unrelated": "dropped"}},
            },
        )
    values = completed["completion"]["values"]
    assert len(values) == 100
    assert values[:2] == ["fun:te0", "fun:te1"]
    assert (completed["completion"]["total"], completed["completion"]["hasMore"]) == (150, True)


async def test_an_argument_without_choices_or_route_completes_to_nothing(era: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        completed = await peer.result(
            "completion/complete", {"ref": prompt_ref("greet"), "argument": {"name": "name", "value": "A"}}
        )
    assert completed["completion"] == {"values": [], "total": 0, "hasMore": False}


@pytest.mark.parametrize(
    "params",
    [
        {"ref": prompt_ref("nobody"), "argument": {"name": "tone", "value": ""}},
        {"ref": prompt_ref("write"), "argument": {"name": "mood", "value": ""}},
        {"ref": {"type": "ref/resource", "uri": "nothing://{x}"}, "argument": {"name": "x", "value": ""}},
        {"ref": {"type": "ref/resource", "uri": "reports://{period}"}, "argument": {"name": "x", "value": ""}},
        {"ref": {"type": "ref/tool", "name": "x"}, "argument": {"name": "x", "value": ""}},
        {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": 3}},
        {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": ""}, "context": {"arguments": {"a": 1}}},
    ],
    ids=["unknown-prompt", "unknown-argument", "unknown-template", "unknown-variable", "bad-ref", "bad-value", "ctx"],
)
async def test_a_completion_of_something_unknown_is_invalid_params(era: str, params: dict[str, Any]) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, era)
        status, error = await peer.error("completion/complete", params)
    assert status == invalid_params_status(era)
    assert error["code"] == -32602


# -- capabilities, paging, cache hints ---------------------------------------------------------------


def tools_only_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app))

    @mcp_tool()
    @app.get("/ping")
    def ping() -> str:
        return "pong"

    return app


async def offered(app: FastAPI) -> list[dict[str, Any]]:
    """The capabilities `initialize` (2025-11-25) and `server/discover` (2026-07-28) offer."""
    async with connected(app) as http:
        session_era = Peer(http, SESSION, {**HEADERS, "mcp-protocol-version": SESSION_VERSION})
        initialized = await session_era.result("initialize", initialize()["params"])
        discovered = await Peer(http, STATELESS).result("server/discover")
    return [initialized["capabilities"], discovered["capabilities"]]


async def test_capabilities_name_resources_prompts_and_completions_only_when_the_app_has_them() -> None:
    for capabilities in await offered(features_app().app):
        assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
        assert capabilities["prompts"] == {"listChanged": True}
        assert capabilities["completions"] == {}
    for capabilities in await offered(tools_only_app()):
        assert set(capabilities) == {"logging", "tools"}


async def test_an_app_with_only_tools_lists_no_resources_or_prompts(era: str) -> None:
    async with connected(tools_only_app()) as http:
        peer = await join(http, era)
        resources = await peer.result("resources/list")
        templates = await peer.result("resources/templates/list")
        prompts = await peer.result("prompts/list")
        status, error = await peer.error("resources/read", {"uri": "notes://1"})
    assert resources["resources"] == []
    assert templates["resourceTemplates"] == []
    assert prompts["prompts"] == []
    assert (status, error["code"]) == not_found_code(era)


def paged_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, limits=Limits(page_size=2)))
    for number in range(3):

        def resource() -> str:
            return ""

        def prompt() -> str:
            return ""

        app.add_api_route(f"/r{number}", mcp_resource(f"r://{number}")(resource), methods=["GET"], name=f"r{number}")
        app.add_api_route(f"/p{number}", mcp_prompt()(prompt), methods=["GET"], name=f"p{number}")
    return app


@pytest.mark.parametrize(("method", "key"), [("resources/list", "resources"), ("prompts/list", "prompts")])
async def test_lists_come_in_pages_linked_by_cursors(era: str, method: str, key: str) -> None:
    async with connected(paged_app()) as http:
        peer = await join(http, era)
        first = await peer.result(method)
        second = await peer.result(method, {"cursor": first["nextCursor"]})
        status, error = await peer.error(method, {"cursor": "not-a-cursor"})
        _, beyond = await peer.error(method, {"cursor": "p9"})
    names = [entry.get("uri", entry["name"]) for entry in first[key] + second[key]]
    assert len(first[key]) == 2
    assert "nextCursor" not in second
    assert names == (["r://0", "r://1", "r://2"] if key == "resources" else ["p0", "p1", "p2"])
    assert status == invalid_params_status(era)
    assert (error["code"], beyond["code"]) == (-32602, -32602)


async def test_stateless_results_carry_cache_hints_where_the_spec_caches() -> None:
    async with connected(features_app().app) as http:
        peer = Peer(http, STATELESS)
        listed = await peer.result("resources/list")
        templates = await peer.result("resources/templates/list")
        prompts = await peer.result("prompts/list")
        read = await peer.result("resources/read", {"uri": "config://app"})
        prompt = await peer.result("prompts/get", {"name": "plain"})
        completed = await peer.result(
            "completion/complete", {"ref": prompt_ref("write"), "argument": {"name": "tone", "value": ""}}
        )
    for result in (listed, templates, prompts):
        assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 0, "public")
    assert (read["resultType"], read["ttlMs"], read["cacheScope"]) == ("complete", 0, "private")
    for result in (prompt, completed):
        assert result["resultType"] == "complete"
        assert "ttlMs" not in result
        assert "cacheScope" not in result


# -- visibility ----------------------------------------------------------------------------------


ApiKey = Annotated[str, Depends(APIKeyHeader(name="x-api-key"))]
Bearer = Annotated[HTTPAuthorizationCredentials, Depends(HTTPBearer())]


def guarded_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, **options))

    @mcp_resource("vault://{item}")
    @app.get("/vault/{item}", response_class=PlainTextResponse)
    def vault(item: str, key: ApiKey) -> str:
        return f"{item} for {key}"

    @mcp_resource("public://{item}")
    @app.get("/public/{item}", response_class=PlainTextResponse)
    def public(item: str) -> str:
        return item

    @mcp_prompt()
    @app.get("/prompts/secret")
    def secret_prompt(credentials: Bearer) -> str:
        return "secret"

    @mcp_prompt()
    @app.get("/prompts/open")
    def open_prompt() -> str:
        return "open"

    return app


async def test_lists_hide_what_needs_a_credential_from_a_caller_without_one(era: str) -> None:
    async with connected(guarded_app()) as http:
        anonymous = await join(http, era)
        keyed = await join(http, era, {"x-api-key": "k", "authorization": "Bearer t"})
        hidden = await anonymous.result("resources/templates/list")
        hidden_prompts = await anonymous.result("prompts/list")
        shown = await keyed.result("resources/templates/list")
        shown_prompts = await keyed.result("prompts/list")
    assert [entry["uriTemplate"] for entry in hidden["resourceTemplates"]] == ["public://{item}"]
    assert [entry["name"] for entry in hidden_prompts["prompts"]] == ["open_prompt"]
    assert [entry["uriTemplate"] for entry in shown["resourceTemplates"]] == ["vault://{item}", "public://{item}"]
    assert [entry["name"] for entry in shown_prompts["prompts"]] == ["open_prompt", "secret_prompt"]
    if era == STATELESS:
        assert (hidden["cacheScope"], shown_prompts["cacheScope"]) == ("private", "private")


async def test_a_hidden_resource_or_prompt_is_still_refused_by_its_own_guard(era: str) -> None:
    async with connected(guarded_app()) as http:
        anonymous = await join(http, era)
        keyed = await join(http, era, {"x-api-key": "k"})
        _, refused_read = await anonymous.error("resources/read", {"uri": "vault://gold"})
        _, refused_prompt = await anonymous.error("prompts/get", {"name": "secret_prompt"})
        read = await keyed.result("resources/read", {"uri": "vault://gold"})
    assert refused_read["code"] == -32602
    assert refused_read["data"] == {"status": 401}
    assert refused_prompt["code"] == -32602
    assert refused_prompt["data"] == {"status": 401}
    assert read["contents"][0]["text"] == "gold for k"


async def test_with_list_visible_only_off_everything_is_listed() -> None:
    async with connected(guarded_app(list_visible_only=False)) as http:
        peer = await join(http, SESSION)
        templates = await peer.result("resources/templates/list")
    assert [entry["uriTemplate"] for entry in templates["resourceTemplates"]] == ["vault://{item}", "public://{item}"]


# -- subscriptions -------------------------------------------------------------------------------


def subscribe(uri: str) -> dict[str, str]:
    return {"uri": uri}


async def test_a_session_subscribes_up_to_max_subscriptions_and_another_session_is_not_counted() -> None:
    async with connected(features_app(limits=Limits(max_subscriptions=2)).app) as http:
        first = await join(http, SESSION)
        second = await join(http, SESSION)
        assert await first.result("resources/subscribe", subscribe("notes://1")) == {}
        assert await first.result("resources/subscribe", subscribe("notes://2")) == {}
        again = await first.result("resources/subscribe", subscribe("notes://1"))  # already counted
        _, refused = await first.error("resources/subscribe", subscribe("config://app"))
        others = await second.result("resources/subscribe", subscribe("config://app"))
        await first.result("resources/unsubscribe", subscribe("notes://2"))
        after_one_left = await first.result("resources/subscribe", subscribe("config://app"))
    assert again == {}
    assert refused["code"] == -32602
    assert "Limits.max_subscriptions" in refused["message"]
    assert others == {}
    assert after_one_left == {}


async def test_a_subscription_to_a_uri_longer_than_max_uri_chars_is_refused() -> None:
    async with connected(features_app(limits=Limits(max_uri_chars=24)).app) as http:
        peer = await join(http, SESSION)
        fits = await peer.result("resources/subscribe", subscribe("notes://" + "x" * 16))
        _, refused = await peer.error("resources/subscribe", subscribe("notes://" + "x" * 17))
    assert fits == {}
    assert refused["code"] == -32602
    assert "24 characters" in refused["message"]


async def test_a_subscription_to_an_unknown_uri_is_not_found() -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, SESSION)
        _, error = await peer.error("resources/subscribe", subscribe("nothing://here"))
    assert error == {"code": -32002, "message": "Resource not found", "data": {"uri": "nothing://here"}}


async def test_a_subscription_asks_the_routes_guards_first() -> None:
    async with connected(guarded_app()) as http:
        anonymous = await join(http, SESSION)
        keyed = await join(http, SESSION, {"x-api-key": "k"})
        _, refused = await anonymous.error("resources/subscribe", subscribe("vault://gold"))
        _, unusable = await keyed.error("resources/subscribe", subscribe("vault://a%2Fb"))
        subscribed = await keyed.result("resources/subscribe", subscribe("vault://gold"))
    assert (refused["code"], refused["data"]) == (-32602, {"status": 401})
    assert unusable["code"] == -32602
    assert subscribed == {}


async def test_a_subscription_where_processes_share_a_secret_but_no_store_is_refused_naming_store() -> None:
    # Another process may hold the session's GET stream: it would never hear of the subscription.
    async with connected(features_app(secret=SECRET).app) as http:
        peer = await join(http, SESSION)
        _, refused = await peer.error("resources/subscribe", subscribe("notes://1"))
        read = await peer.result("resources/read", {"uri": "notes://1"})
    assert refused["code"] == -32600
    assert "store=RedisStore.from_url" in refused["message"]
    assert read["contents"]


@pytest.mark.parametrize("uri", ["items://a%2Fb", "docs://a%2F..%2Fb", "files:///../etc"])
async def test_a_subscription_to_a_uri_no_read_may_use_is_refused(uri: str) -> None:
    async with connected(features_app().app) as http:
        peer = await join(http, SESSION)
        _, error = await peer.error("resources/subscribe", subscribe(uri))
    assert error["code"] == -32602
    assert error["data"] == {"uri": uri}


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_subscribe_and_unsubscribe_are_not_methods_of_the_stateless_revision(method: str) -> None:
    async with connected(features_app().app) as http:
        status, error = await Peer(http, STATELESS).error(method, subscribe("notes://1"))
    assert status == 404
    assert error["code"] == -32601


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
async def test_without_sessions_a_subscription_is_an_invalid_request(method: str) -> None:
    async with connected(features_app(sessions=False).app) as http:
        peer = await join(http, SESSION)
        assert "mcp-session-id" not in peer.headers
        read = await peer.result("resources/read", {"uri": "notes://1"})
        _, error = await peer.error(method, subscribe("notes://1"))
    assert read["contents"][0]["uri"] == "notes://1"
    assert error["code"] == -32600
    assert error["message"] == "Invalid Request: a subscription needs a session (the server runs without them)."
