"""Stored UI messages ⇄ model messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from uistream_app.runs import (
    AssistantMessage,
    ModelMessage,
    ScriptedModel,
    SystemMessage,
    ToolApproval,
    ToolCallRequest,
    ToolLoop,
    ToolMessage,
    UserMessage,
    approvals_from_ui,
    model_to_ui_messages,
    tool,
    ui_to_model_messages,
)
from uistream_app.runs.scripted import call, reasoning

CONVERSATION: list[dict[str, Any]] = [
    {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather in Paris and 2+2?"}]},
    {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Need tools.", "state": "done"},
            {"type": "text", "text": "Checking.", "state": "done"},
            {
                "type": "tool-get_weather",
                "toolCallId": "c1",
                "state": "output-available",
                "input": {"city": "Paris"},
                "output": {"temp": 21},
            },
            {
                "type": "tool-calculate",
                "toolCallId": "c2",
                "state": "output-error",
                "input": {"expression": "2+2"},
                "errorText": "An error occurred.",
            },
            {"type": "step-start"},
            {"type": "text", "text": "21 degrees.", "state": "done"},
        ],
    },
    {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "thanks"}]},
]

MODEL_MESSAGES: list[ModelMessage] = [
    SystemMessage("Be brief."),
    UserMessage("Weather in Paris and 2+2?"),
    AssistantMessage(
        "Checking.",
        (
            ToolCallRequest("c1", "get_weather", '{"city": "Paris"}'),
            ToolCallRequest("c2", "calculate", '{"expression": "2+2"}'),
        ),
        "Need tools.",
    ),
    ToolMessage("c1", '{"temp": 21}', False, "get_weather"),
    ToolMessage("c2", "An error occurred.", True, "calculate"),
    AssistantMessage("21 degrees."),
    UserMessage("thanks"),
]


def ids(*values: str) -> Any:
    it: Iterator[str] = iter(values)
    return lambda: next(it)


def test_ui_messages_become_model_messages() -> None:
    assert ui_to_model_messages(CONVERSATION) == MODEL_MESSAGES


def test_and_back() -> None:
    assert model_to_ui_messages(MODEL_MESSAGES, id_factory=ids("s", "u1", "a1", "u2")) == CONVERSATION


def test_calls_without_an_outcome_are_dropped_except_at_the_very_end() -> None:
    pending = {
        "type": "tool-send_email",
        "toolCallId": "c9",
        "state": "approval-responded",
        "input": {"to": "a@b.c"},
        "approval": {"id": "ap9", "approved": True},
    }
    streaming = {"type": "tool-x", "toolCallId": "c8", "state": "input-streaming", "input": {"partial": 1}}
    middle = {
        "id": "a",
        "role": "assistant",
        "parts": [{"type": "step-start"}, {"type": "text", "text": "Hm."}, pending, streaming],
    }
    later = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "never mind"}]}
    assert ui_to_model_messages([middle, later]) == [AssistantMessage("Hm."), UserMessage("never mind")]
    assert ui_to_model_messages([middle]) == [
        AssistantMessage("Hm.", (ToolCallRequest("c9", "send_email", '{"to": "a@b.c"}'),))
    ]
    assert approvals_from_ui([middle]) == {"c9": ToolApproval("ap9", True, None)}
    assert approvals_from_ui([middle, later]) == {}


def test_dynamic_tools_denials_raw_inputs_and_string_outputs() -> None:
    message = {
        "id": "a",
        "role": "assistant",
        "parts": [
            {
                "type": "dynamic-tool",
                "toolName": "lookup",
                "toolCallId": "d1",
                "state": "output-available",
                "input": {"q": 1},
                "output": "plain text",
            },
            {
                "type": "tool-send_email",
                "toolCallId": "d2",
                "state": "output-denied",
                "input": {},
                "approval": {"id": "x", "approved": False, "reason": "no"},
            },
            {
                "type": "tool-calc",
                "toolCallId": "d3",
                "state": "output-error",
                "rawInput": '{"expr',
                "errorText": "Invalid JSON",
            },
        ],
    }
    assert ui_to_model_messages([message]) == [
        AssistantMessage(
            "",
            (
                ToolCallRequest("d1", "lookup", '{"q": 1}'),
                ToolCallRequest("d2", "send_email", "{}"),
                ToolCallRequest("d3", "calc", '{"expr'),
            ),
        ),
        ToolMessage("d1", "plain text", False, "lookup"),
        ToolMessage("d2", "The user denied this tool call. Reason: no", True, "send_email"),
        ToolMessage("d3", "Invalid JSON", True, "calc"),
    ]


@pytest.mark.asyncio
async def test_a_recorded_loop_run_reads_back_as_the_conversation_the_model_saw() -> None:
    """Loop → encoder → reader (the browser's twin) → model messages: the
    model is told exactly what it was told during the run."""
    from uistream_app.protocol.ui.encoder import UIMessageEncoder
    from uistream_app.protocol.ui.reader import UIMessageReader
    from uistream_app.protocol.ui.stream import aencode_events

    @tool
    async def get_weather(city: str) -> dict[str, Any]:
        """Weather."""
        return {"city": city, "temp": 21}

    model = ScriptedModel(
        [reasoning("Need data."), "Checking.", call("get_weather", {"city": "Paris"}), call("get_weather", "{bad")],
        ["One more.", call("get_weather", {"city": "Oslo"})],
        "Done.",
    )
    user = UserMessage("weather?")
    reader = UIMessageReader(message_id="m1")
    events = ToolLoop(model, [get_weather]).run([user])
    async for chunk in aencode_events(events, UIMessageEncoder("m1")):
        reader.feed(chunk)
    stored = reader.message
    # The last model call saw the whole conversation of the run but its own answer.
    seen = list(model.requests[-1].messages)
    assert ui_to_model_messages([{"role": "user", "parts": [{"type": "text", "text": "weather?"}]}, stored]) == [
        *seen,
        AssistantMessage("Done."),
    ]


SIGNED = {"anthropic": {"signature": "sig-1"}}
REDACTED = {"anthropic": {"redactedData": "opaque"}}


def test_reasoning_parts_keep_their_provider_metadata_and_provider_run_tools_go_into_parts_only() -> None:
    from uistream_app.runs import ReasoningPart
    from uistream_app.runs.messages import ProviderToolCall, ProviderToolResult, TextPart

    assistant = {
        "id": "a1",
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "Look it up.", "state": "done", "providerMetadata": SIGNED},
            {"type": "reasoning", "text": "", "state": "done", "providerMetadata": REDACTED},
            {"type": "reasoning", "text": " Plain.", "state": "done"},
            {
                "type": "tool-web_search",
                "toolCallId": "srv1",
                "state": "output-available",
                "input": {"query": "a"},
                "output": [],
                "providerExecuted": True,
            },
            {"type": "text", "text": "Found nothing.", "state": "done"},
        ],
    }
    (message,) = ui_to_model_messages([assistant])
    # Not one of the loop's calls, nor a tool message...
    assert message == AssistantMessage(
        "Found nothing.",
        (),
        "Look it up. Plain.",
        (ReasoningPart("Look it up.", SIGNED), ReasoningPart("", REDACTED)),
    )
    # ...but in the step's parts, in order, for the native models to send back.
    assert message.parts == (
        ReasoningPart("Look it up.", SIGNED),
        ReasoningPart("", REDACTED),
        ReasoningPart(" Plain.", {}),
        ProviderToolCall("srv1", "web_search", {"query": "a"}),
        ProviderToolResult("srv1", "web_search", []),
        TextPart("Found nothing."),
    )


def test_reasoning_parts_go_back_to_ui_parts_with_their_metadata() -> None:
    from uistream_app.runs import ReasoningPart

    message = AssistantMessage(
        "Hi.", (), "Look it up.", (ReasoningPart("Look it up.", SIGNED), ReasoningPart("", REDACTED))
    )
    (ui,) = model_to_ui_messages([message], id_factory=lambda: "a1")
    assert ui["parts"][1:3] == [
        {"type": "reasoning", "text": "Look it up.", "state": "done", "providerMetadata": SIGNED},
        {"type": "reasoning", "text": "", "state": "done", "providerMetadata": REDACTED},
    ]
    assert ui_to_model_messages([ui]) == [message]
