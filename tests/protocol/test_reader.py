"""``UIMessageReader`` against ai@7's ``processUIMessageStream``.

Every expected message here was written by hand from the SDK's source
(``ai@7.0.173 src/ui/process-ui-message-stream.ts``), not produced by the
reader; the ``node`` test at the end feeds the same kind of chunk sequences
to the real package and compares.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from uistream_app.protocol.ui.reader import (
    UIMessageReader,
    UIMessageStreamError,
    fix_json,
    merge_objects,
    parse_partial_json,
    read_ui_message,
)

JS_DIR = Path(__file__).resolve().parents[1] / "js"

START = {"type": "start", "messageId": "msg-1"}
STEP = {"type": "start-step"}
PM = {"anthropic": {"signature": "sig-1"}}
PM2 = {"openai": {"itemId": "it-2"}}


def read(*chunks: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    reader = UIMessageReader(**kwargs)
    reader.feed_all(chunks)
    return reader.message


def parts(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    """The parts after ``start``/``start-step``'s step boundary."""
    message = read(START, STEP, *chunks)
    assert message["parts"][0] == {"type": "step-start"}
    result: list[dict[str, Any]] = message["parts"][1:]
    return result


def tool_start(call_id: str = "call-1", name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-input-start", "toolCallId": call_id, "toolName": name, **extra}


def tool_delta(text: str, call_id: str = "call-1") -> dict[str, Any]:
    return {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": text}


def tool_available(input: Any, call_id: str = "call-1", name: str = "get_weather", **extra: Any) -> dict[str, Any]:
    return {"type": "tool-input-available", "toolCallId": call_id, "toolName": name, "input": input, **extra}


# -- the message -----------------------------------------------------------------


def test_fresh_message_has_no_metadata_key_and_takes_the_start_id() -> None:
    assert read(START) == {"id": "msg-1", "role": "assistant", "parts": []}
    assert read() == {"id": "", "role": "assistant", "parts": []}
    assert read(message_id="given") == {"id": "given", "role": "assistant", "parts": []}


def test_start_with_another_id_renames_the_message_and_keeps_its_parts() -> None:
    message = read(
        START,
        {"type": "text-start", "id": "t"},
        {"type": "start", "messageId": "msg-2"},
        {"type": "text-delta", "id": "t", "delta": "x"},
    )
    assert message == {
        "id": "msg-2",
        "role": "assistant",
        "parts": [{"type": "text", "text": "x", "state": "streaming"}],
    }


def test_reset_on_message_id_change_starts_a_fresh_message() -> None:
    chunks = [
        {"type": "start", "messageId": "msg-1", "messageMetadata": {"a": 1}},
        {"type": "text-start", "id": "t"},
        {"type": "start", "messageId": "msg-2"},
    ]
    reader = UIMessageReader(reset_on_message_id_change=True)
    reader.feed_all(chunks)
    assert reader.message == {"id": "msg-2", "role": "assistant", "parts": []}
    # the forgotten text part is no longer active
    with pytest.raises(UIMessageStreamError):
        reader.feed({"type": "text-delta", "id": "t", "delta": "x"})
    # the same id does not reset
    same = UIMessageReader(reset_on_message_id_change=True)
    same.feed_all([chunks[0], chunks[1], {"type": "start", "messageId": "msg-1"}])
    assert same.message["parts"] == [{"type": "text", "text": "", "state": "streaming"}]


def test_reset_on_first_start_replays_over_a_given_message() -> None:
    given = {"id": "msg-1", "role": "assistant", "parts": [{"type": "text", "text": "old", "state": "done"}]}
    message = read(START, {"type": "text-start", "id": "t"}, message=given, reset_on_first_start=True)
    assert message == {
        "id": "msg-1",
        "role": "assistant",
        "parts": [{"type": "text", "text": "", "state": "streaming"}],
    }


def test_message_is_a_snapshot_and_the_inputs_are_not_mutated() -> None:
    given = {"id": "m", "role": "assistant", "parts": [{"type": "step-start"}]}
    data_chunk = {"type": "data-x", "id": "d", "data": {"v": 1}}
    reader = UIMessageReader(message=given)
    reader.feed_all([data_chunk, {"type": "data-x", "id": "d", "data": {"v": 2}}])
    snapshot = reader.message
    snapshot["parts"].clear()
    assert len(reader.message["parts"]) == 2
    assert given == {"id": "m", "role": "assistant", "parts": [{"type": "step-start"}]}
    assert data_chunk == {"type": "data-x", "id": "d", "data": {"v": 1}}


# -- text and reasoning ------------------------------------------------------------


def test_text_streams_then_is_done() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, {"type": "text-start", "id": "t"}])
    reader.feed({"type": "text-delta", "id": "t", "delta": "Hel"})
    assert reader.message["parts"][1] == {"type": "text", "text": "Hel", "state": "streaming"}
    reader.feed({"type": "text-delta", "id": "t", "delta": "lo"})
    reader.feed({"type": "text-end", "id": "t"})
    assert reader.message["parts"][1] == {"type": "text", "text": "Hello", "state": "done"}


