"""The input table: what an attacker's review sent the endpoint, each row tried against a real
server and answered with the exact status and JSON-RPC error or `isError` result; after every
row a fresh session still gets its answer. Every body the server sends is read with Python's
strict `json` (NaN, Infinity and numbers beyond a double raise), so nothing non-JSON goes out.

Two servers serve the same app: the plain one (no endpoint dependencies, so the endpoint is a
plain Starlette route) and a guarded one (a dependency, so it stays a FastAPI route). Both sit
behind the app's CORS middleware. The small functions behind each row are tested below the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import httpx
import pydantic_core
import pytest
from fastapi import Body, Depends, FastAPI
from pydantic import BaseModel
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from fastapi_mcp_routes import Limits, Origins, ToolContext, mcp_routes, mcp_tool
from fastapi_mcp_routes.options import MAX_ARGUMENT_DEPTH
from fastapi_mcp_routes.server.call import ToolCall
from fastapi_mcp_routes.server.channel import SessionChannel
from fastapi_mcp_routes.server.pipeline import check_argument_depth
from fastapi_mcp_routes.server.sealing.request_state import InvalidRequestState, RequestStateSealer
from fastapi_mcp_routes.tools.invoke import Caller, CapturedResponse
from fastapi_mcp_routes.tools.results import tool_result
from fastapi_mcp_routes.transport.origin import OriginPolicy
from fastapi_mcp_routes.wire.errors import ParseError, ToolError
from fastapi_mcp_routes.wire.json import dumps, loads
from fastapi_mcp_routes.wire.jsonrpc import some, truncate
from tests.support.confirmation import pending_of
from tests.support.deployments import one_process
from tests.support.discovery import tool_of
from tests.support.jsonrpc import HEADERS, initialize, open_session, rpc, tool_call
from tests.support.servers import serve
from tests.support.stateless import stateless_headers, stateless_meta, stateless_request
from tests.support.waits import WAIT_S

Context = Annotated[ToolContext, Depends()]
CLIENT_ORIGIN = "http://client.example"  # a browser client the deployment allows
CAPABLE = {"elicitation": {}}  # a client that can ask its user
COLOUR = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
NUMBER = "__number__"  # stands for a number spliced into a body as raw text
OVERFLOW = {
    "code": -32700,
    "message": "Parse error: the body holds a number too large for a 64-bit float (RFC 7493 section 2.2).",
}
METHOD_NOT_ALLOWED = {"code": -32600, "message": "Method not allowed."}
HOST_REFUSED = {"code": -32600, "message": "Forbidden: this Host is not allowed."}
NOT_JSON = 'The route\'s response is not valid JSON: {"value": 1e400}'
TOO_DEEP = (
    "Argument 'item' nests objects or arrays more than 64 levels deep; "
    "the server accepts at most 64 (Limits.max_argument_depth)."
)


class Reading(BaseModel):
    value: float


def make_app(**options: Any) -> FastAPI:
    app = FastAPI()
    app.add_middleware(
        CORSMiddleware,
        allow_origins=[CLIENT_ORIGIN],
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
        expose_headers=["mcp-session-id"],
    )
    app.include_router(mcp_routes(app, origins=Origins(allowed_origins=[CLIENT_ORIGIN]), **options))

    @mcp_tool()
    @app.get("/echo")
    def echo(text: str) -> dict[str, str]:
        return {"text": text}

    @mcp_tool()  # a mutation: confirmed first, its plan echoing the arguments
    @app.post("/orders")
    def place_order(item: Annotated[Any, Body(embed=True)]) -> dict[str, Any]:
        return {"item": item}

    @mcp_tool()
    @app.get("/reading", response_model=Reading)
    def reading() -> Response:
        # Written by hand, as a route may: a number no double holds.
        return Response(b'{"value": 1e400}', media_type="application/json")

    @mcp_tool()
    @app.get("/endless")
    async def endless(ctx: Context) -> dict[str, bool]:
        await ctx.report_progress(math.inf)
        return {"done": True}

    @mcp_tool()
    @app.get("/noisy")
    async def noisy(ctx: Context) -> dict[str, bool]:
        await ctx.log("info", {"ratio": math.nan})
        return {"done": True}

    @mcp_tool(confirm=False)
    @app.post("/ask")
    async def ask(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("Which colour?", COLOUR)
        return {"action": answer.action, "content": answer.content}

    return app


def nothing() -> None:
    """A dependency that guards nothing, but keeps the endpoint a FastAPI route."""


@dataclass(frozen=True)
class Servers:
    plain: str
    guarded: str


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with serve(make_app()) as plain, serve(make_app(dependencies=[Depends(nothing)])) as guarded:
        yield Servers(plain, guarded)


# -- reading what the server sends, strictly -----------------------------------------------------


def _not_json(word: str) -> Any:
    raise AssertionError(f"the server sent {word}, which is not JSON")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise AssertionError(f"the server sent {text}, a number no double holds")
    return number


def strict(text: str | bytes) -> Any:
    """JSON as a strict reader takes it: NaN, Infinity and numbers beyond a double raise."""
    return json.loads(text, parse_constant=_not_json, parse_float=_finite)


def strict_sse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON-RPC messages of an SSE body, read strictly, as they arrive."""
    for line in lines:
        if line.startswith("data: {"):
            yield strict(line[len("data: ") :])


