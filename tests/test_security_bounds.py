"""The bounds table: each row pushes past one bound on what a caller can make the server hold,
against a real server, and sees the refusal that names it, while other callers are still
served. Every row runs on a server of its own (the rows fill what they test), with bounds small
enough to reach in a few requests; `benchmarks/soak.py` pushes the same attacks at the default
bounds and measures the server's memory.

Callers are told apart as the server tells them apart: by credentials (an `x-api-key` the app's
`Limits.verify_credentials` accepts), else by client address: a made-up key, one it refuses,
counts as no key at all. Loopback is a whole /8 on Linux, so anonymous callers here connect
from 127.0.0.2, 127.0.0.3, ..."""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from fastapi_mcp_routes import Limits, Sessions, mcp_routes, mcp_tool
from tests.support.apps import Context
from tests.support.confirmation import is_pending, pending_of
from tests.support.jsonrpc import HEADERS, call_tool, initialize, open_session, rpc, tool_call
from tests.support.servers import serve
from tests.support.sse import read_to_first_message, sse_messages
from tests.support.stateless import post_stateless, stateless_headers, stateless_request
from tests.support.waits import WAIT_S

ASKING = {"elicitation": {}}  # a client that can be asked to confirm
BIG = 40_000  # characters in a `big` answer
FRAME = 10_000  # characters in a frame of the `frames` stream


def known_key(headers: Mapping[str, str]) -> bool:
    """The app's check of a key: every key but a made-up one."""
    return not headers.get("x-api-key", "made-up").startswith("made-up")


def make_app(limits: Limits, sessions: Sessions) -> FastAPI:
    app = FastAPI()
    checked = dataclasses.replace(limits, verify_credentials=known_key)
    app.include_router(mcp_routes(app, limits=checked, sessions=sessions))

    @mcp_tool()
    @app.post("/orders")
    def place_order(item: str) -> dict[str, str]:
        return {"placed": item}

    @mcp_tool()
    @app.get("/big")
    def big() -> dict[str, str]:
        return {"text": "x" * BIG}

    @mcp_tool()
    @app.get("/small")
    def small() -> dict[str, bool]:
        return {"ok": True}

    @mcp_tool(stream=True)
    @app.get("/frames")
    def frames() -> StreamingResponse:
        line = json.dumps({"text": "f" * FRAME}).encode() + b"\n"
        return StreamingResponse(iter([line] * 8), media_type="application/x-ndjson")

    @mcp_tool()
    @app.get("/client")
    def client(ctx: Context) -> dict[str, Any]:
        return {"info": ctx.client_info, "capabilities": ctx.client_capabilities}

    return app


@dataclass
class Server:
    """A server of the row's own, and HTTP clients on it from any loopback address."""

    base_url: str
    stack: ExitStack
    clients: dict[str, httpx.Client] = field(default_factory=dict)
    opened: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def client(self, address: str = "127.0.0.1") -> httpx.Client:
        if address not in self.clients:
            transport = httpx.HTTPTransport(local_address=address)
            http = httpx.Client(base_url=self.base_url, timeout=WAIT_S, transport=transport)
            self.clients[address] = self.stack.enter_context(http)
        return self.clients[address]

    def session(self, address: str = "127.0.0.1", key: str | None = None, **options: Any) -> dict[str, str]:
        """A session of the anonymous caller at `address`, or of the holder of `key`."""
        headers = {"x-api-key": key} if key else None
        opened = open_session(self.client(address), headers=headers, **options)
        self.opened.append((address, opened))
        return opened

    def close_sessions(self) -> None:
        """End every session the row opened, and so every call they still run."""
        for address, headers in self.opened:
            self.client(address).delete("/mcp", headers=headers)

    def served(self) -> None:
        """A caller the row did not touch still opens a session and gets its answers."""
        http = self.client("127.0.0.254")
        fresh = self.session("127.0.0.254", key="bystander")
        assert http.post("/mcp", json=rpc("ping", request_id=9), headers=fresh).json()["result"] == {}
        assert call_tool(http, "small", headers=fresh)["structuredContent"] == {"ok": True}