def test_text_provider_metadata_is_replaced_only_by_chunks_that_carry_one() -> None:
    assert parts(
        {"type": "text-start", "id": "t", "providerMetadata": PM},
        {"type": "text-delta", "id": "t", "delta": "a"},
        {"type": "text-end", "id": "t"},
    ) == [{"type": "text", "text": "a", "providerMetadata": PM, "state": "done"}]
    assert parts(
        {"type": "text-start", "id": "t", "providerMetadata": PM},
        {"type": "text-delta", "id": "t", "delta": "a", "providerMetadata": PM2},
    ) == [{"type": "text", "text": "a", "providerMetadata": PM2, "state": "streaming"}]
    assert parts(
        {"type": "text-start", "id": "t"},
        {"type": "text-end", "id": "t", "providerMetadata": PM2, "citations": [{"type": "url"}]},
    ) == [{"type": "text", "text": "", "providerMetadata": PM2, "state": "done", "citations": [{"type": "url"}]}]


def test_reasoning_keeps_the_chunk_id_on_the_part() -> None:
    assert parts(
        {"type": "reasoning-start", "id": "rs_1"},
        {"type": "reasoning-delta", "id": "rs_1", "delta": "thinking"},
        {"type": "reasoning-end", "id": "rs_1", "providerMetadata": PM},
    ) == [{"type": "reasoning", "id": "rs_1", "text": "thinking", "providerMetadata": PM, "state": "done"}]


def test_interleaved_parts_grow_independently() -> None:
    assert parts(
        {"type": "text-start", "id": "a"},
        {"type": "reasoning-start", "id": "a"},
        {"type": "text-start", "id": "b"},
        {"type": "text-delta", "id": "a", "delta": "1"},
        {"type": "reasoning-delta", "id": "a", "delta": "r"},
        {"type": "text-delta", "id": "b", "delta": "2"},
        {"type": "text-end", "id": "b"},
        {"type": "text-delta", "id": "a", "delta": "3"},
    ) == [
        {"type": "text", "text": "13", "state": "streaming"},
        {"type": "reasoning", "id": "a", "text": "r", "state": "streaming"},
        {"type": "text", "text": "2", "state": "done"},
    ]


def test_finish_step_does_not_close_parts_in_ai7() -> None:
    # ai@5/6 forget the active ids here; ai@7 only closes parts by their end.
    assert parts(
        {"type": "text-start", "id": "t"},
        {"type": "finish-step"},
        {"type": "text-delta", "id": "t", "delta": "late"},
        {"type": "text-end", "id": "t"},
    ) == [{"type": "text", "text": "late", "state": "done"}]


def test_each_start_step_adds_a_step_start_part() -> None:
    message = read(START, STEP, {"type": "finish-step"}, STEP, {"type": "finish-step"}, {"type": "finish"})
    assert message["parts"] == [{"type": "step-start"}, {"type": "step-start"}]


# -- ordering errors ---------------------------------------------------------------