def answer(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC message of a response, JSON or SSE, read strictly."""
    if response.headers["content-type"].startswith("text/event-stream"):
        *_, last = strict_sse(response.text.splitlines())
        return last
    message: dict[str, Any] = strict(response.content)
    return message


def raw(message: dict[str, Any], number: str) -> bytes:
    """The message as JSON text, with `number` written where `NUMBER` stands."""
    return json.dumps(message).replace(json.dumps(NUMBER), number).encode()


def nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = {"a": value}
    return value


@dataclass
class Peer:
    """An HTTP client of each server."""

    http: httpx.Client
    guarded: httpx.Client
    base_url: str

    def open(self, capabilities: dict[str, Any] | None = None) -> dict[str, str]:
        return open_session(self.http, capabilities=capabilities)

    def call(self, name: str, arguments: dict[str, Any], **options: Any) -> Any:
        """Call a tool in a new session; its result (a 200 answer, read strictly)."""
        response = self.http.post("/mcp", json=tool_call(name, arguments, **options), headers=self.open())
        assert response.status_code == 200, response.text
        return answer(response)["result"]

    def stateless(self, name: str, params: dict[str, Any], number: str | None = None) -> httpx.Response:
        """A 2026-07-28 `tools/call` from a client that can be asked; `number` replaces `NUMBER`."""
        message = stateless_request("tools/call", {"name": name, **params}, stateless_meta(CAPABLE))
        body = raw(message, number) if number is not None else json.dumps(message).encode()
        return self.http.post("/mcp", content=body, headers=stateless_headers("tools/call", name))


def error(response: httpx.Response, status: int, request_id: int | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    message = answer(response)
    assert message["id"] == request_id
    result: dict[str, Any] = message["error"]
    return result


def is_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


# -- 1. numbers beyond a double, and NaN or infinities from the server ---------------------------


def overflowing_number(number: str) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        body = raw(tool_call("echo", {"text": NUMBER}, request_id=3), number)
        assert error(peer.http.post("/mcp", content=body, headers=peer.open()), 400) == OVERFLOW

    return attack


def overflowing_number_in_an_answer(peer: Peer) -> None:
    asked = answer(peer.stateless("ask", {"arguments": {}}))["result"]
    assert asked["resultType"] == "input_required"
    [key] = asked["inputRequests"]
    reply = {"action": "accept", "content": {"colour": NUMBER}}
    params = {"arguments": {}, "requestState": asked["requestState"], "inputResponses": {key: reply}}
    assert error(peer.stateless("ask", params, "1e400"), 400) == OVERFLOW
    # Nothing of it was sealed anywhere: the well-formed retry with the same state runs.
    done = answer(peer.stateless("ask", params, '"red"'))["result"]
    assert done["structuredContent"] == {"action": "accept", "content": {"colour": "red"}}


def route_answering_a_number_beyond_a_double(peer: Peer) -> None:
    assert peer.call("reading", {}) == is_error(NOT_JSON)


def route_sending_a_non_finite_number(tool: str) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        result = peer.call(tool, {}, progress_token="p")
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("The tool failed with an internal error. Reference: ")

    return attack


# -- 2. arguments too deep to echo -----------------------------------------------------------------


def argument_nested_past_the_limit(peer: Peer) -> None:
    assert peer.call("place_order", {"item": nested(196)}) == is_error(TOO_DEEP)
    # A client that could be asked is not asked: the call ends before the confirmation.
    result = answer(peer.stateless("place_order", {"arguments": {"item": nested(196)}}))["result"]
    assert result["resultType"] == "complete"
    assert {key: result[key] for key in ("content", "isError")} == is_error(TOO_DEEP)


def argument_at_the_limit_is_echoed_whole(peer: Peer) -> None:
    deep = nested(64)
    response = peer.http.post("/mcp", json=tool_call("place_order", {"item": deep}), headers=peer.open())
    pending = pending_of(answer(response)["result"])
    assert pending["plan"]["arguments"] == {"item": deep}
    pydantic_core.from_json(response.content)  # so does the parser of the official Python SDK
    asked = answer(peer.stateless("place_order", {"arguments": {"item": deep}}))["result"]
    [question] = asked["inputRequests"].values()
    assert question["params"]["message"].startswith("Allow place_order to run POST /orders with item={a={a=")
    assert question["params"]["_meta"]["fastapi-mcp-routes/plan"]["arguments"] == {"item": deep}


# -- 3. a Host that is not a host[:port] -----------------------------------------------------------


def host(value: Callable[[str], str]) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        port = peer.base_url.rsplit(":", 1)[1]
        response = peer.http.post("/mcp", json=initialize(), headers={**HEADERS, "host": value(port)})
        assert error(response, 403) == HOST_REFUSED

    return attack


# -- 4. error texts that echo what the client sent -------------------------------------------------


def many_unknown_argument_names(peer: Peer) -> None:
    names = {f"n{index:06d}": 1 for index in range(200_000)}
    listed = ", ".join(f"'n{index:06d}'" for index in range(5))
    expected = f"Unknown argument(s) {listed} and 199,995 more; the tool 'echo' takes: text."
    assert peer.call("echo", {"text": "hi", **names}) == is_error(expected)


def a_long_unknown_argument_name(peer: Peer) -> None:
    expected = f"Unknown argument(s) '{'x' * 32}…'; the tool 'echo' takes: text."
    assert peer.call("echo", {"text": "hi", "x" * 100_000: 1}) == is_error(expected)


def a_megabyte_refusal_of_a_question(peer: Peer) -> None:
    owner = peer.open(CAPABLE)
    with peer.http.stream("POST", "/mcp", json=tool_call("ask", request_id=1), headers=owner) as stream:
        messages = strict_sse(stream.iter_lines())
        question = next(messages)
        refusal = {"jsonrpc": "2.0", "id": question["id"], "error": {"code": -1, "message": "x" * 1_000_000}}
        assert peer.http.post("/mcp", json=refusal, headers=owner).status_code == 202
        result = next(message for message in messages if message.get("id") == 1)["result"]
    expected = f"The tool could not finish: the client refused elicitation/create: {'x' * 200}…."
    assert result == is_error(expected)


def a_long_unsupported_protocol_version(peer: Peer) -> None:
    version = "9" * 8_000  # as long as a header may be; the envelope must carry it too
    meta = {**stateless_meta(), "io.modelcontextprotocol/protocolVersion": version}
    sent = stateless_headers("tools/list", **{"mcp-protocol-version": version})
    response = peer.http.post("/mcp", json=stateless_request("tools/list", {}, meta), headers=sent)
    refused = error(response, 400, request_id=1)
    assert refused["data"] == {"supported": ["2026-07-28"], "requested": "9" * 32 + "…"}


# -- 5. methods the endpoint does not serve --------------------------------------------------------


def method(name: str) -> Callable[[Peer], None]:
    def attack(peer: Peer) -> None:
        for http in (peer.http, peer.guarded):
            response = http.request(name, "/mcp", headers=HEADERS)
            assert response.headers["allow"] == "GET, POST, DELETE"
            if name == "HEAD":  # a HEAD answer has no body
                assert (response.status_code, response.content) == (405, b"")
            else:
                assert error(response, 405) == METHOD_NOT_ALLOWED

    return attack


def cors_preflight_from_an_allowed_origin(peer: Peer) -> None:
    preflight = {
        "origin": CLIENT_ORIGIN,
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, mcp-protocol-version",
    }
    for http in (peer.http, peer.guarded):
        response = http.options("/mcp", headers=preflight)
        assert response.status_code == 200, response.text
        assert response.headers["access-control-allow-origin"] == CLIENT_ORIGIN
        assert "POST" in response.headers["access-control-allow-methods"]
        opened = http.post("/mcp", json=initialize(), headers={**HEADERS, "origin": CLIENT_ORIGIN})
        assert opened.status_code == 200, opened.text
        assert opened.headers["access-control-allow-origin"] == CLIENT_ORIGIN


ROWS: list[tuple[str, Callable[[Peer], None]]] = [
    ("1e400 in arguments -> 400 parse error", overflowing_number("1e400")),
    ("-1e400 in arguments -> 400 parse error", overflowing_number("-1e400")),
    ("a 400-digit float in arguments -> 400 parse error", overflowing_number("1" + "0" * 400 + ".5")),
    ("1e400 in inputResponses -> 400 parse error, the well-formed retry runs", overflowing_number_in_an_answer),
    ("a route answering 1e400 -> isError, no Infinity sent", route_answering_a_number_beyond_a_double),
    ("a route reporting infinite progress -> isError", route_sending_a_non_finite_number("endless")),
    ("a route logging NaN -> isError", route_sending_a_non_finite_number("noisy")),
    ("an argument nested 196 deep -> isError naming the limit", argument_nested_past_the_limit),
    ("an argument nested 64 deep -> its plan echoes it whole", argument_at_the_limit_is_echoed_whole),
    ("Host with userinfo -> 403", host(lambda port: f"evil.example@127.0.0.1:{port}")),
    ("Host with userinfo before localhost -> 403", host(lambda port: f"evil.example@localhost:{port}")),
    ("Host with userinfo after the port -> 403", host(lambda port: f"127.0.0.1:{port}@evil.example")),
    ("Host with a path -> 403", host(lambda port: f"127.0.0.1:{port}/evil")),
    ("Host with a space -> 403", host(lambda port: f"127.0.0.1:{port} evil.example")),
    ("200,000 unknown argument names -> isError naming five", many_unknown_argument_names),
    ("a 100 kB unknown argument name -> isError, the name cut short", a_long_unknown_argument_name),
    ("a 1 MB refusal of a question -> isError, the reason cut short", a_megabyte_refusal_of_a_question),
    ("an 8 kB unsupported protocol version -> 400, echoed cut short", a_long_unsupported_protocol_version),
    ("PUT -> 405 JSON-RPC error with Allow", method("PUT")),
    ("PATCH -> 405 JSON-RPC error with Allow", method("PATCH")),
    ("OPTIONS -> 405 JSON-RPC error with Allow", method("OPTIONS")),
    ("HEAD -> 405 with Allow", method("HEAD")),
    ("TRACE -> 405 JSON-RPC error with Allow", method("TRACE")),
    ("CORS preflight from an allowed origin -> the app's CORS answer", cors_preflight_from_an_allowed_origin),
]


@pytest.mark.parametrize("attack", [row[1] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_input_is_refused_and_the_server_keeps_serving(servers: Servers, attack: Callable[[Peer], None]) -> None:
    with (
        httpx.Client(base_url=servers.plain, timeout=WAIT_S) as http,
        httpx.Client(base_url=servers.guarded, timeout=WAIT_S) as guarded,
    ):
        attack(Peer(http, guarded, servers.plain))
        for client in (http, guarded):
            fresh = open_session(client)
            pong = client.post("/mcp", json=rpc("ping", request_id=9), headers=fresh)
            assert answer(pong) == {"jsonrpc": "2.0", "id": 9, "result": {}}
            echoed = client.post("/mcp", json=tool_call("echo", {"text": "still here"}), headers=fresh)
            assert answer(echoed)["result"]["structuredContent"] == {"text": "still here"}


# -- the small functions ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1e400", "-1e400", "1.5E+309", "1" + "0" * 400 + ".0", '[0, {"a": 1e999}]'])
def test_a_number_beyond_a_double_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError) as raised:
        loads(text.encode())
    assert raised.value.to_error() == OVERFLOW


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e308", 1e308),
        ("1e-400", 0.0),  # underflow is a number a double holds
        ("1" + "0" * 400, 10**400),  # an integer is kept exactly
        ('["NaN", "Infinity", "-Infinity"]', ["NaN", "Infinity", "-Infinity"]),
    ],
)
def test_numbers_a_double_holds_and_words_in_strings_are_read(text: str, value: Any) -> None:
    assert loads(text) == value


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, {"a": [1.0, math.nan]}])
def test_nan_and_infinities_are_never_written(value: Any) -> None:
    with pytest.raises(ValueError, match="JSON cannot carry NaN or an infinity"):
        dumps(value)


def test_the_words_nan_and_infinity_are_written_as_strings() -> None:
    assert dumps({"note": "NaN and -Infinity"}) == b'{"note":"NaN and -Infinity"}'


def test_a_sealed_state_that_cannot_be_read_is_an_invalid_state() -> None:
    secret = one_process().secret
    sealer = RequestStateSealer(secret)
    binding = sealer.binding(b"alice", "ask", {})
    state = secret.seal("requestState", b'{"v":2,"exp":9999999999,"a":{"x":1e400}}', binding)
    with pytest.raises(InvalidRequestState):
        sealer.open(state, binding)


@pytest.mark.anyio
@pytest.mark.parametrize(("progress", "total"), [(math.inf, None), (math.nan, None), (1.0, math.inf)])
async def test_progress_must_be_a_finite_number(progress: float, total: float | None) -> None:
    caller = Caller(headers=(), client=None, server=None, scheme="http", root_path="", http_version="1.1", state=None)
    channel = SessionChannel(caller=caller, principal=None, identity=b"alice", protocol_version="2025-11-25")
    call = ToolCall(request_id=1, progress_token="p", channel=channel, tool="t", arguments={}, answers={})
    with pytest.raises(ValueError, match="progress and total must be finite numbers"):
        await call.report_progress(progress, total, None)


def test_a_route_response_that_is_no_json_is_an_error_when_an_output_schema_promises_one() -> None:
    response = CapturedResponse(200, ((b"content-type", b"application/json"),), b'{"value": 1e400}')
    result = tool_result(tool_of(make_app(), "reading"), response)
    assert result == is_error(NOT_JSON)


def test_an_argument_at_the_depth_limit_passes_and_one_past_it_is_refused() -> None:
    check_argument_depth({"item": nested(64), "flat": [1, 2]}, 64)
    check_argument_depth({"wide": [[index] for index in range(100_000)]}, 2)
    with pytest.raises(ToolError) as raised:
        check_argument_depth({"item": [1, nested(64)]}, 64)
    assert str(raised.value) == TOO_DEEP


@pytest.mark.parametrize("depth", [0, MAX_ARGUMENT_DEPTH + 1, True, 1.5])
def test_the_argument_depth_limit_is_a_positive_number_of_levels_up_to_128(depth: object) -> None:
    message = f"Limits.max_argument_depth must be a positive number of levels, at most 128, got {depth!r}"
    with pytest.raises(ValueError, match="max_argument_depth") as raised:
        Limits(max_argument_depth=depth)  # type: ignore[arg-type]
    assert str(raised.value) == message


@pytest.mark.parametrize(
    "host",
    [
        "evil.example@127.0.0.1",
        "evil.example@127.0.0.1:8000",
        "127.0.0.1:8000@evil.example",
        "127.0.0.1/evil",
        "127.0.0.1 evil",
        "127.0.0.1:80:80",
        "[::1",
        "évil.example",
    ],
)
def test_a_host_that_is_not_a_host_and_port_is_refused_wherever_the_server_listens(host: str) -> None:
    policy = OriginPolicy.build(None, ["*"])  # even where every host is allowed
    for server_address in ("127.0.0.1", "10.0.0.1", None):
        assert not policy.host_allowed(host, server_address)


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:8000", "[::1]:8000", "127.0.0.1:"])
def test_a_loopback_host_and_port_is_allowed(host: str) -> None:
    assert OriginPolicy.build(None, None).host_allowed(host, "127.0.0.1")


@pytest.mark.parametrize("host", ["api.example.com", "api.example.com:443", "my_service:8000", "10.0.0.1"])
def test_any_well_formed_host_is_allowed_off_loopback(host: str) -> None:
    assert OriginPolicy.build(None, None).host_allowed(host, "10.0.0.1")


def test_an_error_names_five_names_each_cut_short_and_counts_the_rest() -> None:
    assert some(["a", "b"]) == "'a', 'b'"
    assert some(["a", "b", "c", "d", "e", "f", "g"]) == "'a', 'b', 'c', 'd', 'e' and 2 more"
    assert some(["x" * 40]) == f"'{'x' * 32}…'"
    assert truncate("y" * 300, 200) == "y" * 200 + "…"


def test_a_422_names_twenty_problems_each_input_cut_short_and_counts_the_rest() -> None:
    message = "Input should be a valid integer"
    problem = {"type": "int_parsing", "loc": ["query", "n"], "msg": message, "input": "z" * 10_000}
    body = json.dumps({"detail": [problem] * 1000}).encode()
    text = tool_result(tool_of(make_app(), "echo"), CapturedResponse(422, (), body))["content"][0]["text"]
    one = f"'n': {message} (got {repr('z' * 10_000)[:32]}…)"
    assert text == "HTTP 422: invalid arguments: " + "; ".join([one] * 20) + "; and 980 more"