@contextmanager
def server(limits: Limits, sessions: Sessions | None = None) -> Iterator[Server]:
    with ExitStack() as stack:
        base_url = stack.enter_context(serve(make_app(limits, sessions or Sessions())))
        running = Server(base_url, stack)
        try:
            yield running
        finally:
            running.close_sessions()


# -- the rows --------------------------------------------------------------------------------


def batch_too_long(server: Server) -> None:
    http = server.client()
    headers = server.session(version="2025-03-26")
    batch = [rpc("tools/list", request_id=n) for n in range(101)]
    refused = http.post("/mcp", json=batch, headers=headers)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32600
    assert "at most 100 messages (Limits.max_batch_length); this one holds 101" in refused.json()["error"]["message"]


def batch_answer_too_large(server: Server) -> None:
    http = server.client()
    headers = server.session(version="2025-03-26")
    batch = [tool_call("big", request_id=n) for n in range(50)]
    answered = http.post("/mcp", json=batch, headers=headers)
    assert answered.status_code == 200
    entries = answered.json()
    assert [entry["id"] for entry in entries] == list(range(50))  # every request is answered
    ran = [entry for entry in entries if "result" in entry]
    # An answer holds the text twice (content and structuredContent), about 80,000 bytes: the
    # second crosses the 100,000-byte cap, and the third is not run.
    assert len(ran) == 2
    assert all(entry["error"]["code"] == -32600 for entry in entries[2:])
    assert "Limits.max_batch_answer_bytes" in entries[2]["error"]["message"]
    assert len(answered.content) < 100_000 + 2 * BIG + 1000 + 48 * 250  # the cap, one answer, short errors


def batch_past_answer_bytes_per_caller(server: Server) -> None:
    http = server.client()
    headers = server.session(version="2025-03-26")
    entries = http.post("/mcp", json=[tool_call("big", request_id=n) for n in range(5)], headers=headers).json()
    # The first answer (about 80,000 bytes) is held until the batch is written; the next call's
    # response would pass 100,000 bytes, so it ends with an error result, and so do the rest.
    assert "isError" not in entries[0]["result"]
    for entry in entries[1:]:
        assert entry["result"]["isError"] is True
        assert "(Limits.max_answer_bytes_per_caller)" in entry["result"]["content"][0]["text"]
    # Written, the batch lets go of what it held: the same caller is served again.
    assert call_tool(http, "big", headers=server.session())["structuredContent"] == {"text": "x" * BIG}


def batch_past_anonymous_share_of_answer_bytes(server: Server) -> None:
    http = server.client("127.0.0.2")
    headers = server.session("127.0.0.2", version="2025-03-26")
    entries = http.post("/mcp", json=[tool_call("big", request_id=n) for n in range(3)], headers=headers).json()
    # Each route response is too small to count alone (an eighth of the caller's bound); the
    # batch's answers, held together until written, pass the anonymous share at the second.
    assert "isError" not in entries[0]["result"]
    assert "isError" not in entries[1]["result"]
    refused = entries[2]["error"]["message"]
    assert "(the share of Limits.max_answer_bytes anonymous callers may hold)" in refused


def call_past_answer_bytes_per_caller(server: Server) -> None:
    http = server.client()
    refused = call_tool(http, "big", headers=server.session())
    assert refused["isError"] is True
    assert "(Limits.max_answer_bytes_per_caller)" in refused["content"][0]["text"]
    stateless = post_stateless(http, "tools/call", {"name": "big", "arguments": {}}).json()["result"]
    assert stateless["isError"] is True
    assert "(Limits.max_answer_bytes_per_caller)" in stateless["content"][0]["text"]
    small = post_stateless(http, "tools/call", {"name": "small", "arguments": {}}).json()["result"]
    assert small["structuredContent"] == {"ok": True}


