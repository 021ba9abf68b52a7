"""Long-lived streams against a real server: each bound on what callers hold open, pushed past
and refused, with others still served; and streams woken by their news, not by a timer.

The table's app holds at most two streams per caller, one resume per session and four streams
in all (`Limits`), of which callers without verified credentials hold three, anonymous ones two.
The app checks `x-api-key` (`Limits.verify_credentials`): a made-up key, one it refuses, counts
as anonymous, by client address, so each caller here connects from an address of its own
(loopback is a whole /8 on Linux). Each row gets a server of its own, so streams a row leaves
to the server's noticing never reach the next row."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI

from fastapi_mcp_routes import Limits, Sessions, mcp_tool
from fastapi_mcp_routes.transport.listen import WRITE_STALL_KEEP_ALIVES
from fastapi_mcp_routes.transport.stateless import SUBSCRIBE
from tests.support.apps import Context, observed, streaming_app
from tests.support.jsonrpc import open_session, rpc, tool_call
from tests.support.servers import serve
from tests.support.sse import iter_sse_messages, read_to_first_message
from tests.support.stateless import stateless_headers, stateless_request
from tests.support.waits import WAIT_S


def checked_key(headers: Mapping[str, str]) -> bool:
    """The app's check of a key: every key but a made-up one."""
    return not headers.get("x-api-key", "made-up").startswith("made-up")


LIMITS = Limits(max_streams_per_caller=2, max_streams=4, max_resumes_per_session=1, verify_credentials=checked_key)
RETRY_AFTER = "30"
LISTEN = {"notifications": {"toolsListChanged": True}}
SSE = {"accept": "text/event-stream"}


@dataclass
class Peer:
    """HTTP clients on one server, one per caller, holding open the streams a row opens."""

    http: httpx.Client
    streams: ExitStack
    clients: dict[str, httpx.Client] = field(default_factory=dict)

    def client(self, key: str) -> httpx.Client:
        """The client of the caller with this key, from an address of its own; a key that
        starts with `~` only names an anonymous caller, and is never sent."""
        if key not in self.clients:
            transport = httpx.HTTPTransport(local_address=f"127.0.1.{len(self.clients) + 1}")
            client = httpx.Client(base_url=self.http.base_url, timeout=WAIT_S, transport=transport)
            self.clients[key] = self.streams.enter_context(client)
        return self.clients[key]

    def session(self, key: str) -> dict[str, str]:
        """A session of the caller with this key; the headers its requests carry."""
        opened = open_session(self.client(key), headers=_credentials(key))
        return {**opened, "x-caller": key}  # which client it is, in a header the server ignores

    def get(self, session: dict[str, str], **extra: str) -> httpx.Response:
        """A GET stream of the session (with `last-event-id`, a resume), held open when accepted."""
        return self._open(session["x-caller"], "GET", "/mcp", headers={**session, **SSE, **extra})

    def listen(self, key: str, request_id: int = 1) -> httpx.Response:
        """A 2026-07-28 subscriptions/listen of the caller with this key, held open when accepted."""
        message = {**stateless_request("subscriptions/listen", LISTEN), "id": request_id}
        headers = {**stateless_headers("subscriptions/listen"), **_credentials(key)}
        return self._open(key, "POST", "/mcp", json=message, headers=headers)

    def _open(self, key: str, method: str, url: str, **options: Any) -> httpx.Response:
        response = self.streams.enter_context(self.client(key).stream(method, url, **options))
        if response.status_code != 200:
            response.read()
        return response


def _credentials(key: str) -> dict[str, str]:
    return {} if key.startswith("~") else {"x-api-key": key}


def refused(response: httpx.Response, status: int, bound: str, request_id: int | None = None) -> None:
    """The refusal of a stream past `bound`: its status, Retry-After, and a JSON-RPC error naming it."""
    assert response.status_code == status
    assert response.headers["retry-after"] == RETRY_AFTER
    body = response.json()
    assert body["id"] == request_id
    assert body["error"]["code"] == -32600
    assert f"(Limits.{bound})" in body["error"]["message"]


def ended(response: httpx.Response) -> None:
    """Read a stream to its end (bounded by the client's timeout)."""
    for _ in response.iter_bytes():
        pass


# -- the rows --------------------------------------------------------------------------------


def get_streams_past_the_callers_bound(peer: Peer) -> None:
    alice = [peer.session("alice") for _ in range(3)]
    first = peer.get(alice[0])
    assert first.status_code == 200
    assert peer.get(alice[1]).status_code == 200
    refused(peer.get(alice[2]), 429, "max_streams_per_caller")
    assert peer.get(peer.session("bob")).status_code == 200  # another caller is still served
    # A stream that ended gave its slot back by the time its client sees the end.
    assert peer.client("alice").delete("/mcp", headers=alice[0]).status_code == 204
    ended(first)
    assert peer.get(alice[2]).status_code == 200


