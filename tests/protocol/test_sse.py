"""SSE framing and the incremental parser."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uistream_app.protocol.sse import (
    DONE_FRAME,
    KEEPALIVE_FRAME,
    SSEParser,
    comment_frame,
    data_frame,
    parse_sse,
)


@pytest.mark.parametrize(
    ("payload", "frame"),
    [
        (b'{"type":"start"}', b'data: {"type":"start"}\n\n'),
        (b"a\nb", b"data: a\ndata: b\n\n"),
        (b"a\r\nb\rc", b"data: a\ndata: b\ndata: c\n\n"),
        (b"", b"data: \n\n"),
    ],
)
def test_data_frame(payload: bytes, frame: bytes) -> None:
    assert data_frame(payload) == frame


def test_fixed_frames() -> None:
    assert DONE_FRAME == b"data: [DONE]\n\n"
    assert KEEPALIVE_FRAME == comment_frame() == b": keep-alive\n\n"
    with pytest.raises(ValueError, match="one line"):
        comment_frame("a\nb")


BODY = (
    "\ufeffdata: one\r\n\r\n: keep-alive\n\nevent: x\nid: 7\ndata: two\ndata: lines\r\rdata:no-space\n\ndata: é🤖\n\n"
)


def test_parser_reads_every_line_ending_comment_and_field() -> None:
    parser = SSEParser()
    events = parser.feed(BODY.encode())
    assert [e.data for e in events] == ["one", "two\nlines", "no-space", "é🤖"]
    assert events[1].event == "x"
    assert events[1].id == "7"
    assert parser.comments == ["keep-alive"]
    assert parser.close()


@given(st.lists(st.integers(min_value=0, max_value=len(BODY.encode())), max_size=8))
def test_parser_gives_the_same_events_however_the_reads_split(cuts: list[int]) -> None:
    raw = BODY.encode()
    bounds = [0, *sorted(cuts), len(raw)]
    parser = SSEParser()
    events = []
    for a, b in itertools.pairwise(bounds):
        events.extend(parser.feed(raw[a:b]))
    assert [e.data for e in events] == ["one", "two\nlines", "no-space", "é🤖"]
    assert parser.close()


def test_an_event_without_its_blank_line_is_not_dispatched() -> None:
    assert [e.data for e in SSEParser().feed(b"data: a\n\ndata: cut")] == ["a"]
    with pytest.raises(ValueError, match="middle of an event"):
        parse_sse(b"data: a\n\ndata: cut\n")


def test_a_truncated_utf8_sequence_is_not_a_clean_end() -> None:
    parser = SSEParser()
    parser.feed("data: é\n\n".encode()[:7])
    assert not parser.close()