ORDERING_ERRORS = [
    pytest.param(
        [],
        {"type": "text-delta", "id": "t1", "delta": "x"},
        'Received text-delta for missing text part with ID "t1". '
        'Ensure a "text-start" chunk is sent before any "text-delta" chunks.',
        "text-delta",
        "t1",
        id="text-delta",
    ),
    pytest.param(
        [],
        {"type": "text-end", "id": "t1"},
        'Received text-end for missing text part with ID "t1". '
        'Ensure a "text-start" chunk is sent before any "text-end" chunks.',
        "text-end",
        "t1",
        id="text-end",
    ),
    pytest.param(
        [{"type": "text-start", "id": "t1"}, {"type": "text-end", "id": "t1"}],
        {"type": "text-end", "id": "t1"},
        'Received text-end for missing text part with ID "t1". '
        'Ensure a "text-start" chunk is sent before any "text-end" chunks.',
        "text-end",
        "t1",
        id="text-end-twice",
    ),
    pytest.param(
        [{"type": "text-start", "id": "r1"}],
        {"type": "reasoning-delta", "id": "r1", "delta": "x"},
        'Received reasoning-delta for missing reasoning part with ID "r1". '
        'Ensure a "reasoning-start" chunk is sent before any "reasoning-delta" chunks.',
        "reasoning-delta",
        "r1",
        id="reasoning-delta-for-a-text-id",
    ),
    pytest.param(
        [],
        {"type": "reasoning-end", "id": "r1"},
        'Received reasoning-end for missing reasoning part with ID "r1". '
        'Ensure a "reasoning-start" chunk is sent before any "reasoning-end" chunks.',
        "reasoning-end",
        "r1",
        id="reasoning-end",
    ),
    pytest.param(
        [],
        {"type": "tool-input-delta", "toolCallId": "c9", "inputTextDelta": "{"},
        'Received tool-input-delta for missing tool call with ID "c9". '
        'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
        "tool-input-delta",
        "c9",
        id="tool-input-delta",
    ),
    pytest.param(
        [tool_available({}, call_id="c1")],
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{"},
        'Received tool-input-delta for missing tool call with ID "c1". '
        'Ensure a "tool-input-start" chunk is sent before any "tool-input-delta" chunks.',
        "tool-input-delta",
        "c1",
        id="tool-input-delta-without-start",
    ),
    pytest.param(
        [],
        {"type": "tool-output-available", "toolCallId": "c9", "output": 1},
        'No tool invocation found for tool call ID "c9".',
        "tool-invocation",
        "c9",
        id="tool-output-available",
    ),
    pytest.param(
        [],
        {"type": "tool-output-error", "toolCallId": "c9", "errorText": "e"},
        'No tool invocation found for tool call ID "c9".',
        "tool-invocation",
        "c9",
        id="tool-output-error",
    ),
    pytest.param(
        [],
        {"type": "tool-output-denied", "toolCallId": "c9"},
        'No tool invocation found for tool call ID "c9".',
        "tool-invocation",
        "c9",
        id="tool-output-denied",
    ),
    pytest.param(
        [],
        {"type": "tool-approval-request", "toolCallId": "c9", "approvalId": "a1"},
        'No tool invocation found for tool call ID "c9".',
        "tool-invocation",
        "c9",
        id="tool-approval-request",
    ),
    pytest.param(
        [tool_available({}, call_id="c1")],
        {"type": "tool-approval-response", "approvalId": "a9", "approved": True},
        'No tool invocation found for approval ID "a9".',
        "tool-approval-response",
        "a9",
        id="tool-approval-response",
    ),
]


@pytest.mark.parametrize(("before", "bad", "message", "chunk_type", "chunk_id"), ORDERING_ERRORS)
def test_ordering_errors_raise_like_the_sdk(
    before: list[dict[str, Any]], bad: dict[str, Any], message: str, chunk_type: str, chunk_id: str
) -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, *before])
    built = reader.message
    with pytest.raises(UIMessageStreamError) as info:
        reader.feed(bad)
    assert str(info.value) == message
    assert info.value.chunk_type == chunk_type
    assert info.value.chunk_id == chunk_id
    assert isinstance(info.value, ValueError)
    # the partial message survives, and the reader takes nothing more
    assert reader.failed
    assert reader.message == built
    with pytest.raises(UIMessageStreamError, match="earlier error"):
        reader.feed({"type": "finish"})


def test_invalid_chunks_are_refused_when_validating() -> None:
    reader = UIMessageReader(validate=True)
    with pytest.raises(UIMessageStreamError, match="text-delta: missing required field 'delta'"):
        reader.feed({"type": "text-delta", "id": "t"})
    assert reader.failed
    with pytest.raises(UIMessageStreamError, match="unknown chunk type"):
        UIMessageReader(validate=True).feed({"type": "no-such-chunk"})
    with pytest.raises(UIMessageStreamError, match="finishReason"):
        UIMessageReader(validate=True).feed({"type": "finish", "finishReason": "unknown"})
    # without validation the SDK's default branch ignores unknown types, and
    # an ai@5 finish reason reads
    assert read(START, {"type": "no-such-chunk"})["parts"] == []
    reader = UIMessageReader()
    reader.feed({"type": "finish", "finishReason": "unknown"})
    assert reader.finish_reason == "unknown"


@pytest.mark.parametrize(
    "chunk",
    [
        ["not", "a", "chunk"],
        {"no": "type"},
        {"type": "text-start"},
        {"type": "tool-input-start", "toolCallId": "c"},
    ],
)
def test_malformed_chunks_fail_the_reader_even_without_validation(chunk: Any) -> None:
    reader = UIMessageReader()
    with pytest.raises(UIMessageStreamError):
        reader.feed(chunk)
    assert reader.failed


def test_a_delta_that_is_not_a_string_fails_the_reader() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, {"type": "text-start", "id": "t"}])
    with pytest.raises(UIMessageStreamError, match="'delta' must be a string"):
        reader.feed({"type": "text-delta", "id": "t", "delta": 5})
    assert reader.message["parts"] == [{"type": "text", "text": "", "state": "streaming"}]


# -- tools ---------------------------------------------------------------------------


def test_static_tool_lifecycle_with_partial_input() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, tool_start()])
    assert reader.message["parts"][1] == {
        "type": "tool-get_weather",
        "toolCallId": "call-1",
        "state": "input-streaming",
    }
    reader.feed(tool_delta('{"city": "Pa'))
    assert reader.message["parts"][1] == {
        "type": "tool-get_weather",
        "toolCallId": "call-1",
        "state": "input-streaming",
        "input": {"city": "Pa"},
        "rawInput": '{"city": "Pa',
    }
    reader.feed(tool_delta('ris", "days": [1, 2'))
    assert reader.message["parts"][1]["input"] == {"city": "Paris", "days": [1, 2]}
    reader.feed(tool_delta("]}"))
    reader.feed(tool_available({"city": "Paris", "days": [1, 2]}))
    assert reader.message["parts"][1] == {
        "type": "tool-get_weather",
        "toolCallId": "call-1",
        "state": "input-available",
        "input": {"city": "Paris", "days": [1, 2]},
    }
    reader.feed({"type": "tool-output-available", "toolCallId": "call-1", "output": {"temp": 21}})
    assert reader.message["parts"][1] == {
        "type": "tool-get_weather",
        "toolCallId": "call-1",
        "state": "output-available",
        "input": {"city": "Paris", "days": [1, 2]},
        "output": {"temp": 21},
    }