def listen_streams_past_the_callers_bound(peer: Peer) -> None:
    assert peer.listen("alice").status_code == 200
    assert peer.listen("alice").status_code == 200
    refused(peer.listen("alice", request_id=7), 429, "max_streams_per_caller", request_id=7)
    assert peer.listen("bob").status_code == 200


def get_and_listen_streams_share_the_callers_bound(peer: Peer) -> None:
    assert peer.get(peer.session("alice")).status_code == 200
    assert peer.listen("alice").status_code == 200
    refused(peer.get(peer.session("alice")), 429, "max_streams_per_caller")
    refused(peer.listen("alice", request_id=3), 429, "max_streams_per_caller", request_id=3)


def resumes_past_the_sessions_bound(peer: Peer) -> None:
    observed.gate.clear()
    session = peer.session("alice")
    call = tool_call("gated", progress_token="r")
    with peer.client("alice").stream("POST", "/mcp", json=call, headers=session) as dropped:
        last_id = read_to_first_message(dropped)  # the connection drops after the first event
    assert last_id is not None
    resumed = peer.get(session, **{"last-event-id": last_id})
    assert resumed.status_code == 200
    refused(peer.get(session, **{"last-event-id": last_id}), 429, "max_resumes_per_session")
    assert peer.get(session).status_code == 200  # the session's own GET stream is no resume
    # The answer ends the resume, which gives its slot back.
    observed.gate.set()
    assert [m["result"]["structuredContent"] for m in iter_sse_messages(resumed.iter_lines()) if "result" in m] == [
        {"opened": True}
    ]
    with peer.client("alice").stream("GET", "/mcp", headers={**session, **SSE, "last-event-id": last_id}) as again:
        assert again.status_code == 400  # delivered whole, so forgotten: refused, but not for the bound


def streams_past_the_total_bound(peer: Peer) -> None:
    # Callers without verified credentials hold three of the four: the rest is kept for
    # principals `auth=` verified.
    for key in ("a", "b"):
        assert peer.listen(key).status_code == 200
    assert peer.get(peer.session("c")).status_code == 200
    refused(peer.get(peer.session("d")), 503, "max_streams")
    refused(peer.listen("d", request_id=5), 503, "max_streams", request_id=5)


def anonymous_streams_past_their_share(peer: Peer) -> None:
    # Anonymous callers (told apart by address only) hold two of the four.
    assert peer.listen("~1").status_code == 200
    assert peer.get(peer.session("~2")).status_code == 200
    refused(peer.listen("~3", request_id=4), 503, "max_streams", request_id=4)
    assert peer.listen("alice").status_code == 200  # a caller with credentials still gets one


def made_up_keys_stream_as_anonymous_callers(peer: Peer) -> None:
    assert peer.listen("made-up-1").status_code == 200
    assert peer.get(peer.session("made-up-2")).status_code == 200
    refused(peer.listen("made-up-3", request_id=4), 503, "max_streams", request_id=4)
    refused(peer.get(peer.session("~4")), 503, "max_streams")
    assert peer.listen("alice").status_code == 200  # a key the app checked still gets one


ROWS: list[tuple[str, Callable[[Peer], None]]] = [
    ("GET streams past the caller's bound -> 429", get_streams_past_the_callers_bound),
    ("subscriptions/listen past the caller's bound -> 429 with its id", listen_streams_past_the_callers_bound),
    ("GET and listen streams share the caller's bound -> 429", get_and_listen_streams_share_the_callers_bound),
    ("resumes past the session's bound -> 429", resumes_past_the_sessions_bound),
    ("streams past the total bound -> 503", streams_past_the_total_bound),
    ("anonymous streams past their share of the total -> 503", anonymous_streams_past_their_share),
    ("made-up keys' streams take the anonymous share -> 503", made_up_keys_stream_as_anonymous_callers),
]


def test_streams_of_checked_keys_leave_the_floor_to_anonymous_callers() -> None:
    limits = Limits(max_streams_per_caller=2, max_streams=10, verify_credentials=checked_key)
    app = streaming_app(limits=limits)
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http, ExitStack() as streams:
        peer = Peer(http, streams)
        # Checked keys may fill the share of callers without a verified principal (seven of
        # ten) but for the tenth kept for anonymous callers: six.
        for index in range(6):
            assert peer.listen(f"k{index // 2}", request_id=index).status_code == 200
        full = peer.listen("k3", request_id=6)
        refused(full, 503, "max_streams", request_id=6)
        assert "for callers with credentials" in full.json()["error"]["message"]
        assert peer.listen("~anonymous").status_code == 200


