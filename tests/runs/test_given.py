"""``runs.given``: what a run was given, as stored with it, is bounded and
holds no file bytes and no URL secrets; what it leaves out it says."""

from __future__ import annotations

from typing import Any

from uistream_app.runs import AssistantMessage, SystemMessage, Tool, ToolCallRequest, ToolMessage, UserMessage
from uistream_app.runs.given import (
    MAX_SCHEMA_CHARS,
    MAX_SENT_CHARS,
    MAX_TEXT_CHARS,
    MAX_TOOLS,
    file_reference,
    messages_record,
    tools_record,
)
from uistream_app.runs.messages import FilePart, ReasoningPart


def test_a_long_history_keeps_the_newest_messages_after_a_marker() -> None:
    turns = [UserMessage(f"question {n}: " + "x" * 990) for n in range(100)]
    record = messages_record([SystemMessage("Be brief."), *turns], system_prompt="Be brief.")
    assert record[0] == {"role": "system", "system_prompt": True}
    marker = record[1]
    kept = record[2:]
    assert marker["omitted"] == 100 - len(kept)
    assert marker["characters"] == sum(len(t.content) for t in turns[: marker["omitted"]])
    assert kept[-1]["text"].startswith("question 99: ")
    assert kept[0]["text"].startswith(f"question {marker['omitted']}: ")
    assert sum(len(m["text"]) for m in kept) <= MAX_SENT_CHARS
    assert len(kept) == MAX_SENT_CHARS // 1003


def test_a_short_history_is_kept_whole_and_a_summary_stays_first() -> None:
    summary = SystemMessage("Summary of the earlier conversation:\nthe user likes tea")
    record = messages_record([SystemMessage("prompt"), summary, UserMessage("hi")], system_prompt="prompt")
    assert record == [
        {"role": "system", "system_prompt": True},
        {"role": "system", "text": summary.content},
        {"role": "user", "text": "hi"},
    ]


def test_a_long_text_is_cut_with_a_marker_and_the_newest_message_is_kept_even_alone() -> None:
    huge = "y" * (MAX_TEXT_CHARS + 500)
    (record,) = messages_record([ToolMessage("call_1", huge, tool_name="fetch")], max_chars=10)
    assert record["text"] == "y" * MAX_TEXT_CHARS + "\n[… 500 more characters not stored]"
    assert record["tool_name"] == "fetch"


def test_an_assistant_message_keeps_its_calls_and_reasoning_but_no_provider_secrets() -> None:
    message = AssistantMessage(
        "Let me look.",
        (ToolCallRequest("call_1", "lookup", '{"id": 1}'),),
        reasoning="the user wants",
        reasoning_parts=(ReasoningPart("the user wants", {"anthropic": {"signature": "sig-secret"}}),),
    )
    (record,) = messages_record([message])
    assert record == {
        "role": "assistant",
        "text": "Let me look.",
        "reasoning": "the user wants",
        "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": '{"id": 1}'}],
    }


def test_files_are_references_never_bytes_nor_url_secrets() -> None:
    inline = FilePart("image/png", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==", "cat.png", 68)
    signed = FilePart(
        "application/pdf", "https://ada:pw@files.example.com:8443/a/report.pdf?X-Amz-Signature=abc#page=2", "report.pdf"
    )
    (record,) = messages_record([UserMessage("look", files=(inline, signed))])
    assert record["files"] == [
        {"media_type": "image/png", "filename": "cat.png", "size": 68, "url": "", "inline": True},
        {
            "media_type": "application/pdf",
            "filename": "report.pdf",
            "size": None,
            "url": "https://files.example.com:8443/a/report.pdf",
        },
    ]
    assert (
        file_reference("/api/files/0b6f4f39-6c4e-4d0e-9d0f-2f0e1b2c3d4e")
        == "/api/files/0b6f4f39-6c4e-4d0e-9d0f-2f0e1b2c3d4e"
    )


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {}


def test_tools_are_recorded_as_the_model_is_told_of_them() -> None:
    (record,), omitted = tools_record([Tool(get_weather, requires_approval=True)])
    assert omitted == 0
    assert record == {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": Tool(get_weather).parameters,
        "requires_approval": True,
    }
    assert record["parameters"]["properties"] == {"city": {"type": "string"}}


def test_a_huge_schema_and_too_many_tools_are_left_out_and_counted() -> None:
    wide = {"type": "object", "properties": {f"field_{n}": {"type": "string"} for n in range(400)}}
    tools = [Tool(get_weather, name=f"tool_{n}", parameters=wide if n == 0 else None) for n in range(MAX_TOOLS + 3)]
    records, omitted = tools_record(tools)
    assert omitted == 3
    assert len(records) == MAX_TOOLS
    assert "parameters" not in records[0]
    assert records[0]["parameters_cut"] > MAX_SCHEMA_CHARS
    assert records[1]["parameters"]["properties"] == {"city": {"type": "string"}}