def test_tool_part_serialises_in_the_sdks_key_order() -> None:
    # the object literal order of updateToolPart's push, then assignments
    (part,) = parts(
        tool_start(title="Weather", providerExecuted=True, toolMetadata={"k": 1}, providerMetadata=PM),
        tool_delta('{"a":1'),
    )
    assert json.dumps(part) == json.dumps(
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "input-streaming",
            "title": "Weather",
            "toolMetadata": {"k": 1},
            "input": {"a": 1},
            "rawInput": '{"a":1',
            "providerExecuted": True,
            "callProviderMetadata": PM,
        }
    )


def test_dynamic_tool_part_names_its_tool() -> None:
    assert parts(
        tool_start(name="mcp_search", dynamic=True),
        tool_delta('{"q": "x"}'),
        tool_available({"q": "x"}, name="mcp_search", dynamic=True),
        {"type": "tool-output-available", "toolCallId": "call-1", "output": ["r"], "dynamic": True},
    ) == [
        {
            "type": "dynamic-tool",
            "toolName": "mcp_search",
            "toolCallId": "call-1",
            "state": "output-available",
            "input": {"q": "x"},
            "output": ["r"],
        }
    ]


def test_tool_metadata_title_and_provider_fields_follow_the_sdk() -> None:
    assert parts(
        tool_start(title="T", toolMetadata={"m": 1}, providerExecuted=True, providerMetadata=PM),
        tool_available({"a": 1}),  # no title/toolMetadata/providerExecuted: all kept
        {"type": "tool-output-available", "toolCallId": "call-1", "output": 2, "providerMetadata": PM2},
    ) == [
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "output-available",
            "title": "T",
            "toolMetadata": {"m": 1},
            "input": {"a": 1},
            "output": 2,
            "providerExecuted": True,
            "callProviderMetadata": PM,
            "resultProviderMetadata": PM2,
        }
    ]


def test_text_input_encoding_keeps_the_raw_text_as_input() -> None:
    assert parts(tool_start(inputEncoding="text"), tool_delta("SELECT 1"), tool_delta(" FROM t")) == [
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "input-streaming",
            "input": "SELECT 1 FROM t",
            "inputEncoding": "text",
            "rawInput": "SELECT 1 FROM t",
        }
    ]


def test_unparseable_partial_input_is_left_out() -> None:
    assert parts(tool_start(), tool_delta("-")) == [
        {"type": "tool-get_weather", "toolCallId": "call-1", "state": "input-streaming", "rawInput": "-"}
    ]


def test_tool_input_error_without_a_start_creates_the_failed_part() -> None:
    assert parts(
        {
            "type": "tool-input-error",
            "toolCallId": "call-1",
            "toolName": "calc",
            "input": "1 +",
            "errorText": "Invalid input",
            "providerMetadata": PM,
        }
    ) == [
        {
            "type": "tool-calc",
            "toolCallId": "call-1",
            "state": "output-error",
            "input": "1 +",
            "errorText": "Invalid input",
            "resultProviderMetadata": PM,
        }
    ]


def test_tool_input_error_keeps_a_started_dynamic_part_dynamic() -> None:
    assert parts(
        tool_start(name="calc", dynamic=True),
        {"type": "tool-input-error", "toolCallId": "call-1", "toolName": "calc", "input": None, "errorText": "bad"},
    ) == [
        {
            "type": "dynamic-tool",
            "toolName": "calc",
            "toolCallId": "call-1",
            "state": "output-error",
            "input": None,
            "errorText": "bad",
        }
    ]


def test_tool_output_error_keeps_the_raw_input_of_a_static_call() -> None:
    assert parts(
        tool_start(),
        tool_delta('{"city": "Ro'),
        {"type": "tool-output-error", "toolCallId": "call-1", "errorText": "boom"},
    ) == [
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "output-error",
            "input": {"city": "Ro"},
            "rawInput": '{"city": "Ro',
            "errorText": "boom",
        }
    ]


def test_preliminary_outputs_are_replaced_by_the_final_one() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, tool_available({"n": 3})])
    reader.feed({"type": "tool-output-available", "toolCallId": "call-1", "output": {"p": 1}, "preliminary": True})
    assert reader.message["parts"][1]["preliminary"] is True
    assert reader.message["parts"][1]["output"] == {"p": 1}
    reader.feed({"type": "tool-output-available", "toolCallId": "call-1", "output": {"p": 3}})
    assert reader.message["parts"][1] == {
        "type": "tool-get_weather",
        "toolCallId": "call-1",
        "state": "output-available",
        "input": {"n": 3},
        "output": {"p": 3},
    }


