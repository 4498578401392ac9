"""``parse_run_agent_input`` (strict, tolerant where the protocol says so),
the AG-UI message conversions and the client-reducer twin, and the event
schema table checked against ag-ui-protocol."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from uistream_app.protocol.agui.events import EVENT_FIELDS, AGUIEventFormatError, validate_event
from uistream_app.protocol.agui.input import AGUIInputError, parse_run_agent_input
from uistream_app.protocol.agui.messages import (
    MessageConversionError,
    agui_user_message,
    fold_messages,
    ui_messages_to_agui,
    ui_user_message,
)

from .agui_oracles import pydantic_roundtrip

USER = {"id": "u1", "role": "user", "content": "hi"}


def body(**changes: Any) -> bytes:
    data: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": [USER]}
    data.update(changes)
    return json.dumps(data).encode()


def parse(raw: bytes, max_bytes: int = 1 << 20) -> Any:
    return parse_run_agent_input(raw, max_bytes=max_bytes)


def test_a_full_input() -> None:
    raw = body(
        protocolVersion="1.0",
        parentRunId="r0",
        state={"n": 1},
        tools=[{"name": "confirm", "description": "ask", "parameters": {"type": "object"}}],
        context=[{"description": "page", "value": "/"}],
        forwardedProps={"x": 1},
        resume=[{"interruptId": "i1", "status": "resolved", "payload": {"ok": True}}],
        messages=[
            {"id": "s", "role": "system", "content": "be brief"},
            {"id": "d", "role": "developer", "content": "dev"},
            {
                "id": "a",
                "role": "assistant",
                "content": "calling",
                "toolCalls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
            {"id": "t", "role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "ok"}], "error": "x"},
            {"id": "r", "role": "reasoning", "content": "why"},
            {"id": "act", "role": "activity", "activityType": "plan", "content": {}},
            USER,
        ],
    )
    agui = parse(raw)
    assert (agui.thread_id, agui.run_id, agui.parent_run_id, agui.protocol_version) == ("t1", "r1", "r0", "1.0")
    assert agui.state == {"n": 1}
    assert agui.forwarded_props == {"x": 1}
    assert agui.last_message == USER
    assert len(agui.messages) == 7
    RunAgentInput.model_validate_json(raw)  # the package reads it too


@pytest.mark.parametrize("role", [None, "missing"])
def test_a_null_or_missing_role_reads_as_the_default(role: str | None) -> None:
    message: dict[str, Any] = {"id": "a", "content": "built from a stream"}
    if role is None:
        message["role"] = None
    agui = parse(body(messages=[message, USER]))
    assert agui.messages[0]["role"] == "assistant"


def test_absent_and_null_where_the_schema_allows() -> None:
    agui = parse(body(state=None))
    assert (agui.state, agui.tools, agui.context, agui.resume, agui.forwarded_props) == (None, [], [], [], None)


# (name, body, status, code, field)
BAD: list[tuple[str, bytes, int, str, str | None]] = [
    ("empty", b" ", 400, "empty", None),
    ("not json", b"{", 400, "invalid_json", None),
    ("not an object", b"[]", 400, "invalid_json", None),
    ("too deep", body(state=json.loads("[" * 40 + "]" * 40)), 400, "too_deep", None),
    ("missing threadId", json.dumps({"runId": "r", "messages": []}).encode(), 400, "invalid", "threadId"),
    ("runId not a string", body(runId=3), 400, "invalid", "runId"),
    ("parentRunId null", body(parentRunId=None), 400, "invalid", "parentRunId"),
    ("protocol 2", body(protocolVersion="2.0"), 400, "unsupported_protocol_version", "protocolVersion"),
    ("missing messages", json.dumps({"threadId": "t", "runId": "r"}).encode(), 400, "invalid", "messages"),
    ("messages not a list", body(messages={}), 400, "invalid", "messages"),
    ("unknown role", body(messages=[{"id": "x", "role": "bot", "content": ""}]), 400, "invalid", "messages[0].role"),
    ("user content a number", body(messages=[{**USER, "content": 5}]), 400, "invalid", "messages[0].content"),
    ("message without id", body(messages=[{"role": "user", "content": "x"}]), 400, "invalid", "messages[0].id"),
    (
        "assistant content null",
        body(messages=[{"id": "a", "role": "assistant", "content": None}]),
        400,
        "invalid",
        "messages[0].content",
    ),
    (
        "bad tool call",
        body(messages=[{"id": "a", "role": "assistant", "toolCalls": [{"id": "c"}]}]),
        400,
        "invalid",
        "messages[0].toolCalls",
    ),
    (
        "tool message without call id",
        body(messages=[{"id": "t", "role": "tool", "content": "x"}]),
        400,
        "invalid",
        "messages[0].toolCallId",
    ),
    (
        "bad content part",
        body(messages=[{**USER, "content": [{"type": "binary"}]}]),
        400,
        "invalid",
        "messages[0].content",
    ),
    (
        "subagentRunId null",
        body(messages=[{**USER, "subagentRunId": None}]),
        400,
        "invalid",
        "messages[0].subagentRunId",
    ),
    ("tools null", body(tools=None), 400, "invalid", "tools"),
    ("tool without description", body(tools=[{"name": "f"}]), 400, "invalid", "tools[0].description"),
    (
        "tool parameters null",
        body(tools=[{"name": "f", "description": "", "parameters": None}]),
        400,
        "invalid",
        "tools[0].parameters",
    ),
    (
        "context value not a string",
        body(context=[{"description": "d", "value": 1}]),
        400,
        "invalid",
        "context[0].value",
    ),
    ("forwardedProps null", body(forwardedProps=None), 400, "invalid", "forwardedProps"),
    ("resume bad status", body(resume=[{"interruptId": "i", "status": "maybe"}]), 400, "invalid", "resume[0].status"),
]


@pytest.mark.parametrize(("raw", "status", "code", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input(raw: bytes, status: int, code: str, field: str | None) -> None:
    with pytest.raises(AGUIInputError) as info:
        parse(raw)
    assert (info.value.status, info.value.code, info.value.field) == (status, code, field)
    assert info.value.message


def test_too_large() -> None:
    with pytest.raises(AGUIInputError) as info:
        parse(body(), max_bytes=10)
    assert (info.value.status, info.value.code) == (413, "too_large")


# -- user messages both ways -------------------------------------------------------------------


def test_user_messages_convert_both_ways() -> None:
    agui = {
        "id": "u1",
        "role": "user",
        "metadata": {"k": 1},
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}},
            {
                "type": "document",
                "source": {"type": "url", "value": "https://e.x/a.pdf", "mimeType": "application/pdf"},
            },
        ],
    }
    ui = ui_user_message(agui)
    assert ui == {
        "id": "u1",
        "role": "user",
        "parts": [
            {"type": "text", "text": "look"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="},
            {"type": "file", "mediaType": "application/pdf", "url": "https://e.x/a.pdf"},
        ],
        "metadata": {"k": 1},
    }
    assert agui_user_message(ui) == agui
    assert ui_user_message(USER) == {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    assert agui_user_message(ui_user_message(USER)) == USER


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"type": "url", "value": "https://e.x/i.png"}, "m.content[0].source.mimeType"),
        ({"type": "file", "value": "file-123"}, "m.content[0].source.type"),
    ],
)
def test_parts_with_no_ui_form_are_refused(source: dict[str, Any], field: str) -> None:
    with pytest.raises(MessageConversionError) as info:
        ui_user_message({"id": "u", "role": "user", "content": [{"type": "image", "source": source}]}, "m")
    assert info.value.field == field


# -- the reducer twin ----------------------------------------------------------------------------


def test_fold_follows_the_client_reducer() -> None:
    events = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": "s"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
        {"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f", "parentMessageId": "m"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "{}"},
        {"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "g", "parentMessageId": "nowhere"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "h"},
        {"type": "TEXT_MESSAGE_START", "messageId": "later"},
        {"type": "TOOL_CALL_RESULT", "messageId": "ra", "toolCallId": "a", "content": "1", "metadata": {"k": 1}},
        {"type": "TOOL_CALL_RESULT", "messageId": "ra2", "toolCallId": "a", "content": "2"},
    ]
    call = {"type": "function", "function": {"arguments": ""}}
    assert fold_messages(events) == [
        {
            "id": "m",
            "role": "assistant",
            "content": "x",
            "subagentRunId": "s",
            "toolCalls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"id": "ra", "toolCallId": "a", "role": "tool", "content": "1", "metadata": {"k": 1}},
        {"id": "ra2", "toolCallId": "a", "role": "tool", "content": "2"},
        {
            "id": "nowhere",
            "role": "assistant",
            "toolCalls": [{**call, "id": "b", "function": {"name": "g", "arguments": ""}}],
        },
        {
            "id": "c",
            "role": "assistant",
            "toolCalls": [{**call, "id": "c", "function": {"name": "h", "arguments": ""}}],
        },
        {"id": "later", "role": "assistant", "content": ""},
    ]


def test_a_stored_conversation_as_agui_messages() -> None:
    stored = [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "weather?"}]},
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "text", "text": "Checking.", "state": "done"},
                {
                    "type": "tool-get_weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Oslo"},
                    "output": {"t": 3},
                },
                {"type": "step-start"},
                {"type": "text", "text": "3 °C.", "state": "done"},
            ],
        },
    ]
    assert ui_messages_to_agui(stored) == [
        {"id": "u1", "role": "user", "content": "weather?"},
        {
            "id": "a1-text-0",
            "role": "assistant",
            "content": "Checking.",
            "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'}}
            ],
        },
        {"id": "c1-result", "toolCallId": "c1", "role": "tool", "content": '{"t":3}'},
        {"id": "a1-text-1", "role": "assistant", "content": "3 °C."},
    ]


# -- the event table against ag-ui-protocol -------------------------------------------------------

MINIMAL: dict[str, dict[str, Any]] = {
    "TEXT_MESSAGE_START": {"messageId": "m", "role": "assistant", "name": "n"},
    "TEXT_MESSAGE_CONTENT": {"messageId": "m", "delta": "d"},
    "TEXT_MESSAGE_END": {"messageId": "m"},
    "TEXT_MESSAGE_CHUNK": {"messageId": "m", "delta": "d"},
    "TOOL_CALL_START": {"toolCallId": "c", "toolCallName": "f", "parentMessageId": "m"},
    "TOOL_CALL_ARGS": {"toolCallId": "c", "delta": "{}"},
    "TOOL_CALL_END": {"toolCallId": "c"},
    "TOOL_CALL_CHUNK": {"toolCallId": "c", "toolCallName": "f", "delta": "{}"},
    "TOOL_CALL_RESULT": {
        "messageId": "r",
        "toolCallId": "c",
        "content": [{"type": "text", "text": "x"}],
        "role": "tool",
    },
    "STATE_SNAPSHOT": {"snapshot": None},
    "STATE_DELTA": {"delta": [{"op": "move", "from": "/a", "path": "/b"}]},
    "MESSAGES_SNAPSHOT": {"messages": [USER, {"id": "r", "role": "reasoning", "content": "x"}]},
    "ACTIVITY_SNAPSHOT": {"messageId": "a", "activityType": "t", "content": {}, "replace": False},
    "ACTIVITY_DELTA": {"messageId": "a", "activityType": "t", "patch": []},
    "RAW": {"event": None, "source": "s"},
    "CUSTOM": {"name": "n", "value": None},
    "RUN_STARTED": {"threadId": "t", "runId": "r", "parentRunId": "p", "protocolVersion": "1.0"},
    "RUN_FINISHED": {
        "threadId": "t",
        "runId": "r",
        "result": 1,
        "outcome": {"type": "interrupt", "interrupts": [{"id": "i", "reason": "r", "toolCallId": "c"}]},
        "usage": [{"inputTokens": 1, "model": "m"}],
    },
    "RUN_ERROR": {"message": "m", "code": "c"},
    "STEP_STARTED": {"stepName": "s"},
    "STEP_FINISHED": {"stepName": "s"},
    "REASONING_START": {"messageId": "m"},
    "REASONING_MESSAGE_START": {"messageId": "m", "role": "reasoning"},
    "REASONING_MESSAGE_CONTENT": {"messageId": "m", "delta": "d"},
    "REASONING_MESSAGE_END": {"messageId": "m"},
    "REASONING_MESSAGE_CHUNK": {"messageId": "m", "delta": "d"},
    "REASONING_END": {"messageId": "m"},
    "REASONING_ENCRYPTED_VALUE": {"subtype": "tool-call", "entityId": "c", "encryptedValue": "e"},
    "SUBAGENT_STARTED": {"subagentRunId": "s", "name": "n", "parentToolCallId": "c"},
    "SUBAGENT_FINISHED": {"subagentRunId": "s", "outcome": {"type": "suspended", "interruptIds": ["i"]}},
    "SUBAGENT_ERROR": {"subagentRunId": "s", "message": "m", "code": "c"},
}


def test_every_event_type_has_an_example() -> None:
    assert set(MINIMAL) == set(EVENT_FIELDS)


@pytest.mark.parametrize("event_type", sorted(MINIMAL))
def test_what_we_accept_the_package_accepts_unchanged(event_type: str) -> None:
    event = {"type": event_type, "timestamp": 1, "metadata": {"k": None}, **MINIMAL[event_type]}
    validate_event(event)
    pydantic_roundtrip(event)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"type": "RUN_STARTED", "threadId": "t"}, "runId"),
        ({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": True}, "timestamp"),
        ({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 2**60}, "timestamp"),
        ({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": None}, "result"),
        (
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "interrupt", "interrupts": []}},
            "outcome",
        ),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "tool"}, "role"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "metadata": None}, "metadata"),
        ({"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": None}, "subagentRunId"),
        ({"type": "RUN_ERROR", "message": "m", "subagentRunId": "s"}, "subagentRunId"),
        ({"type": "REASONING_MESSAGE_START", "messageId": "m", "role": "assistant"}, "role"),
        ({"type": "TOOL_CALL_RESULT", "messageId": "m", "toolCallId": "c", "content": 3}, "content"),
        ({"type": "ACTIVITY_SNAPSHOT", "messageId": "m", "activityType": "t", "content": []}, "content"),
        ({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "a", "value": 1}]}, "delta"),
        ({"type": "CUSTOM", "name": "n"}, "value"),
    ],
)
def test_what_we_refuse(event: dict[str, Any], field: str) -> None:
    with pytest.raises(AGUIEventFormatError) as info:
        validate_event(event)
    assert info.value.field == field