def sample_past_answer_bytes_per_caller(server: Server) -> None:
    http = server.client()
    # Each frame is counted twice (the answer carries it as structured content and as text):
    # the second would pass 30,000 bytes, so the window ends there, with the first, as at the
    # response cap: what was read is the caller's, marked truncated.
    cut = call_tool(http, "frames", {"durationMs": 5000}, headers=server.session())
    assert "isError" not in cut
    assert cut["structuredContent"]["frameCount"] == 1
    assert cut["structuredContent"]["truncated"] is True
    stateless = post_stateless(http, "tools/call", {"name": "frames", "arguments": {"maxFrames": 1}}).json()["result"]
    assert stateless["structuredContent"]["frameCount"] == 1
    assert json.loads(stateless["content"][0]["text"]) == stateless["structuredContent"]


def questions_per_session(server: Server) -> None:
    http = server.client()
    headers = server.session(capabilities=ASKING)
    for n in range(2):  # asked to confirm, then the client hangs up: the call waits on
        pinned_question(http, headers, n)
    refused = call_tool(http, "place_order", {"item": "tea"}, headers=headers, request_id=2)
    assert refused["isError"] is True
    assert "Limits.max_questions_per_session" in refused["content"][0]["text"]
    other = server.session(capabilities=ASKING)  # the same caller, another session: still asked
    pinned_question(http, other, 0)
    assert http.delete("/mcp", headers=headers).status_code == 204  # its calls end, their places free
    again = server.session(capabilities=ASKING)
    pinned_question(http, again, 0)


def questions_per_caller(server: Server) -> None:
    http = server.client()
    for _ in range(2):
        headers = server.session(capabilities=ASKING)
        pinned_question(http, headers, 0)
        pinned_question(http, headers, 1)
    refused = call_tool(http, "place_order", {"item": "tea"}, headers=server.session(capabilities=ASKING))
    assert "Limits.max_questions_per_caller" in refused["content"][0]["text"]
    pinned_question(server.client("127.0.0.2"), server.session("127.0.0.2", capabilities=ASKING), 0)


def questions_in_all(server: Server) -> None:
    # Of the five in all, anonymous callers may hold two, they and unchecked keys three.
    for n in (2, 3):
        pinned_question(server.client(f"127.0.0.{n}"), server.session(f"127.0.0.{n}", capabilities=ASKING), 0)
    headers = server.session("127.0.0.4", capabilities=ASKING)
    refused = call_tool(server.client("127.0.0.4"), "place_order", {"item": "tea"}, headers=headers)
    assert "2 questions already wait" in refused["content"][0]["text"]
    assert "the share of Limits.max_questions anonymous callers may hold" in refused["content"][0]["text"]
    pinned_question(server.client("127.0.0.5"), server.session("127.0.0.5", key="k5", capabilities=ASKING), 0)
    headers = server.session("127.0.0.6", key="k6", capabilities=ASKING)
    refused = call_tool(server.client("127.0.0.6"), "place_order", {"item": "tea"}, headers=headers)
    assert "3 questions already wait" in refused["content"][0]["text"]
    assert "callers without verified credentials may hold" in refused["content"][0]["text"]


def pinned_question(http: httpx.Client, headers: dict[str, str], request_id: int) -> None:
    """Call a gated tool, read up to the question that asks to confirm it, and hang up."""
    with http.stream(
        "POST", "/mcp", json=tool_call("place_order", {"item": "tea"}, request_id=request_id), headers=headers
    ) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        read_to_first_message(answer)


def replay_bytes_per_session(server: Server) -> None:
    http = server.client()
    sse_only = {"accept": "text/event-stream"}
    headers = {**server.session(), **sse_only}
    big = http.post("/mcp", json=tool_call("big"), headers=headers)
    assert sse_messages(big.text)[-1]["result"]["structuredContent"] == {"text": "x" * BIG}  # delivered live
    resumed = http.get("/mcp", headers={**headers, "last-event-id": last_event_id(big.text)})
    assert resumed.status_code == 400  # over the session's 30,000 bytes: not kept for a resume
    small = http.post("/mcp", json=tool_call("small", request_id=2), headers=headers)
    first = f"{last_event_id(small.text).split('.')[0]}.0"
    assert http.get("/mcp", headers={**headers, "last-event-id": first}).status_code == 200  # the next one is