@pytest.mark.parametrize("attack", [row[1] for row in ROWS], ids=[row[0] for row in ROWS])
def test_the_stream_past_the_bound_is_refused_and_the_server_keeps_serving(attack: Callable[[Peer], None]) -> None:
    app = streaming_app(limits=LIMITS)
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http, ExitStack() as streams:
        attack(Peer(http, streams))
        # With the row's streams still open, a fresh session is answered.
        fresh = open_session(http, headers={"x-api-key": "zoe"})
        pong = http.post("/mcp", json=rpc("ping", request_id=9), headers=fresh)
        assert pong.json() == {"jsonrpc": "2.0", "id": 9, "result": {}}
        answer = http.post("/mcp", json=tool_call("plain"), headers=fresh).json()
        assert answer["result"]["structuredContent"] == {"is_tool_call": True, "session": True}


# -- slots held while a stream lives ----------------------------------------------------------


def test_an_open_stream_renews_its_slot_as_it_keeps_alive() -> None:
    # Keep-alives every 0.5 s (room for a late renewal on a busy machine): a slot lapses after
    # three missed renewals (1.5 s), so a slot not renewed would be gone after the five
    # keep-alives read below.
    app = streaming_app(limits=Limits(keep_alive_s=0.5, max_streams_per_caller=1))
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http, ExitStack() as streams:
        peer = Peer(http, streams)
        first = peer.listen("alice")
        lines = first.iter_lines()
        comments = 0
        while comments < 5:
            comments += next(lines).startswith(": keep-alive")
        refused(peer.listen("alice", request_id=2), 429, "max_streams_per_caller", request_id=2)


# Keep-alives a second apart, and sessions renewed every 0.3 s (half their idle time): a slot
# not renewed lapses 0.9 s after its last renewal, well before a stalled write is given up on
# (`WRITE_STALL_KEEP_ALIVES` intervals), so a lapse in between lets a third stream in.
STALLING = Limits(keep_alive_s=1, max_streams_per_caller=2)
ALICE, BOB = "127.0.1.1", "127.0.1.2"  # each caller counted by its own address
# Replayed events far larger than the socket buffers between the server and a client that
# never reads: the server's kernel send buffer (`SEND_BUFFER`), uvicorn's (64 KiB), the client's.
BULKY_EVENTS, BULKY_BYTES = 100, 8 * 1024
SEND_BUFFER = 16 * 1024


def never_reading_get(base_url: str, headers: dict[str, str]) -> socket.socket:
    """A GET from ALICE whose client reads the status line (asserting 200), then nothing more,
    with a receive buffer as small as the kernel allows."""
    url = httpx.URL(base_url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.settimeout(WAIT_S)
    sock.bind((ALICE, 0))
    sock.connect((url.host, url.port))
    lines = ["GET /mcp HTTP/1.1", f"host: {url.host}:{url.port}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    status = b""
    while not status.endswith(b"\r\n"):  # one byte at a time: not one byte of the body
        status += sock.recv(1)
    assert status.startswith(b"HTTP/1.1 200"), status
    return sock


def test_a_resume_whose_client_never_reads_holds_its_slot_until_the_stalled_stream_is_ended() -> None:
    released = threading.Event()
    app = streaming_app(limits=STALLING, sessions=Sessions(idle_s=0.6))

    @mcp_tool()
    @app.get("/bulky")
    async def bulky(ctx: Context) -> dict[str, bool]:
        for _ in range(BULKY_EVENTS):
            await ctx.log("info", "x" * BULKY_BYTES)
        return {"released": await anyio.to_thread.run_sync(released.wait, WAIT_S)}

    with (
        serve(app, send_buffer_bytes=SEND_BUFFER) as url,
        httpx.Client(base_url=url, timeout=WAIT_S) as http,
        httpx.Client(base_url=url, timeout=WAIT_S, transport=httpx.HTTPTransport(local_address=ALICE)) as alice,
        httpx.Client(base_url=url, timeout=WAIT_S, transport=httpx.HTTPTransport(local_address=BOB)) as bob,
        ExitStack() as held,
    ):
        held.callback(released.set)
        session = open_session(http)
        with http.stream("POST", "/mcp", json=tool_call("bulky"), headers=session) as dropped:
            last_id = read_to_first_message(dropped)
        assert last_id is not None
        resume = {**session, **SSE, "last-event-id": last_id}
        stalled = [held.enter_context(never_reading_get(url, resume)) for _ in range(2)]
        # Bob's stream keeps time: a keep-alive each second.
        message = {**stateless_request("subscriptions/listen", LISTEN), "id": 1}
        listen = held.enter_context(bob.stream("POST", "/mcp", json=message, headers=stateless_headers(SUBSCRIBE)))
        seconds = (line for line in listen.iter_lines() if line.startswith(": keep-alive"))

        def alices_next_stream() -> httpx.Response:
            """A GET stream of a new session of alice's, held open when accepted."""
            response = held.enter_context(alice.stream("GET", "/mcp", headers={**open_session(alice), **SSE}))
            if response.status_code != 200:
                response.read()
            return response

        for _ in range(3):  # past the slots' lapse, had renewals stopped with the writes
            next(seconds)
        refused(alices_next_stream(), 429, "max_streams_per_caller")
        # Given up on, the stalled streams end and give their slots back.
        for _ in range(WRITE_STALL_KEEP_ALIVES * 3):
            next(seconds)
            if (third := alices_next_stream()).status_code == 200:
                break
        assert third.status_code == 200
        for sock in stalled:  # the server ended them: read at last, each reaches its end
            while sock.recv(65536):
                pass


# -- woken by the news, not by a timer -------------------------------------------------------


def late_route(app: FastAPI) -> None:
    @mcp_tool()
    @app.get("/late")
    def late() -> dict[str, str]:
        return {"late": "yes"}


def test_a_tool_list_change_reaches_an_open_get_stream_and_an_open_listen_stream() -> None:
    app = streaming_app()
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http, ExitStack() as streams:
        peer = Peer(http, streams)
        get = peer.get(peer.session("alice"))
        listen = peer.listen("bob", request_id=4)
        listened = iter_sse_messages(listen.iter_lines())
        assert next(listened)["method"] == "notifications/subscriptions/acknowledged"
        late_route(app)
        assert next(iter_sse_messages(get.iter_lines())) == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
        }
        assert next(listened) == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": 4}},
        }