def test_approval_requested_responded_then_output() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, tool_start(name="send_email"), tool_available({"to": "a@b"}, name="send_email")])
    reader.feed(
        {
            "type": "tool-approval-request",
            "approvalId": "ap-1",
            "toolCallId": "call-1",
            "reason": "sends mail",
            "isAutomatic": True,
            "signature": "s",
            "approvalDescriptor": {"d": 1},
            "inputSchemaInput": None,
        }
    )
    requested = {
        "type": "tool-send_email",
        "toolCallId": "call-1",
        "state": "approval-requested",
        "input": {"to": "a@b"},
        "approval": {
            "id": "ap-1",
            "descriptor": {"d": 1},
            "inputSchemaInput": None,
            "requestReason": "sends mail",
            "isAutomatic": True,
            "signature": "s",
        },
    }
    assert reader.message["parts"][1] == requested
    reader.feed({"type": "tool-approval-response", "approvalId": "ap-1", "approved": True, "reason": "ok"})
    responded = {
        **requested,
        "state": "approval-responded",
        "approval": {**requested["approval"], "approved": True, "reason": "ok"},
    }
    assert reader.message["parts"][1] == responded
    reader.feed({"type": "tool-output-available", "toolCallId": "call-1", "output": "sent"})
    assert reader.message["parts"][1] == {**responded, "state": "output-available", "output": "sent"}


def test_an_approval_request_leaves_out_what_the_chunk_does_not_say() -> None:
    (part,) = parts(
        tool_available({}),
        {"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "call-1", "isAutomatic": False},
    )
    assert part["approval"] == {"id": "ap-1"}


def test_denied_call() -> None:
    assert parts(
        tool_available({"to": "x"}),
        {"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "call-1"},
        {"type": "tool-approval-response", "approvalId": "ap-1", "approved": False},
        {"type": "tool-output-denied", "toolCallId": "call-1"},
    ) == [
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "output-denied",
            "input": {"to": "x"},
            "approval": {"id": "ap-1", "approved": False},
        }
    ]


def test_outputs_find_calls_of_earlier_steps_but_inputs_do_not() -> None:
    message = read(
        START,
        STEP,
        tool_available({"a": 1}),
        {"type": "finish-step"},
        STEP,
        {"type": "tool-output-available", "toolCallId": "call-1", "output": "late"},
        tool_available({"a": 2}),
    )
    assert message["parts"] == [
        {"type": "step-start"},
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "output-available",
            "input": {"a": 1},
            "output": "late",
        },
        {"type": "step-start"},
        {"type": "tool-get_weather", "toolCallId": "call-1", "state": "input-available", "input": {"a": 2}},
    ]


# -- data, sources, files, the rest -----------------------------------------------------


def test_data_parts_replace_by_type_and_id_and_transient_ones_are_not_stored() -> None:
    seen: list[dict[str, Any]] = []
    message = read(
        START,
        {"type": "data-weather", "id": "w", "data": {"status": "loading"}},
        {"type": "data-weather", "data": {"n": 1}},
        STEP,
        {"type": "data-progress", "id": "w", "data": 10},
        {"type": "data-weather", "id": "w", "data": {"status": "done"}},
        {"type": "data-toast", "data": "hi", "transient": True},
        {"type": "data-weather", "data": {"n": 1}},
        {"type": "data-flag", "data": None, "transient": False},
        on_data=seen.append,
    )
    assert message["parts"] == [
        {"type": "data-weather", "id": "w", "data": {"status": "done"}},
        {"type": "data-weather", "data": {"n": 1}},
        {"type": "step-start"},
        {"type": "data-progress", "id": "w", "data": 10},
        {"type": "data-weather", "data": {"n": 1}},
        # the SDK stores the chunk object itself, key for key
        {"type": "data-flag", "data": None, "transient": False},
    ]
    # on_data hears every data chunk, stored or not, in order
    assert [(c["type"], c["data"]) for c in seen] == [
        ("data-weather", {"status": "loading"}),
        ("data-weather", {"n": 1}),
        ("data-progress", 10),
        ("data-weather", {"status": "done"}),
        ("data-toast", "hi"),
        ("data-weather", {"n": 1}),
        ("data-flag", None),
    ]


def test_sources_files_custom_and_steering_parts() -> None:
    assert parts(
        {"type": "source-url", "sourceId": "s1", "url": "https://a", "title": "A"},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "application/pdf",
            "title": "D",
            "filename": "d.pdf",
        },
        {"type": "file", "url": "data:image/png;base64,AA", "mediaType": "image/png", "providerMetadata": PM},
        {"type": "reasoning-file", "url": "https://f", "mediaType": "image/png"},
        {"type": "custom", "kind": "openai.compaction", "providerMetadata": PM2},
        {"type": "steering-message", "id": "u2", "parts": [{"type": "text", "text": "also"}]},
    ) == [
        {"type": "source-url", "sourceId": "s1", "url": "https://a", "title": "A"},
        {
            "type": "source-document",
            "sourceId": "s2",
            "mediaType": "application/pdf",
            "title": "D",
            "filename": "d.pdf",
        },
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA", "providerMetadata": PM},
        {"type": "reasoning-file", "mediaType": "image/png", "url": "https://f"},
        {"type": "custom", "kind": "openai.compaction", "providerMetadata": PM2},
        {"type": "steering-message", "id": "u2", "parts": [{"type": "text", "text": "also"}]},
    ]


