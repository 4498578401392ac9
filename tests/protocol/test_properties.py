"""Property tests: whatever a source does, the stream stays well formed.

Any sequence of source events, in any order, duplicated or cut short,
encodes to a stream that (1) ends framed, (2) our reader accepts for every
client version, and (3) the real ai@7 client parses into the same message
our reader builds (a few hundred generated streams go through Node).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import DONE_FRAME, parse_sse
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.protocol.ui.stream import encode_events

from ..conftest import JS_DIR

# Integers a browser holds exactly (JSON numbers are doubles there).
SAFE_INT = st.integers(-(2**53) + 1, 2**53 - 1)
CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
TEXT = st.text(max_size=6)
JSONISH = st.sampled_from(['{"a": 1}', "{", '"s"', "", "[1, 2]", "not json", '{"b": "é"}'])

EVENT = st.one_of(
    st.builds(ev.TextDelta, TEXT),
    st.builds(ev.ReasoningDelta, TEXT),
    st.just(ev.TextEnd()),
    st.just(ev.ReasoningEnd()),
    st.builds(ev.ToolCallStart, CALL_IDS, st.sampled_from(["lookup", "calc"])),
    st.builds(ev.ToolCallDelta, CALL_IDS, JSONISH),
    st.builds(ev.ToolCall, CALL_IDS, st.sampled_from(["lookup", "calc"]), JSONISH),
    st.builds(ev.ToolResult, CALL_IDS, JSONISH, st.booleans()),
    st.builds(ev.ToolResult, CALL_IDS, JSONISH, preliminary=st.just(True)),
    st.builds(ev.ToolInputError, CALL_IDS, st.just("calc"), JSONISH, st.just("bad input")),
    st.builds(ev.ToolApprovalRequest, st.sampled_from(["ap1", "ap2"]), CALL_IDS, is_automatic=st.booleans()),
    st.builds(ev.ToolApprovalResponse, st.sampled_from(["ap1", "ap2"]), st.booleans(), st.sampled_from([None, "why"])),
    st.builds(ev.ToolDenied, CALL_IDS),
    st.builds(ev.Finish, st.sampled_from(["stop", "tool_calls", "length", "weird"])),
    st.builds(ev.StepFinished, st.integers(0, 3)),
    st.builds(ev.Usage, st.integers(0, 9), st.integers(0, 9)),
    st.builds(ev.Data, st.sampled_from(["status", "x"]), SAFE_INT, st.sampled_from([None, "d1"]), st.booleans()),
    st.builds(ev.SourceUrl, st.sampled_from(["s1", "s2"]), st.just("https://example.com/")),
    st.builds(ev.File, st.just("data:text/plain,hi"), st.just("text/plain")),
    st.builds(ev.MessageMetadata, st.dictionaries(st.sampled_from(["a", "b"]), SAFE_INT, max_size=2)),
)
# How the source ends: Done, an exception, or it just stops.
ENDING = st.sampled_from(["done", "raise", "stop", "done-reason"])


class SourceFailure(Exception):
    pass


def source(events: list[ev.Event], ending: str):  # type: ignore[no-untyped-def]
    yield from events
    if ending == "done":
        yield ev.Done()
    elif ending == "done-reason":
        yield ev.Done("interrupted")
    elif ending == "raise":
        raise SourceFailure("secret detail")


def encode(events: list[ev.Event], ending: str, version: int) -> bytes:
    renderer = UIStreamRenderer(version)
    chunks = list(encode_events(source(events, ending)))
    return renderer.render_many(chunks) + renderer.done()


def read(body: bytes) -> UIMessageReader:
    reader = UIMessageReader()
    for event in parse_sse(body):
        if event.data != "[DONE]":
            reader.feed(json.loads(event.data))
    return reader


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EVENT, max_size=30), ENDING, st.sampled_from([5, 6, 7]))
# A second request for one call replaces its approval: an answer to the
# first names no tool invocation any more (the SDK throws on it).
@example(
    [
        ev.ToolCallStart("c3", "lookup"),
        ev.ToolApprovalRequest("ap2", "c3", is_automatic=False),
        ev.ToolApprovalRequest("ap1", "c3", is_automatic=False),
        ev.ToolApprovalResponse("ap2", False, None),
    ],
    "done",
    7,
)
def test_any_event_sequence_encodes_to_a_framed_stream_our_reader_accepts(
    events: list[ev.Event], ending: str, version: int
) -> None:
    body = encode(events, ending, version)
    assert body.endswith(b"\n\n" + DONE_FRAME) or (body.startswith(b"data: ") and body.endswith(DONE_FRAME))
    chunks = [json.loads(e.data) for e in parse_sse(body)[:-1]]
    assert chunks[0]["type"] == "start"
    assert chunks[-1]["type"] in ("finish", "error")
    assert sum(c["type"] in ("finish", "error") for c in chunks) == 1
    assert b"secret" not in body
    if version == 5:
        # Our reader is the ai@7 twin; ai@5's own finish word ("unknown")
        # is not ai@7's. The real ai@5 reads these in the Node suite.
        return
    reader = read(body)  # raises UIMessageStreamError on any ordering error
    assert (reader.error_text is not None) == (ending == "raise")


@pytest.mark.parametrize("version", [7, 6, 5])
def test_generated_streams_read_the_same_in_the_real_client(node: str, tmp_path: Path, version: int) -> None:
    bodies: list[bytes] = []

    @settings(max_examples=300, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(EVENT, max_size=30), ENDING)
    def collect(events: list[ev.Event], ending: str) -> None:
        bodies.append(encode(events, ending, version))

    collect()
    assert len(bodies) >= 200
    for i, body in enumerate(bodies):
        (tmp_path / f"{i:04d}.sse").write_bytes(body)
    result = subprocess.run(
        [node, str(JS_DIR / "check_streams.mjs"), str(tmp_path), "--version", str(version)],
        capture_output=True,
        text=True,
        check=True,
        cwd=JS_DIR,
    )
    lines = [json.loads(line) for line in result.stdout.split("\n") if line.strip()]
    assert len(lines) == len(bodies)
    for line in lines:
        body = (tmp_path / Path(line["file"]).name).read_bytes()
        assert line["ok"], (line, body)
        if version != 7:
            # Our reader is the ai@7 twin; older clients build their own
            # shapes in places (ai@5/6 keep a bad tool input as rawInput).
            continue
        reader = read(body)
        assert line["message"] == reader.message, body
        assert line["error"] == reader.error_text, body