def replay_bytes_in_all(server: Server) -> None:
    http = server.client()
    sse_only = {"accept": "text/event-stream"}
    kept: list[tuple[dict[str, str], str]] = []
    for n in range(4):  # each keeps one finished stream of about 140 bytes; the total holds two
        headers = {**server.session(key=f"k{n}"), **sse_only}
        answer = http.post("/mcp", json=tool_call("small"), headers=headers)
        kept.append((headers, f"{last_event_id(answer.text).split('.')[0]}.0"))
    statuses = [http.get("/mcp", headers={**headers, "last-event-id": first}).status_code for headers, first in kept]
    assert statuses[:2] == [400, 400]  # the oldest finished streams went first
    assert statuses[-1] == 200


def last_event_id(body: str) -> str:
    return [line[4:] for line in body.splitlines() if line.startswith("id: ")][-1]


def tokens_anonymous_flood(server: Server) -> None:
    http = server.client()
    alice = server.session(key="alice")
    token = pending_of(call_tool(http, "place_order", {"item": "tea"}, headers=alice))["token"]
    refusals = 0
    for n in range(2, 12):  # ten anonymous callers at other addresses, one token each
        anonymous = server.session(f"127.0.0.{n}")
        result = call_tool(server.client(f"127.0.0.{n}"), "place_order", {"item": "x"}, headers=anonymous)
        if not is_pending(result):
            refusals += 1
            assert "Limits.max_tokens" in result["content"][0]["text"]
    assert refusals == 0  # anonymous tokens push out anonymous ones: the total is never refused...
    confirmed = call_tool(http, "place_order", {"item": "tea", "confirmationToken": token}, headers=alice)
    assert confirmed["structuredContent"] == {"placed": "tea"}  # ...and alice's token survived


def tokens_claimed_full(server: Server) -> None:
    for n in range(3, 7):  # four credentialed callers at four addresses fill the total
        headers = server.session(f"127.0.0.{n}", key=f"k{n}")
        result = call_tool(server.client(f"127.0.0.{n}"), "place_order", {"item": "tea"}, headers=headers)
        assert pending_of(result)["pending"]
    anonymous = server.session("127.0.0.2")
    refused = call_tool(server.client("127.0.0.2"), "place_order", {"item": "x"}, headers=anonymous)
    assert refused["isError"] is True
    assert "Limits.max_tokens" in refused["content"][0]["text"]


def initialize_carrying_megabytes(server: Server) -> None:
    http = server.client()
    capabilities: dict[str, Any] = {"elicitation": {"form": {"padding": "x" * 100_000}}}
    capabilities.update({f"k{n}": {"flag": True, "more": {"deep": n}} for n in range(60_000)})
    message = initialize(capabilities=capabilities)
    message["params"]["clientInfo"] = {"name": "n" * 500_000, "version": "1", "extra": ["x"] * 100_000}
    assert len(json.dumps(message)) > 3_500_000
    opened = http.post("/mcp", json=message, headers=HEADERS)
    assert opened.status_code == 200
    headers = {**HEADERS, "mcp-protocol-version": "2025-11-25", "mcp-session-id": opened.headers["mcp-session-id"]}
    kept = call_tool(http, "client", headers=headers)["structuredContent"]
    assert kept["info"] == {"name": "n" * 256, "version": "1"}
    assert len(kept["capabilities"]) == 32  # names kept, two levels deep, no more
    assert kept["capabilities"]["elicitation"] == {"form": {}}  # all that is read of it
    assert kept["capabilities"]["k0"] == {"flag": True, "more": {}}
    assert len(json.dumps(kept)) < 4_000  # of a 3.5 MB initialize
    server.opened.append(("127.0.0.1", headers))
    pinned_question(http, headers, 5)  # it still declares elicitation: the gated call asks


