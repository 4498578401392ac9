"""The UI message stream verifiers (``protocol.ui.verify``), without a database.

Each test hands the verifiers a stream with one fault a client would trip
on (or none) and checks that the verdict names it; the stored-run checks
built on them are in ``tests/test_admin.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.stream import encode_events
from uistream_app.protocol.ui.verify import (
    MAX_PROBLEMS,
    FramingVerifier,
    ReaderVerifier,
    SchemaVerifier,
    Verdict,
    verify_chunks,
)

START = {"type": "start", "messageId": "msg-1"}
STEP = {"type": "start-step"}
END_STEP = {"type": "finish-step"}
FINISH = {"type": "finish", "finishReason": "stop"}


def problems(verifier: Any, chunks: list[dict[str, Any]]) -> list[str]:
    for seq, chunk in enumerate(chunks):
        verifier.feed(chunk, seq)
    check = verifier.close()
    assert check.ok is (not check.problems)
    return list(check.problems)


def test_an_encoded_stream_passes_every_verifier_for_every_client() -> None:
    source = [
        ev.ReasoningDelta("Thinking."),
        ev.TextDelta("Hello"),
        ev.ToolCallStart("call-1", "get_weather"),
        ev.ToolCallDelta("call-1", '{"city": "Paris"}'),
        ev.ToolCall("call-1", "get_weather", '{"city": "Paris"}'),
        ev.ToolResult("call-1", {"temperature": 18}),
        ev.StepFinished(),
        ev.TextDelta("Mild."),
        ev.Finish("stop"),
    ]
    chunks = list(encode_events(source, UIMessageEncoder("msg-1")))
    assert {"reasoning-end", "tool-input-delta", "tool-output-available", "finish"} <= {c["type"] for c in chunks}
    for version in (5, 6, 7):
        verdict = verify_chunks(chunks, version)
        assert verdict.ok, verdict.lines()
        assert [c.name for c in verdict.checks] == ["schema", "reader", "framing"]
    assert verify_chunks(chunks).lines()[-1] == "verdict: ok"


def test_the_schema_is_the_target_clients() -> None:
    interrupted = [START, {"type": "finish", "finishReason": "interrupted"}]
    assert problems(SchemaVerifier(7), interrupted) == []
    assert problems(SchemaVerifier(6), interrupted) == ["#1: finish: ai@6 has no finishReason 'interrupted'"]
    unknown = [START, {"type": "finish", "finishReason": "unknown"}]
    assert problems(SchemaVerifier(5), unknown) == []
    assert problems(SchemaVerifier(6), unknown) == ["#1: finish: ai@6 has no finishReason 'unknown'"]
    assert problems(SchemaVerifier(6), [START, STEP, {"type": "reset-step"}]) == [
        "#2: ai@6 has no chunk type 'reset-step'"
    ]
    aborted = [START, {"type": "abort", "reason": "stopped"}]
    assert problems(SchemaVerifier(6), aborted) == []
    assert problems(SchemaVerifier(5), aborted) == ["#1: abort: ai@5 does not list 'reason'"]
    with pytest.raises(ValueError, match="unsupported AI SDK version 4"):
        SchemaVerifier(4)


def test_the_reader_reports_where_the_client_stops_and_keeps_what_it_built() -> None:
    verifier = ReaderVerifier()
    found = problems(
        verifier,
        [
            START,
            STEP,
            {"type": "text-start", "id": "text-0"},
            {"type": "text-delta", "id": "text-0", "delta": "Hi"},
            {"type": "text-delta", "id": "text-9", "delta": "lost"},
            {"type": "text-delta", "id": "text-9", "delta": "lost too"},
        ],
    )
    assert len(found) == 1
    assert found[0].startswith('#4: Received text-delta for missing text part with ID "text-9"')
    assert found[0].endswith("(the client stops reading here)")
    assert verifier.message["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hi", "state": "streaming"},
    ]


def test_the_reader_continues_the_message_it_is_given() -> None:
    before = {
        "id": "msg-1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "tool-send_email", "toolCallId": "call-1", "state": "input-available", "input": {}},
        ],
    }
    chunks = [START, STEP, {"type": "tool-output-available", "toolCallId": "call-1", "output": "sent"}, FINISH]
    assert problems(ReaderVerifier(), chunks) == [
        '#2: No tool invocation found for tool call ID "call-1". (the client stops reading here)'
    ]
    verifier = ReaderVerifier(message_id="msg-1", message=before)
    assert problems(verifier, chunks) == []
    assert verifier.message["parts"][1]["state"] == "output-available"


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([STEP, END_STEP, FINISH], ["#0: the stream opens with start-step, not start"]),
        ([START, START, FINISH], ["#1: a second start"]),
        (
            [START, {"type": "text-start", "id": "text-0"}, {"type": "text-end", "id": "text-0"}, FINISH],
            ["#1: text-start outside a step", "#2: text-end outside a step"],
        ),
        ([START, STEP, STEP, END_STEP, FINISH], ["#2: start-step while a step is open"]),
        ([START, END_STEP, FINISH], ["#1: finish-step with no step open"]),
        (
            [
                START,
                STEP,
                {"type": "reasoning-start", "id": "reasoning-0"},
                {"type": "text-start", "id": "text-0"},
                {"type": "text-end", "id": "text-0"},
                {"type": "reasoning-end", "id": "reasoning-0"},
                END_STEP,
                FINISH,
            ],
            ["#3: text-start text-0 while reasoning-0 is open"],
        ),
        (
            [START, STEP, {"type": "text-start", "id": "text-0"}, END_STEP, FINISH],
            ["#3: finish-step with text-0 still open", "#4: finish with text-0 still open"],
        ),
        (
            [
                START,
                STEP,
                {"type": "tool-input-available", "toolCallId": "call-1", "toolName": "t", "input": {}},
                END_STEP,
                FINISH,
            ],
            ["#2: tool-input-available for call-1 without its tool-input-start"],
        ),
        ([START, STEP, FINISH], ["#2: finish with a step still open"]),
        ([START, STEP, END_STEP], ["chunk 3: the stream ends without finish, error or abort"]),
        ([START, STEP, {"type": "error", "errorText": "An error occurred."}], []),
        ([START, {"type": "abort"}], []),
        ([], ["chunk 0: no chunks at all"]),
    ],
)
def test_framing_names_the_broken_rule(chunks: list[dict[str, Any]], expected: list[str]) -> None:
    assert problems(FramingVerifier(), chunks) == expected


def test_framing_reports_only_the_first_chunk_after_the_end_and_counts_the_rest() -> None:
    verifier = FramingVerifier()
    for chunk in [START, FINISH, STEP, END_STEP, FINISH]:
        verifier.feed(chunk)
    check = verifier.close()
    assert check.problems == ["chunk 2: start-step after finish: nothing may follow the end"]
    assert check.note == "3 chunks after finish"


def test_a_running_stream_may_lack_its_end() -> None:
    assert problems(FramingVerifier(allow_open=True), [START, STEP]) == []


def test_a_stored_log_counts_from_zero_without_gaps_and_never_goes_back_in_time() -> None:
    verifier = FramingVerifier()
    for seq, offset, chunk in [(0, 0, START), (2, 10, STEP), (3, 5, END_STEP), (4, 12, FINISH)]:
        verifier.feed(chunk, seq, offset)
    assert verifier.close().problems == ["#2: seq 2 where 1 was due", "#3: offset 5 ms goes back from 10 ms"]


def test_problems_are_capped_and_counted() -> None:
    verifier = FramingVerifier()
    verifier.feed(START)
    for _ in range(MAX_PROBLEMS + 5):
        verifier.feed({"type": "text-start", "id": "text-0"})
    check = verifier.close()
    # One "outside a step" per text-start, plus the missing end.
    assert check.total == MAX_PROBLEMS + 6
    assert len(check.problems) == MAX_PROBLEMS
    assert check.more == 6
    lines = Verdict([check]).lines()
    assert lines[0] == "[FAIL] the encoder's framing rules hold"
    assert lines[-2:] == ["    … and 6 more", "verdict: 1 check(s) failed"]