def test_metadata_merges_deeply_across_start_message_metadata_and_finish() -> None:
    reader = UIMessageReader()
    reader.feed_all(
        [
            {"type": "start", "messageId": "m", "messageMetadata": {"model": "x", "usage": {"in": 1}, "tags": [1]}},
            {"type": "message-metadata", "messageMetadata": {"usage": {"out": 2}, "tags": [2]}},
            {"type": "message-metadata", "messageMetadata": None},
            {"type": "finish", "finishReason": "stop", "messageMetadata": {"usage": {"in": 5}, "done": None}},
        ]
    )
    assert reader.message == {
        "id": "m",
        "metadata": {"model": "x", "usage": {"in": 5, "out": 2}, "tags": [2], "done": None},
        "role": "assistant",
        "parts": [],
    }
    assert reader.finish_reason == "stop"
    assert reader.finished


def test_merge_objects_follows_the_sdk() -> None:
    assert merge_objects({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    assert merge_objects({"a": {"b": 1}}, {"a": [1]}) == {"a": [1]}
    assert merge_objects({"a": [1, 2]}, {"a": {"0": 9}}) == {"a": {"0": 9}}
    assert merge_objects({"a": 1}, {"__proto__": {"x": 1}, "constructor": 1, "b": 2}) == {"a": 1, "b": 2}
    # JavaScript spreads an array or a string into index keys
    assert merge_objects([5, 6], {"1": 7}) == {"0": 5, "1": 7}
    assert merge_objects({"a": 1}, "xy") == {"a": 1, "0": "x", "1": "y"}
    # and throws on ``key in "a string"``
    with pytest.raises(TypeError):
        merge_objects("abc", {"k": 1})


def test_metadata_merge_that_javascript_throws_on_fails_the_reader() -> None:
    reader = UIMessageReader()
    reader.feed({"type": "start", "messageMetadata": "plain"})
    with pytest.raises(UIMessageStreamError, match="Cannot use 'in' operator"):
        reader.feed({"type": "message-metadata", "messageMetadata": {"k": 1}})


def test_reset_step_drops_the_current_step_and_forgets_what_was_open() -> None:
    reader = UIMessageReader()
    reader.feed_all(
        [
            START,
            STEP,
            {"type": "text-start", "id": "t0"},
            {"type": "text-delta", "id": "t0", "delta": "kept"},
            {"type": "text-end", "id": "t0"},
            {"type": "finish-step"},
            STEP,
            {"type": "text-start", "id": "t1"},
            {"type": "text-delta", "id": "t1", "delta": "dropped"},
            tool_start(),
            {"type": "data-x", "data": 1},
            {"type": "reset-step"},
        ]
    )
    assert reader.message["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "kept", "state": "done"},
        {"type": "step-start"},
    ]
    with pytest.raises(UIMessageStreamError, match="missing text part"):
        reader.feed({"type": "text-delta", "id": "t1", "delta": "x"})
    reader2 = UIMessageReader()
    reader2.feed_all([START, STEP, tool_start(), {"type": "reset-step"}])
    with pytest.raises(UIMessageStreamError, match="missing tool call"):
        reader2.feed(tool_delta("{"))


def test_reset_step_without_a_step_start_clears_every_part() -> None:
    assert read(START, {"type": "data-x", "data": 1}, {"type": "reset-step"})["parts"] == []


def test_error_keeps_the_partial_message_and_records_the_text() -> None:
    chunks = [
        START,
        STEP,
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "half"},
        {"type": "error", "errorText": "An error occurred."},
        {"type": "text-delta", "id": "t", "delta": " more"},
    ]
    reader = UIMessageReader()
    reader.feed_all(chunks)
    assert reader.error_text == "An error occurred."
    assert reader.message["parts"][1] == {"type": "text", "text": "half more", "state": "streaming"}
    stopping = UIMessageReader(stop_on_error=True)
    stopping.feed_all(chunks)
    assert stopping.message["parts"][1] == {"type": "text", "text": "half", "state": "streaming"}
    assert not stopping.failed


def test_abort_is_recorded_and_changes_nothing() -> None:
    reader = UIMessageReader()
    reader.feed_all([START, STEP, {"type": "text-start", "id": "t"}, {"type": "abort", "reason": "user"}])
    assert reader.aborted
    assert reader.abort_reason == "user"
    assert reader.message["parts"][1] == {"type": "text", "text": "", "state": "streaming"}
    assert not reader.finished


# -- continuing an assistant message -----------------------------------------------------

PAUSED = {
    "id": "msg-1",
    "role": "assistant",
    "metadata": {"a": {"b": 1}},
    "parts": [
        {"type": "step-start"},
        {"type": "text", "text": "Sending.", "state": "done"},
        {
            "type": "tool-send_email",
            "toolCallId": "call-1",
            "state": "approval-responded",
            "input": {"to": "x"},
            "approval": {"id": "ap-1", "approved": True},
        },
        {"type": "tool-get_weather", "toolCallId": "call-2", "state": "input-streaming", "rawInput": '{"ci'},
    ],
}


def test_continuing_a_message_appends_and_finds_its_tool_calls() -> None:
    message = read_ui_message(
        [
            {"type": "start", "messageId": "msg-1", "messageMetadata": {"a": {"c": 2}}},
            {"type": "tool-output-available", "toolCallId": "call-1", "output": "sent"},
            tool_delta('ty": "Oslo"}', call_id="call-2"),
            STEP,
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "Done."},
            {"type": "text-end", "id": "t"},
        ],
        message=PAUSED,
    )
    assert message == {
        "id": "msg-1",
        "role": "assistant",
        "metadata": {"a": {"b": 1, "c": 2}},
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Sending.", "state": "done"},
            {
                "type": "tool-send_email",
                "toolCallId": "call-1",
                "state": "output-available",
                "input": {"to": "x"},
                "approval": {"id": "ap-1", "approved": True},
                "output": "sent",
            },
            {
                "type": "tool-get_weather",
                "toolCallId": "call-2",
                "state": "input-streaming",
                "rawInput": '{"city": "Oslo"}',
                "input": {"city": "Oslo"},
            },
            {"type": "step-start"},
            {"type": "text", "text": "Done.", "state": "done"},
        ],
    }
    assert PAUSED["parts"][2]["state"] == "approval-responded"  # the caller's message is untouched