def test_a_tools_list_that_sees_the_change_wakes_the_listeners() -> None:
    app = streaming_app()
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http, ExitStack() as streams:
        peer = Peer(http, streams)
        session = peer.session("alice")
        get = peer.get(session)
        late_route(app)
        listed = http.post("/mcp", json=rpc("tools/list"), headers=session).json()["result"]["tools"]
        assert "late" in {tool["name"] for tool in listed}
        assert next(iter_sse_messages(get.iter_lines()))["method"] == "notifications/tools/list_changed"


def test_a_resume_is_woken_by_each_new_event_of_its_stream() -> None:
    released = threading.Event()
    app = streaming_app()

    @mcp_tool()
    @app.get("/stepping")
    async def stepping(ctx: Context) -> dict[str, int]:
        await ctx.report_progress(1)
        await anyio.to_thread.run_sync(released.wait, WAIT_S)
        await ctx.report_progress(2)
        return {"steps": 2}

    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        session = open_session(http)
        call = tool_call("stepping", progress_token="s")
        with http.stream("POST", "/mcp", json=call, headers=session) as dropped:
            last_id = read_to_first_message(dropped)
        assert last_id is not None
        with http.stream("GET", "/mcp", headers={**session, **SSE, "last-event-id": last_id}) as resumed:
            messages = iter_sse_messages(resumed.iter_lines())
            released.set()  # the route sends its next events only now, while the resume waits
            assert next(messages)["params"]["progress"] == 2
            assert next(messages)["result"]["structuredContent"] == {"steps": 2}


# Keep-alives (and the session checks made with them) a minute apart: only the announcement of
# the session's end can end these streams within the client's timeout.
QUIET = Limits(keep_alive_s=60)


def test_a_get_stream_ends_when_its_session_is_deleted() -> None:
    with serve(streaming_app(limits=QUIET)) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        session = open_session(http)
        with http.stream("GET", "/mcp", headers={**session, **SSE}) as stream:
            assert stream.status_code == 200
            assert http.delete("/mcp", headers=session).status_code == 204
            assert list(stream.iter_lines()) == []


def test_a_get_stream_ends_when_its_session_is_pushed_out() -> None:
    app = streaming_app(sessions=Sessions(max_per_caller=1), limits=QUIET)
    with serve(app) as url, httpx.Client(base_url=url, timeout=WAIT_S) as http:
        first = open_session(http, headers={"x-api-key": "alice"})
        with http.stream("GET", "/mcp", headers={**first, **SSE}) as stream:
            assert stream.status_code == 200
            open_session(http, headers={"x-api-key": "alice"})  # alice's second pushes out her first
            assert list(stream.iter_lines()) == []
        assert http.post("/mcp", json=rpc("ping"), headers=first).status_code == 404
