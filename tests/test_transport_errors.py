"""Every malformed request gets the status and JSON-RPC error the spec names, and the server
keeps serving: a table of bad inputs against a real uvicorn server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from fastapi import Depends, FastAPI
from pydantic import BaseModel

from fastapi_mcp_routes import Limits, mcp_routes, mcp_tool
from tests.support.asgi import http_scope
from tests.support.jsonrpc import HEADERS, SESSION_VERSION, initialize, open_session, rpc, tool_call
from tests.support.servers import connected, serve
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S

MAX_BODY = 4096


class Echo(BaseModel):
    text: str


def make_app(*, sessions: bool = True) -> FastAPI:
    app = FastAPI(title="Table")

    @mcp_tool()
    @app.get("/echo/{text}")
    def echo(text: str) -> Echo:
        return Echo(text=text)

    app.include_router(mcp_routes(app, limits=Limits(max_body_bytes=MAX_BODY), sessions=sessions))
    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_app()) as url:
        yield url


@dataclass
class Row:
    """One bad request: what to send and what must come back."""

    name: str
    status: int
    code: int | None = None
    method: str = "POST"
    body: bytes | None = None
    message: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    session: str = "valid"  # "valid", "none", "unknown", "foreign", "old" (2025-03-26)
    version: str | None = "2025-11-25"


ROWS = [
    Row("content type not json", 415, -32600, message=rpc("ping"), headers={"content-type": "text/plain"}),
    Row("accept lacks json and sse", 406, -32600, message=rpc("ping"), headers={"accept": "text/html"}),
    Row("json refused with q=0", 406, -32600, message=rpc("ping"), headers={"accept": "application/json;q=0"}),
    Row(
        "batch in a 2025-11-25 session with a 2025-03-26 header",
        400,
        -32600,
        message=[rpc("ping"), rpc("ping", request_id=2)],
        version="2025-03-26",
    ),
    Row("malformed host", 403, -32600, message=rpc("ping"), headers={"host": "["}),
    Row("malformed origin", 403, -32600, message=rpc("ping"), headers={"origin": "http://["}),
    Row("body over the cap", 413, -32600, body=b'{"pad":"' + b"x" * (MAX_BODY + 1) + b'"}'),
    Row("malformed json", 400, -32700, body=b'{"jsonrpc": "2.0", "id": 1,'),
    Row("invalid utf-8", 400, -32700, body=b'{"a":"\xff"}'),
    Row("deeply nested json", 400, -32700, body=b"[" * 2000 + b"]" * 2000),
    Row("not a json-rpc message", 400, -32600, message={"hello": "world"}),
    Row("wrong jsonrpc version", 400, -32600, message={"jsonrpc": "1.0", "id": 1, "method": "ping"}),
    Row("id of the wrong type", 400, -32600, message={"jsonrpc": "2.0", "id": [1], "method": "ping"}),
    Row("empty batch", 400, -32600, message=[]),
    Row("unknown method", 200, -32601, message=rpc("tools/destroy")),
    Row("params not an object", 200, -32602, message={"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
    Row("tool name not a string", 200, -32602, message=rpc("tools/call", {"name": 5})),
    Row("arguments not an object", 200, -32602, message=rpc("tools/call", {"name": "echo", "arguments": [1]})),
    Row("unknown tool", 200, -32602, message=rpc("tools/call", {"name": "nope", "arguments": {}})),
    Row("bad cursor", 200, -32602, message=rpc("tools/list", {"cursor": "not-ours"})),
    Row("batch outside 2025-03-26", 400, -32600, message=[rpc("ping"), rpc("ping", request_id=2)]),
    Row("missing session id", 400, -32600, message=rpc("ping"), session="none"),
    Row("unknown session id", 404, -32600, message=rpc("ping"), session="unknown"),
    Row("foreign session id", 404, -32600, message=rpc("ping"), session="foreign"),
    Row("unsupported protocol version header", 400, -32600, message=rpc("ping"), version="1999-01-01"),
    Row("origin of another site", 403, -32600, message=rpc("ping"), headers={"origin": "http://evil.example"}),
    Row("origin null", 403, -32600, message=rpc("ping"), headers={"origin": "null"}),
    Row("non-loopback host on loopback", 403, -32600, message=rpc("ping"), headers={"host": "evil.example"}),
    Row("GET stream without a session id", 400, -32600, method="GET", session="none"),
    Row("GET stream for an unknown session", 404, -32600, method="GET", session="unknown"),
    Row("GET stream not accepting sse", 406, -32600, method="GET", headers={"accept": "application/json"}),
    Row("GET stream with an unsupported protocol version", 400, -32600, method="GET", version="1999-01-01"),
    Row("DELETE with an unsupported protocol version", 400, -32600, method="DELETE", version="1999-01-01"),
    Row("DELETE without a session id", 400, -32600, method="DELETE", session="none"),
    Row("notification", 202, message=rpc("notifications/initialized", request_id=None)),
    Row("initialize sent as a notification", 202, message=rpc("initialize", {}, request_id=None), session="none"),
    Row("client reply", 202, message={"jsonrpc": "2.0", "id": 7, "result": {}}),
]


def send(http: httpx.Client, row: Row) -> httpx.Response:
    if row.session == "none":
        headers = dict(HEADERS)
    elif row.session == "unknown":
        headers = {**HEADERS, "mcp-session-id": "x" * 43}
    elif row.session == "foreign":
        headers = open_session(http, headers={"authorization": "Bearer alice"})
        headers["authorization"] = "Bearer mallory"
    else:
        headers = open_session(http)
    if row.version is None:
        headers.pop("mcp-protocol-version")
    else:
        headers["mcp-protocol-version"] = row.version
    headers.update(row.headers)
    content = row.body if row.body is not None else httpx.Request("POST", "/", json=row.message).content
    return http.request(row.method, "/mcp", content=content if row.method == "POST" else None, headers=headers)


def assert_still_serving(http: httpx.Client) -> None:
    headers = open_session(http)
    response = http.post("/mcp", json=tool_call("echo", {"text": "alive"}, request_id=99), headers=headers)
    assert response.status_code == 200
    assert response.json()["result"]["structuredContent"] == {"text": "alive"}


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_gets_the_named_status_and_error_and_the_server_keeps_serving(base_url: str, row: Row) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        response = send(http, row)
        assert response.status_code == row.status, response.text
        if row.code is None:
            assert response.content == b""
        else:
            assert response.headers["content-type"].startswith("application/json")
            assert response.json()["error"]["code"] == row.code
        assert_still_serving(http)


def test_params_error_keeps_the_request_id(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        response = http.post("/mcp", json=rpc("tools/call", {"name": 5}, request_id=41), headers=headers)
    assert response.json()["id"] == 41


def test_batch_under_2025_03_26_is_answered_in_order(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http, version="2025-03-26")
        batch = [
            rpc("ping", request_id="a"),
            rpc("notifications/initialized", request_id=None),
            rpc("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, request_id="b"),
            {"jsonrpc": "2.0", "id": "c"},
        ]
        response = http.post("/mcp", json=batch, headers=headers)
    assert response.status_code == 200
    replies = response.json()
    assert [reply["id"] for reply in replies] == ["a", "b", "c"]
    assert replies[1]["result"]["structuredContent"] == {"text": "hi"}
    assert replies[2]["error"]["code"] == -32600


def test_initialize_inside_a_batch_is_refused(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        alone = http.post("/mcp", json=[initialize("2025-03-26")], headers=HEADERS)
        headers = open_session(http, version="2025-03-26")
        second = http.post("/mcp", json=[rpc("ping"), initialize("2025-03-26", request_id=2)], headers=headers)
    for response in (alone, second):
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32600


def test_refusal_echoes_a_readable_request_id(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        response = http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": 5}, headers=headers)
    assert response.status_code == 400
    assert response.json()["id"] == 7


def test_initialize_with_params_that_are_not_an_object_is_invalid_params(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        message = {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": [1]}
        response = http.post("/mcp", json=message, headers=HEADERS)
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32602, "message": "Invalid params: 'params' must be an object."},
    }


def test_deleted_session_is_gone(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        assert http.delete("/mcp", headers=headers).status_code == 204
        assert http.post("/mcp", json=rpc("ping"), headers=headers).status_code == 404
        assert http.delete("/mcp", headers=headers).status_code == 404


def test_initialize_echoes_a_supported_version_and_offers_the_latest_otherwise(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        for requested, expected in [
            ("2025-03-26", "2025-03-26"),
            ("2025-06-18", "2025-06-18"),
            ("2099-01-01", "2025-11-25"),
        ]:
            response = http.post("/mcp", json=initialize(requested), headers=HEADERS)
            assert response.json()["result"]["protocolVersion"] == expected


def test_same_origin_and_loopback_hosts_are_accepted(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = open_session(http)
        port = base_url.rsplit(":", 1)[1]
        for extra in ({"origin": base_url}, {"host": f"localhost:{port}"}):
            response = http.post("/mcp", json=rpc("ping"), headers={**headers, **extra})
            assert response.status_code == 200, (extra, response.text)


def test_without_sessions_no_id_is_issued_or_needed() -> None:
    with serve(make_app(sessions=False)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        opened = http.post("/mcp", json=initialize(), headers=HEADERS)
        assert "mcp-session-id" not in opened.headers
        call = tool_call("echo", {"text": "free"})
        response = http.post("/mcp", json=call, headers={**HEADERS, "mcp-protocol-version": SESSION_VERSION})
        assert response.json()["result"]["structuredContent"] == {"text": "free"}
        assert http.delete("/mcp", headers=HEADERS).status_code == 405
        assert http.get("/mcp", headers=HEADERS).status_code == 405


def test_a_client_that_reads_only_sse_is_answered_with_sse(base_url: str) -> None:
    with httpx.Client(base_url=base_url, timeout=WAIT_S) as http:
        headers = {**open_session(http), "accept": "text/event-stream"}
        response = http.post("/mcp", json=rpc("ping", request_id=5), headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    # 2025-11-25 streams open with a priming event (an id to resume from, and a retry delay).
    assert response.text == (
        'data: \nid: 1.0\nretry: 1000\n\nevent: message\ndata: {"jsonrpc":"2.0","id":5,"result":{}}\nid: 1.1\n\n'
    )


@pytest.mark.anyio
async def test_whitespace_around_header_values_is_not_part_of_them() -> None:
    # RFC 9110 section 5.5, and the conformance suite's SEP-2243 check: h11 strips it before the
    # app sees a header, httptools (uvicorn[standard]) does not, so the endpoint must. In process,
    # the headers reach the app exactly as written here.
    app = make_app(sessions=False)
    headers = stateless_headers("tools/call", "echo")
    padded = {name: f" \t{headers[name]}  " for name in ("mcp-method", "mcp-name", "mcp-protocol-version")}
    async with connected(app) as http:
        params = {"name": "echo", "arguments": {"text": "hi"}}
        answer = await http.post("/mcp", json=stateless_request("tools/call", params), headers={**headers, **padded})
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["content"]
    assert not result.get("isError")


async def _post_in_pieces(
    app: FastAPI, pieces: list[bytes], *, disconnect: bool = False, content_length: str | None = None
) -> tuple[int, bytes, int]:
    """POST to the endpoint through the app's ASGI interface, the body in `pieces` (no
    Content-Length unless given), then a disconnect if asked: the status, the body, and how
    many messages the endpoint read."""
    headers = {**stateless_headers("tools/call", "echo"), "host": "127.0.0.1"}
    if content_length is not None:
        headers["content-length"] = content_length
    scope = http_scope("POST", "/mcp", headers)
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": piece, "more_body": disconnect or index < len(pieces) - 1}
        for index, piece in enumerate(pieces)
    ]
    if disconnect:
        messages.append({"type": "http.disconnect"})
    read = 0
    status = 0
    body = b""

    async def receive() -> dict[str, Any]:
        nonlocal read
        if read < len(messages):
            read += 1
            return messages[read - 1]
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, body
        if message["type"] == "http.response.start":
            status = message["status"]
        else:
            body += message.get("body", b"")

    with anyio.fail_after(WAIT_S):
        await app(scope, receive, send)
    return status, body, read


@pytest.mark.anyio
@pytest.mark.parametrize("guarded", [False, True], ids=["plain route", "with a dependency"])
async def test_a_body_sent_in_pieces_is_read_whole_capped_and_a_disconnect_is_survived(guarded: bool) -> None:
    # Unguarded, the endpoint is served as a plain route and reads the ASGI messages itself
    # (transport/http.py `FreshRequest`); with a dependency, FastAPI's request is read.
    app = FastAPI()

    @mcp_tool()
    @app.get("/echo/{text}")
    def echo(text: str) -> Echo:
        return Echo(text=text)

    guards = [Depends(lambda: None)] if guarded else None
    app.include_router(mcp_routes(app, limits=Limits(max_body_bytes=MAX_BODY), sessions=False, dependencies=guards))
    whole = json.dumps(stateless_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})).encode()
    async with app.router.lifespan_context(app):
        status, answer, _ = await _post_in_pieces(app, [whole[:10], b"", whole[10:30], whole[30:]])
        assert status == 200, answer
        assert json.loads(answer)["result"]["structuredContent"] == {"text": "hi"}

        # Over the cap without a Content-Length: refused once the pieces pass it, the rest unread.
        pieces = [b" " * 1024] * 8 + [whole]
        status, answer, read = await _post_in_pieces(app, pieces)
        assert status == 413, answer
        assert json.loads(answer)["error"]["code"] == -32600
        assert read == 5  # 5 KiB read: past the 4 KiB cap

        # The client leaves halfway through its body: nothing to answer, nothing breaks.
        status, _, _ = await _post_in_pieces(app, [whole[:10]], disconnect=True)
        assert status == 400

        status, answer, _ = await _post_in_pieces(app, [whole])
        assert status == 200, answer


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content_length", "status"),
    [("\u00b2", 200), ("+5", 200), ("9" * 5000, 413), ("0" * 5000 + "12", 200), (str(MAX_BODY + 1), 413)],
    ids=["superscript two", "signed", "past int's 4300 digits", "leading zeros", "over the cap"],
)
async def test_a_content_length_that_is_no_plain_number_is_no_500(content_length: str, status: int) -> None:
    # uvicorn refuses these before the app; another server or an ASGI caller may pass them on.
    # Only a length of ASCII digits is trusted; the body is still capped as it is read.
    app = make_app(sessions=False)
    whole = json.dumps(stateless_request("tools/call", {"name": "echo", "arguments": {"text": "hi"}})).encode()
    async with app.router.lifespan_context(app):
        answer_status, answer, _ = await _post_in_pieces(app, [whole], content_length=content_length)
    assert answer_status == status, answer
    if status == 413:
        assert json.loads(answer)["error"]["code"] == -32600