def test_a_non_assistant_message_is_not_continued() -> None:
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    assert read_ui_message([{"type": "start"}], message=user) == {"id": "", "role": "assistant", "parts": []}


# -- partial JSON ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "state"),
    [
        ('{"a": 1}', {"a": 1}, "successful-parse"),
        ('{"a": "b', {"a": "b"}, "repaired-parse"),
        ('{"a": tr', {"a": True}, "repaired-parse"),
        ('{"a": nul', {"a": None}, "repaired-parse"),
        ("[1, 2,", [1, 2], "repaired-parse"),
        ('{"a": 1.', {"a": 1}, "repaired-parse"),
        ('{"a": -', {}, "repaired-parse"),
        ('{"a":', {}, "repaired-parse"),
        ('{"a', {}, "repaired-parse"),
        ('"ab\\', "ab", "repaired-parse"),
        ('"x\\u00e', "x", "repaired-parse"),
        ('["a", {"b": [tru', ["a", {"b": [True]}], "repaired-parse"),
        ("[1] trailing", [1], "repaired-parse"),
        ("-", None, "failed-parse"),
        ("", None, "failed-parse"),
        ("NaN", None, "failed-parse"),
        ('{"__proto__": {"x": 1}}', None, "failed-parse"),
        ('{"constructor": {"prototype": {}}}', None, "failed-parse"),
        ('{"constructor": 1}', {"constructor": 1}, "successful-parse"),
        (None, None, "undefined-input"),
    ],
)
def test_parse_partial_json(text: str | None, value: Any, state: str) -> None:
    assert parse_partial_json(text) == (value, state)


def test_fix_json_closes_what_is_open() -> None:
    assert fix_json('{"a": [1, {"b": "c') == '{"a": [1, {"b": "c"}]}'
    assert fix_json('{"a": fa') == '{"a": false}'
    assert fix_json('{"a": 12e') == '{"a": 12}'


# -- the real client -------------------------------------------------------------------------

_NODE_READ = """
import { readUIMessageStream } from 'ai7';
const cases = JSON.parse(await new Promise(r => { let s = ''; process.stdin.on('data', d => s += d);
  process.stdin.on('end', () => r(s)); }));
const out = [];
for (const c of cases) {
  const stream = new ReadableStream({ start(ctrl) { for (const ch of c.chunks) ctrl.enqueue(ch); ctrl.close(); } });
  let error = null; let last = null;
  for await (const m of readUIMessageStream({ stream, message: c.message ?? undefined,
      onError: e => { error = error ?? e.message; } })) last = m;
  out.push({ message: last, error });
}
process.stdout.write(JSON.stringify(out));
"""


