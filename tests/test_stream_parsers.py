"""The frames a sample takes from a streamed body: server-sent events (WHATWG HTML, "Parsing an
event stream") and JSON Lines, however the body is cut into chunks."""

from __future__ import annotations

import pytest

from fastapi_mcp_routes.tools.streams import LineParser, SseParser, WindowBounds, describe
from fastapi_mcp_routes.wire.errors import ToolError

EVENTS = (
    b": keep-alive\r\n\r\n"
    b'event: update\r\nid: 7\r\nretry: 1500\r\ndata: {"n": 1}\r\n\r\n'
    b"data: first line\ndata: second line\n\n"
    b"data:no space\rretry: soon\r\r"
    b"id: 9\n\n"  # no data: no event
    b"data: not finished"
)


def fed_in_pieces(parser: SseParser | LineParser, body: bytes, size: int) -> list[object]:
    frames: list[object] = []
    for start in range(0, len(body), size):
        frames += parser.feed(body[start : start + size])
    return frames + parser.end()


@pytest.mark.parametrize("size", [1, 2, 7, len(EVENTS)])
def test_server_sent_events_are_parsed_whatever_the_chunks(size: int) -> None:
    assert fed_in_pieces(SseParser(), EVENTS, size) == [
        {"data": {"n": 1}, "event": "update", "id": "7", "retry": 1500},
        {"data": "first line\nsecond line"},
        {"data": "no space"},
    ]


@pytest.mark.parametrize(
    "chunks",
    [
        [b"data: a\r", b"data: b", b"\n\n"],
        [b"data: a\r", b"data: b\r", b"\r"],
        [b"data: a", b"\rdata: b\r\n", b"\r\n"],
    ],
)
def test_a_lone_cr_ends_a_line_whichever_chunk_brings_what_follows(chunks: list[bytes]) -> None:
    parser = SseParser()
    frames = [frame for chunk in chunks for frame in parser.feed(chunk)] + parser.end()
    assert frames == [{"data": "a\nb"}]


def test_an_event_left_unfinished_is_pending_and_never_dispatched() -> None:
    parser = SseParser()
    assert parser.feed(b"data: half") == []
    assert parser.pending == len(b"data: half")
    assert parser.end() == []


@pytest.mark.parametrize("size", [1, 5, 1000])
def test_json_lines_are_parsed_whatever_the_chunks_and_a_last_line_without_newline_counts(size: int) -> None:
    body = b'{"a": 1}\n\n[1, 2]\nplain text\n  \n"quoted"'
    assert fed_in_pieces(LineParser(), body, size) == [{"a": 1}, [1, 2], "plain text", "quoted"]


def test_the_window_is_clamped_to_its_bounds_and_defaults_when_not_given() -> None:
    windows = WindowBounds(default_ms=300, max_ms=1000, max_frames=5)
    assert windows.window({}) == windows.window({"durationMs": 300, "maxFrames": 5})
    clamped = windows.window({"durationMs": 60_000, "maxFrames": 10_000})
    assert (clamped.duration_s, clamped.max_frames) == (1.0, 5)
    assert windows.window({"durationMs": 250.0}).duration_s == 0.25


@pytest.mark.parametrize("value", [0, -5, "abc", 1.5, True, None])
def test_a_window_that_is_not_a_positive_whole_number_is_refused(value: object) -> None:
    with pytest.raises(ToolError, match="durationMs"):
        WindowBounds().window({"durationMs": value})


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"default_ms": 0}, "default_subscribe_ms"),
        ({"max_ms": -1}, "max_subscribe_ms"),
        ({"max_frames": 0}, "max_subscribe_frames"),
        ({"default_ms": 5000, "max_ms": 1000}, "default_subscribe_ms must not exceed max_subscribe_ms"),
    ],
)
def test_invalid_stream_window_options_are_refused_naming_the_option(options: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        WindowBounds(**options)


def test_a_frame_in_a_progress_message_is_short_and_on_one_line() -> None:
    assert describe({"data": {"n": 1}}) == '{"n":1}'
    assert describe("line\nbreak") == "line break"
    assert len(describe("x" * 500)) == 80