def sessions_anonymous_flood(server: Server) -> None:
    http = server.client()
    alice = server.session(key="alice")
    for n in range(2, 30):  # 28 anonymous callers, sessions for 6 in all
        server.session(f"127.0.0.{n}")
    assert http.post("/mcp", json=rpc("ping"), headers=alice).status_code == 200  # never pushed out


def sessions_per_anonymous_caller(server: Server) -> None:
    http = server.client("127.0.0.2")
    first = server.session("127.0.0.2")
    for _ in range(3):
        server.session("127.0.0.2")
    assert http.post("/mcp", json=rpc("ping"), headers=first).status_code == 404  # its own oldest went
    other = server.session("127.0.0.3")  # another anonymous caller is its own caller
    for _ in range(2):
        server.session("127.0.0.2")
    assert server.client("127.0.0.3").post("/mcp", json=rpc("ping"), headers=other).status_code == 200


def tokens_made_up_keys(server: Server) -> None:
    alice = server.session(key="alice")
    token = pending_of(call_tool(server.client(), "place_order", {"item": "tea"}, headers=alice))["token"]
    http = server.client("127.0.0.2")
    for n in range(10):  # keys nobody checks count as one caller per address: its own tokens go
        headers = server.session("127.0.0.2", key=f"made-up-{n}")
        assert pending_of(call_tool(http, "place_order", {"item": "x"}, headers=headers))["pending"]
    confirmed = call_tool(server.client(), "place_order", {"item": "tea", "confirmationToken": token}, headers=alice)
    assert confirmed["structuredContent"] == {"placed": "tea"}


def sessions_made_up_keys(server: Server) -> None:
    alice = server.session(key="alice")
    for n in range(20):  # the same: past max_per_caller, the address's own oldest sessions go
        server.session("127.0.0.2", key=f"made-up-{n}")
    assert server.client().post("/mcp", json=rpc("ping"), headers=alice).status_code == 200


def sessions_claimed_full(server: Server) -> None:
    for n in range(3, 9):
        server.session(f"127.0.0.{n}", key=f"k{n}")
    refused = server.client("127.0.0.2").post("/mcp", json=initialize(), headers=HEADERS)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "30"
    assert "Sessions.max_sessions" in refused.json()["error"]["message"]
    assert refused.json()["id"] == 0


def sessions_credentialed_flood(server: Server) -> None:
    for n in range(3, 23):  # twice the total, from callers with checked keys
        server.session(f"127.0.0.{n}", key=f"k{n}")
    for n in (30, 31):  # the tenth kept for anonymous callers: each pushes out the other
        server.session(f"127.0.0.{n}")


def sessions_made_up_flood(server: Server) -> None:
    alice = server.session(key="alice")
    for n in range(2, 14):  # made-up keys from twelve addresses: anonymous, so alice stays
        for m in range(3):
            server.session(f"127.0.0.{n}", key=f"made-up-{n}-{m}")
    assert server.client().post("/mcp", json=rpc("ping"), headers=alice).status_code == 200
    assert server.client("127.0.0.40").post("/mcp", json=initialize(), headers=HEADERS).status_code == 200


def tokens_made_up_flood(server: Server) -> None:
    alice = server.session(key="alice")
    token = pending_of(call_tool(server.client(), "place_order", {"item": "tea"}, headers=alice))["token"]
    for n in range(2, 8):  # made-up keys from six addresses fill the anonymous share, never alice's token
        headers = server.session(f"127.0.0.{n}", key=f"made-up-{n}")
        call_tool(server.client(f"127.0.0.{n}"), "place_order", {"item": "x"}, headers=headers)
    confirmed = call_tool(server.client(), "place_order", {"item": "tea", "confirmationToken": token}, headers=alice)
    assert confirmed["structuredContent"] == {"placed": "tea"}