def _random_chunk(rng: random.Random) -> dict[str, Any]:
    ids, calls, names = ["a", "b"], ["c1", "c2", "c3"], ["weather", "my-tool"]
    frags = ['{"ci', 'ty": "Pa', 'ris", "n": [1, 2', ".5e", "3, tr", "ue, nu", "ll]", "}", '"', "\\u00", "e9"]
    kind = rng.choice(
        [
            "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta", "reasoning-end",
            "tool-input-start", "tool-input-delta", "tool-input-delta", "tool-input-available", "tool-input-error",
            "tool-output-available", "tool-output-error", "tool-output-denied", "tool-approval-request",
            "tool-approval-response", "start-step", "finish-step", "reset-step", "start", "finish",
            "message-metadata", "data-x", "source-url", "file", "custom", "error", "abort",
        ]
    )  # fmt: skip
    maybe = rng.random
    chunk: dict[str, Any] = {"type": kind}
    if kind.startswith(("text-", "reasoning-")):
        chunk["id"] = rng.choice(ids)
        if kind.endswith("delta"):
            chunk["delta"] = rng.choice(["x", "yz", "é🙂"])
        if maybe() < 0.3:
            chunk["providerMetadata"] = rng.choice([PM, PM2])
    elif kind == "tool-approval-response":
        chunk.update(approvalId=rng.choice(["ap1", "ap2"]), approved=maybe() < 0.5)
        if maybe() < 0.3:
            chunk["reason"] = "r"
    elif kind.startswith("tool-"):
        chunk["toolCallId"] = rng.choice(calls)
        if kind in ("tool-input-start", "tool-input-available", "tool-input-error"):
            chunk["toolName"] = rng.choice(names)
            for key, value in (
                ("dynamic", True),
                ("providerExecuted", True),
                ("title", "T"),
                ("toolMetadata", {"m": 1}),
            ):
                if maybe() < 0.25:
                    chunk[key] = value
            if maybe() < 0.25:
                chunk["providerMetadata"] = PM
        if kind == "tool-input-start" and maybe() < 0.2:
            chunk["inputEncoding"] = "text"
        if kind == "tool-input-delta":
            chunk["inputTextDelta"] = rng.choice(frags)
        if kind in ("tool-input-available", "tool-input-error"):
            chunk["input"] = rng.choice([{"city": "Paris"}, None, [1]])
        if kind in ("tool-input-error", "tool-output-error"):
            chunk["errorText"] = "bad"
        if kind == "tool-output-available":
            chunk["output"] = rng.choice([{"t": 1}, None])
            if maybe() < 0.3:
                chunk["preliminary"] = True
        if kind.startswith("tool-output") and kind != "tool-output-denied" and maybe() < 0.3:
            chunk["providerMetadata"] = PM2
        if kind == "tool-approval-request":
            chunk["approvalId"] = rng.choice(["ap1", "ap2"])
            if maybe() < 0.3:
                chunk["reason"] = "why"
    elif kind == "start":
        if maybe() < 0.5:
            chunk["messageId"] = rng.choice(["m1", "m2"])
        if maybe() < 0.5:
            chunk["messageMetadata"] = rng.choice([{"a": 1}, {"a": {"b": 2}}, {"a": [1]}, None])
    elif kind in ("finish", "message-metadata"):
        if maybe() < 0.5 or kind == "message-metadata":
            chunk["messageMetadata"] = rng.choice([{"a": {"c": 3}}, {"d": None}, None])
    elif kind == "data-x":
        chunk["data"] = rng.choice([{"v": 1}, [1], None])
        if maybe() < 0.6:
            chunk["id"] = rng.choice(["d1", "d2"])
        if maybe() < 0.3:
            chunk["transient"] = maybe() < 0.5
    elif kind == "source-url":
        chunk.update(sourceId="s1", url="https://x")
    elif kind == "file":
        chunk.update(url="data:,x", mediaType="text/plain")
    elif kind == "custom":
        chunk["kind"] = "openai.thing"
    elif kind == "error":
        chunk["errorText"] = "oops"
    return chunk


@pytest.mark.node
def test_reader_matches_the_real_ai7_reader_on_messy_streams(node: str) -> None:
    rng = random.Random(7)
    cases: list[dict[str, Any]] = []
    for n in range(300):
        given = PAUSED if n % 5 == 0 else None
        chunks = [{"type": "start", "messageId": "msg-1" if given else "m1"}, STEP]
        # Mostly streams the reader accepts (a refused chunk is usually
        # dropped, so that deep states are reached), some that it refuses.
        for _ in range(rng.randint(1, 30)):
            chunk = _random_chunk(rng)
            trial = UIMessageReader(message=given, reset_on_message_id_change=True)
            try:
                trial.feed_all([*chunks, chunk])
            except UIMessageStreamError:
                if rng.random() < 0.97:
                    continue
                chunks.append(chunk)
                break
            chunks.append(chunk)
        # readUIMessageStream snapshots only on writes: end on a chunk that writes
        chunks.append({"type": "data-probe", "data": n})
        cases.append({"chunks": chunks, "message": given})
    done = subprocess.run(
        [node, "--input-type=module", "-e", _NODE_READ],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        cwd=JS_DIR,
        check=True,
    )
    compared = 0
    for case, theirs in zip(cases, json.loads(done.stdout), strict=True):
        # readUIMessageStream resets on a new message id
        reader = UIMessageReader(message=case["message"], reset_on_message_id_change=True)
        error = None
        for chunk in case["chunks"]:
            try:
                reader.feed(chunk)
            except UIMessageStreamError as exc:
                error = error or str(exc)
                break
            error = error or reader.error_text
        assert error == theirs["error"], case
        if theirs["error"] is None:
            compared += 1
            assert reader.message == theirs["message"], case
            assert [list(p) for p in reader.message["parts"]] == [list(p) for p in theirs["message"]["parts"]]
    assert compared > 150
