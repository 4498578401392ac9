"""The encoder's rules (the numbered encoder rules of docs/protocols.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from uistream_app.protocol import events as ev
from uistream_app.protocol.ui.encoder import UIMessageEncoder, normalize_finish_reason, output_value
from uistream_app.protocol.ui.stream import aencode_events, encode_events


def shape(chunks: list[dict]) -> list[str]:
    return [c["type"] + (":" + c["id"] if "id" in c else "") for c in chunks]


def feed_all(encoder: UIMessageEncoder, events: list[ev.Event]) -> list[dict]:
    out: list[dict] = []
    for event in events:
        out.extend(encoder.feed(event))
    return out


def test_text_and_reasoning_take_turns_with_ids_counted_per_kind() -> None:
    chunks = feed_all(
        UIMessageEncoder(),
        [ev.ReasoningDelta("hmm"), ev.TextDelta("hi"), ev.ReasoningDelta("again"), ev.TextDelta("bye")],
    )
    assert shape(chunks) == [
        "start",
        "start-step",
        "reasoning-start:reasoning-0",
        "reasoning-delta:reasoning-0",
        "reasoning-end:reasoning-0",
        "text-start:text-0",
        "text-delta:text-0",
        "text-end:text-0",
        "reasoning-start:reasoning-1",
        "reasoning-delta:reasoning-1",
        "reasoning-end:reasoning-1",
        "text-start:text-1",
        "text-delta:text-1",
    ]


def test_the_start_chunk_carries_the_message_id_and_metadata() -> None:
    chunks = UIMessageEncoder("msg-1", {"model": "x"}).feed(ev.TextDelta("a"))
    assert chunks[0] == {"type": "start", "messageId": "msg-1", "messageMetadata": {"model": "x"}}
    assert UIMessageEncoder().feed(ev.TextDelta("a"))[0] == {"type": "start"}


def test_text_end_closes_the_part_and_the_next_text_opens_a_new_one() -> None:
    chunks = feed_all(UIMessageEncoder(), [ev.TextDelta("a"), ev.TextEnd(), ev.TextEnd(), ev.TextDelta("b")])
    assert shape(chunks)[2:] == [
        "text-start:text-0",
        "text-delta:text-0",
        "text-end:text-0",
        "text-start:text-1",
        "text-delta:text-1",
    ]


def test_every_part_closes_before_finish_step_and_a_new_step_opens_for_content() -> None:
    chunks = feed_all(
        UIMessageEncoder(),
        [ev.TextDelta("a"), ev.StepFinished(0), ev.ReasoningDelta("r"), ev.Finish("stop"), ev.Done()],
    )
    assert shape(chunks) == [
        "start",
        "start-step",
        "text-start:text-0",
        "text-delta:text-0",
        "text-end:text-0",
        "finish-step",
        "start-step",
        "reasoning-start:reasoning-0",
        "reasoning-delta:reasoning-0",
        "reasoning-end:reasoning-0",
        "finish-step",
        "finish",
    ]
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


def test_tool_call_sequence_and_output_as_json_where_it_parses() -> None:
    enc = UIMessageEncoder()
    chunks = feed_all(
        enc,
        [
            ev.TextDelta("let me see"),
            ev.ToolCallStart("c1", "lookup"),
            ev.ToolCallDelta("c1", '{"q": '),
            ev.ToolCallDelta("c1", '"x"}'),
            ev.ToolCall("c1", "lookup", '{"q": "x"}'),
            ev.ToolResult("c1", '{"hits": 2}'),
        ],
    )
    assert [c["type"] for c in chunks[2:]] == [
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
    ]
    assert chunks[-2] == {"type": "tool-input-available", "toolCallId": "c1", "toolName": "lookup", "input": {"q": "x"}}
    assert chunks[-1] == {"type": "tool-output-available", "toolCallId": "c1", "output": {"hits": 2}}


@pytest.mark.parametrize(
    ("content", "wire"),
    [('{"a": 1}', {"a": 1}), ("ran lookup", "ran lookup"), ("3", 3), ({"b": [1]}, {"b": [1]}), ("", "")],
)
def test_output_value(content: object, wire: object) -> None:
    assert output_value(content) == wire


def test_a_fragment_for_a_call_that_never_started_is_dropped() -> None:
    assert UIMessageEncoder().feed(ev.ToolCallDelta("nope", '{"q":')) == []


def test_a_finished_call_without_a_start_announces_itself_first() -> None:
    chunks = UIMessageEncoder().feed(ev.ToolCall("call-9", "lookup", '{"q": "x"}'))
    assert [c["type"] for c in chunks] == ["start", "start-step", "tool-input-start", "tool-input-available"]
    assert chunks[2] == {"type": "tool-input-start", "toolCallId": "call-9", "toolName": "lookup"}


def test_arguments_that_are_not_json_become_a_tool_input_error() -> None:
    chunks = UIMessageEncoder().feed(ev.ToolCall("c1", "calc", '{"x": 1+}'))
    error = chunks[-1]
    assert error["type"] == "tool-input-error"
    assert error["input"] == '{"x": 1+}'
    assert error["errorText"].startswith("Invalid JSON")


def test_outputs_for_unknown_calls_are_dropped_not_sent() -> None:
    enc = UIMessageEncoder()
    enc.feed(ev.TextDelta("x"))
    assert enc.feed(ev.ToolResult("ghost", "1")) == []
    assert enc.feed(ev.ToolDenied("ghost")) == []
    assert enc.feed(ev.ToolApprovalRequest("a1", "ghost")) == []


def test_tool_error_result_becomes_tool_output_error() -> None:
    enc = UIMessageEncoder()
    enc.feed(ev.ToolCall("c1", "t", "{}"))
    assert enc.feed(ev.ToolResult("c1", "An error occurred.", is_error=True)) == [
        {"type": "tool-output-error", "toolCallId": "c1", "errorText": "An error occurred."}
    ]


def test_nothing_is_emitted_after_the_end() -> None:
    enc = UIMessageEncoder()
    enc.feed(ev.TextDelta("a"))
    assert enc.finish()[-1]["type"] == "finish"
    assert enc.feed(ev.TextDelta("late")) == []
    assert enc.error("late") == []
    assert enc.finish() == []
    assert enc.abort() == []

    enc = UIMessageEncoder()
    assert shape(enc.error("nope")) == ["start", "start-step", "error"]
    assert enc.finish() == []


def test_error_closes_open_parts_first() -> None:
    enc = UIMessageEncoder()
    enc.feed(ev.TextDelta("a"))
    assert shape(enc.error("boom")) == ["text-end:text-0", "error"]


def test_abort_closes_parts_and_carries_the_reason() -> None:
    enc = UIMessageEncoder()
    enc.feed(ev.ReasoningDelta("a"))
    assert enc.abort("stopped by the user") == [
        {"type": "reasoning-end", "id": "reasoning-0"},
        {"type": "abort", "reason": "stopped by the user"},
    ]


def test_loop_finish_only_remembers_the_reason_and_done_overrides_it() -> None:
    enc = UIMessageEncoder()
    chunks = feed_all(enc, [ev.TextDelta("a"), ev.Finish("tool_calls"), ev.StepFinished(0), ev.Done("length")])
    assert chunks[-1] == {"type": "finish", "finishReason": "length"}
    enc = UIMessageEncoder()
    assert feed_all(enc, [ev.TextDelta("a"), ev.Finish("tool_calls")])[-1] == {"type": "text-end", "id": "text-0"}
    assert enc.finish()[-1] == {"type": "finish", "finishReason": "tool-calls"}


@pytest.mark.parametrize(
    ("given", "wire"),
    [
        ("stop", "stop"),
        ("tool_calls", "tool-calls"),
        ("content_filter", "content-filter"),
        ("max_tokens", "length"),
        ("weird", "other"),
        (None, None),
        ("interrupted", "interrupted"),
    ],
)
def test_finish_reasons_map_onto_the_wire_words(given: str | None, wire: str | None) -> None:
    assert normalize_finish_reason(given) == wire


def test_usage_is_totalled_not_sent() -> None:
    enc = UIMessageEncoder()
    assert enc.feed(ev.Usage(input_tokens=3, output_tokens=4)) == []
    enc.feed(ev.Usage(input_tokens=2))
    assert enc.usage == {"input_tokens": 5, "output_tokens": 4}


def test_data_parts_do_not_open_steps_and_transient_is_only_sent_when_true() -> None:
    enc = UIMessageEncoder()
    chunks = feed_all(enc, [ev.TextDelta("a"), ev.StepFinished(0), ev.Data("x", {"n": 1}, id="d", transient=False)])
    assert chunks[-1] == {"type": "data-x", "data": {"n": 1}, "id": "d"}
    assert "start-step" not in shape(chunks)[-2:]


def test_same_events_encode_to_the_same_chunks() -> None:
    events = [ev.ReasoningDelta("r"), ev.TextDelta("t"), ev.ToolCall("c", "n", "{}"), ev.Finish(), ev.Done()]
    assert feed_all(UIMessageEncoder("m"), events) == feed_all(UIMessageEncoder("m"), events)


# -- the stream adapters --------------------------------------------------------


class Boom(Exception):
    pass


def failing_source() -> Iterator[ev.Event]:
    yield ev.TextDelta("partial")
    raise Boom("provider said: the user's secret prompt")


def test_source_error_is_masked_on_the_wire_and_handed_to_on_error(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[BaseException] = []
    chunks = list(encode_events(failing_source(), on_error=seen.append))
    assert chunks[-2:] == [{"type": "text-end", "id": "text-0"}, {"type": "error", "errorText": "An error occurred."}]
    assert "secret" not in repr(chunks)
    assert isinstance(seen[0], Boom)
    assert "secret" in caplog.text  # the detail is logged


def test_expose_errors_puts_the_detail_on_the_wire() -> None:
    chunks = list(encode_events(failing_source(), expose_errors=True))
    assert chunks[-1] == {"type": "error", "errorText": "provider said: the user's secret prompt"}


def test_a_source_that_just_stops_still_gets_its_finish() -> None:
    chunks = list(encode_events(iter([ev.TextDelta("a")])))
    assert shape(chunks)[-3:] == ["text-end:text-0", "finish-step", "finish"]
    assert shape(list(encode_events(iter([])))) == ["start", "start-step", "finish-step", "finish"]


def test_no_read_ahead_closing_the_stream_closes_the_source() -> None:
    pulled: list[int] = []
    closed: list[bool] = []

    def source() -> Iterator[ev.Event]:
        try:
            for i in range(100):
                pulled.append(i)
                yield ev.TextDelta(str(i))
        finally:
            closed.append(True)

    stream = encode_events(source())
    taken = [next(stream) for _ in range(4)]  # start, start-step, text-start, delta 0
    assert taken[-1]["delta"] == "0"
    assert pulled == [0]
    stream.close()
    assert closed == [True]


def test_async_twin_pulls_one_item_per_chunk_and_closes_the_source() -> None:
    pulled: list[int] = []
    closed = asyncio.Event()

    async def source() -> AsyncIterator[ev.Event]:
        try:
            for i in range(100):
                pulled.append(i)
                yield ev.TextDelta(str(i))
        finally:
            closed.set()

    async def main() -> None:
        stream = aencode_events(source())
        chunks = [await anext(stream) for _ in range(5)]
        assert chunks[-1]["delta"] == "1"
        assert pulled == [0, 1]
        await stream.aclose()
        assert closed.is_set()

    asyncio.run(main())


def test_async_twin_masks_errors_and_stops_pulling_after_done() -> None:
    pulled: list[str] = []

    async def source() -> AsyncIterator[ev.Event]:
        for item in (ev.TextDelta("a"), ev.Done(), ev.TextDelta("never")):
            pulled.append(type(item).__name__)
            yield item

    async def collect() -> list[dict]:
        return [c async for c in aencode_events(source())]

    chunks = asyncio.run(collect())
    assert chunks[-1] == {"type": "finish"}
    assert pulled == ["TextDelta", "Done"]


def test_every_chunk_of_a_dynamic_call_says_so() -> None:
    enc = UIMessageEncoder()
    chunks = feed_all(
        enc,
        [
            ev.ToolCallStart("c1", "mcp_search", dynamic=True),
            ev.ToolCall("c1", "mcp_search", "{}"),
            ev.ToolResult("c1", "ok"),
        ],
    )
    tool_chunks = [c for c in chunks if c["type"].startswith("tool-")]
    assert [c.get("dynamic") for c in tool_chunks] == [True, True, True]


def test_a_continuation_can_send_outputs_for_calls_the_message_already_holds() -> None:
    assert UIMessageEncoder().feed(ev.ToolResult("call_1", "sent")) == []
    enc = UIMessageEncoder("msg-1", known_tool_calls=["call_1", "call_2"])
    chunks = feed_all(enc, [ev.ToolResult("call_1", "sent"), ev.ToolDenied("call_2")])
    assert chunks[-2:] == [
        {"type": "tool-output-available", "toolCallId": "call_1", "output": "sent"},
        {"type": "tool-output-denied", "toolCallId": "call_2"},
    ]
    # The held calls' input is complete: no second input for them.
    assert enc.feed(ev.ToolCallDelta("call_1", "{")) == []


def test_a_continuation_goes_on_from_the_parts_the_message_holds() -> None:
    held = [
        {"type": "step-start"},
        {"type": "reasoning", "text": "hm", "id": "reasoning-0", "state": "done"},
        {"type": "text", "text": "Sending.", "state": "done"},
        {"type": "tool-send_email", "toolCallId": "call_1", "state": "approval-responded", "input": {}},
    ]
    enc = UIMessageEncoder("msg-1", continues=held)
    chunks = feed_all(
        enc, [ev.ToolResult("call_1", "sent"), ev.ReasoningDelta("so"), ev.TextDelta("Done."), ev.TextEnd()]
    )
    assert {"type": "tool-output-available", "toolCallId": "call_1", "output": "sent"} in chunks
    # New parts never reuse an id of the message: a replay of the whole
    # message (text counted from 0, reasoning by its own id) names them so.
    assert [c["id"] for c in chunks if c["type"].endswith("-start") and "id" in c] == ["reasoning-1", "text-1"]


def test_an_input_error_is_reported_once() -> None:
    enc = UIMessageEncoder()
    first = enc.feed(ev.ToolCall("c1", "calc", "{oops"))
    assert [c["type"] for c in first][-1] == "tool-input-error"
    assert enc.feed(ev.ToolInputError("c1", "calc", "{oops", "not JSON")) == []
    # JSON that parsed but did not fit the schema still gets its error.
    enc.feed(ev.ToolCall("c2", "calc", '{"x": "a"}'))
    (error,) = enc.feed(ev.ToolInputError("c2", "calc", {"x": "a"}, "x: expected number"))
    assert error == {
        "type": "tool-input-error",
        "toolCallId": "c2",
        "toolName": "calc",
        "input": {"x": "a"},
        "errorText": "x: expected number",
    }