@dataclass(frozen=True)
class Row:
    name: str
    attack: Callable[[Server], None]
    limits: Limits = field(default_factory=Limits)
    sessions: Sessions = field(default_factory=Sessions)


SMALL_BATCH = Limits(max_batch_answer_bytes=100_000)
FEW_ANSWER_BYTES = Limits(max_answer_bytes_per_caller=100_000)
FEW_ANSWER_BYTES_IN_ALL = Limits(max_answer_bytes=200_000)
TINY_ANSWER_BYTES = Limits(max_answer_bytes_per_caller=30_000)
FEW_QUESTIONS = Limits(max_questions_per_session=2, max_questions_per_caller=4)
FEW_QUESTIONS_IN_ALL = Limits(max_questions=5)
FEW_TOKENS = Limits(max_tokens=4, max_tokens_per_caller=2)
FEW_SESSIONS = Sessions(max_sessions=6, max_per_caller=3)
TEN_SESSIONS = Sessions(max_sessions=10, max_per_caller=3)  # the least that keeps a floor for anonymous callers

ROWS = [
    Row("a batch longer than max_batch_length -> 400 naming it", batch_too_long),
    Row(
        "a batch whose answers outgrow max_batch_answer_bytes -> the rest not run", batch_answer_too_large, SMALL_BATCH
    ),
    Row(
        "a batch past max_answer_bytes_per_caller -> the rest end with errors",
        batch_past_answer_bytes_per_caller,
        FEW_ANSWER_BYTES,
    ),
    Row(
        "anonymous answers past their share of max_answer_bytes -> refused",
        batch_past_anonymous_share_of_answer_bytes,
        FEW_ANSWER_BYTES_IN_ALL,
    ),
    Row(
        "a response past max_answer_bytes_per_caller -> an error, both eras",
        call_past_answer_bytes_per_caller,
        TINY_ANSWER_BYTES,
    ),
    Row(
        "a sample past max_answer_bytes_per_caller -> cut short, truncated",
        sample_past_answer_bytes_per_caller,
        TINY_ANSWER_BYTES,
    ),
    Row("questions past max_questions_per_session -> refused to the route", questions_per_session, FEW_QUESTIONS),
    Row("questions past max_questions_per_caller -> refused to the route", questions_per_caller, FEW_QUESTIONS),
    Row("questions past their share of max_questions -> refused to the route", questions_in_all, FEW_QUESTIONS_IN_ALL),
    Row(
        "an answer over max_replay_bytes_per_session -> live, not kept",
        replay_bytes_per_session,
        Limits(max_replay_bytes_per_session=30_000),
    ),
    Row("streams past max_replay_bytes -> the oldest finished go", replay_bytes_in_all, Limits(max_replay_bytes=300)),
    Row("an anonymous token flood -> a credentialed token survives", tokens_anonymous_flood, FEW_TOKENS),
    Row("tokens full of credentialed callers -> anonymous refused", tokens_claimed_full, FEW_TOKENS),
    Row("made-up API keys from one address -> count as one caller", tokens_made_up_keys, FEW_TOKENS),
    Row("an initialize carrying megabytes -> the session keeps a few names", initialize_carrying_megabytes),
    Row(
        "an anonymous session flood -> a credentialed session survives", sessions_anonymous_flood, sessions=FEW_SESSIONS
    ),
    Row(
        "one address's sessions past max_per_caller -> its own oldest go",
        sessions_per_anonymous_caller,
        sessions=FEW_SESSIONS,
    ),
    Row("sessions full of credentialed callers -> anonymous 503", sessions_claimed_full, sessions=FEW_SESSIONS),
    Row("sessions under made-up API keys -> one caller per address", sessions_made_up_keys, sessions=FEW_SESSIONS),
    Row(
        "a flood of made-up API keys -> a checked key's session survives", sessions_made_up_flood, sessions=FEW_SESSIONS
    ),
    Row("a flood of made-up API keys -> a checked key's token survives", tokens_made_up_flood, FEW_TOKENS),
    Row(
        "sessions flooded by checked keys -> anonymous callers keep their floor",
        sessions_credentialed_flood,
        sessions=TEN_SESSIONS,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_past_the_bound_the_caller_is_refused_and_others_are_served(row: Row) -> None:
    with server(row.limits, row.sessions) as running:
        row.attack(running)
        running.served()


# -- an answer its client does not read ------------------------------------------------------

# An answer holds a route's text twice (content and structuredContent). The unread answer, about
# 600,000 bytes, and a polling call's response (100,000) pass the caller's bound; the polling
# call's response and answer with the unread call's response (300,000) do not, so a poll never
# crowds out the unread call.
UNREAD_TEXT, POLL_TEXT = 300_000, 100_000
UNREAD_LIMITS = Limits(max_answer_bytes_per_caller=650_000)


def unread_app() -> FastAPI:
    app = FastAPI()
    app.include_router(mcp_routes(app, limits=UNREAD_LIMITS))

    @mcp_tool()
    @app.get("/bulky")
    def bulky(size: int) -> dict[str, str]:
        return {"text": "x" * size}

    return app


def unread_post(base_url: str, message: dict[str, Any], headers: Mapping[str, str]) -> socket.socket:
    """POST `message` from 127.0.0.1 with a receive window as small as the kernel allows, and
    read nothing: its answer stays in the server, being written."""
    url = httpx.URL(base_url)
    body = json.dumps(message).encode()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect(("127.0.0.1", url.port))
    sent = {**headers, "host": f"127.0.0.1:{url.port}", "content-length": str(len(body))}
    head = "".join(f"{name}: {value}\r\n" for name, value in sent.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\n{head}\r\n".encode() + body)
    return sock


def poll(http: httpx.Client, era: str, session: dict[str, str]) -> dict[str, Any]:
    """A `bulky` call of `POLL_TEXT` characters; its result."""
    arguments = {"size": POLL_TEXT}
    if era == "session":
        return call_tool(http, "bulky", arguments, headers=session, request_id=2)  # not the unread call's id
    result: dict[str, Any] = post_stateless(http, "tools/call", {"name": "bulky", "arguments": arguments}).json()[
        "result"
    ]
    return result


@pytest.mark.parametrize("era", ["session", "stateless"])
def test_an_answer_its_client_does_not_read_stays_counted_until_the_client_is_gone(era: str) -> None:
    with (
        serve(unread_app(), send_buffer_bytes=16 * 1024) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
        httpx.Client(base_url=url, timeout=WAIT_S, transport=httpx.HTTPTransport(local_address="127.0.0.2")) as other,
    ):
        unread_call = {"name": "bulky", "arguments": {"size": UNREAD_TEXT}}
        if era == "session":
            session = open_session(http)
            unread = unread_post(url, rpc("tools/call", unread_call), session)
        else:
            session = {}
            unread = unread_post(
                url, stateless_request("tools/call", unread_call), stateless_headers("tools/call", "bulky")
            )
        polled = {"text": "x" * POLL_TEXT}
        with unread:
            refused: dict[str, Any] = {}
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:  # until the unread answer is being written
                result = poll(http, era, session)
                if result.get("isError"):
                    refused = result
                    break
                assert result["structuredContent"] == polled
                time.sleep(0.2)
            assert refused, "the caller's call was never refused while its unread answer was being written"
            assert "(Limits.max_answer_bytes_per_caller)" in refused["content"][0]["text"]
            # Another caller is served meanwhile.
            others = open_session(other) if era == "session" else {}
            assert poll(other, era, others)["structuredContent"] == polled
        # The client gone, its answer's bytes are given back: the caller is served again.
        deadline = time.monotonic() + WAIT_S
        while poll(http, era, session).get("isError") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert poll(http, era, session)["structuredContent"] == polled
