"""``protocol/agui/source.py``: a hand-written agent as a source of events
for the canonical log (each rule), and ``agent_source`` running, failing
and being closed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uistream_app.protocol import events as ev
from uistream_app.protocol.agui.handles import RunContext
from uistream_app.protocol.agui.source import SourceEventConverter, agent_source
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.protocol.ui.stream import aencode_batches

pytestmark = pytest.mark.asyncio


def convert(events: list[dict[str, Any]]) -> list[ev.Event]:
    converter = SourceEventConverter()
    return [out for event in events for out in converter.feed(event)]


async def test_1_2_3_5_the_mapping() -> None:
    assert convert(
        [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m0"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m0"},
            {"type": "REASONING_START", "messageId": "r0"},
            {"type": "REASONING_MESSAGE_START", "messageId": "r0", "role": "reasoning"},
            {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r0", "delta": "hm"},
            {"type": "REASONING_MESSAGE_END", "messageId": "r0"},
            {"type": "REASONING_END", "messageId": "r0"},
            {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
            {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": "c"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "x",
                "toolCallId": "c",
                "content": "no",
                "metadata": {"uistream": {"outcome": "error"}},
            },
            {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
    ) == [
        ev.TextDelta(""),  # an empty message is still one text part
        ev.TextEnd(),
        ev.ReasoningDelta("hm"),
        ev.ReasoningEnd(),
        ev.ToolCallStart("c", "f"),
        ev.ToolCallDelta("c", "{}"),
        ev.ToolCall("c", "f", "{}"),
        ev.ToolResult("c", "no", is_error=True),
        ev.StepFinished(),  # the next step opens after a tool result
        ev.TextDelta("ok"),
        ev.TextEnd(),
        ev.Done(),
    ]


async def test_4_other_events_travel_as_transient_data() -> None:
    events = [
        {"type": "STEP_STARTED", "timestamp": 5, "stepName": "s", "subagentRunId": "x"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "x", "name": "n"},
    ]
    assert convert(events) == [
        ev.Data("agui-event", {"type": "STEP_STARTED", "stepName": "s", "subagentRunId": "x"}, transient=True),
        ev.Data("agui-event", {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}, transient=True),
        ev.Data("agui-event", {"type": "SUBAGENT_STARTED", "subagentRunId": "x", "name": "n"}, transient=True),
    ]


async def encode(source: Any, message_id: str = "msg1") -> tuple[list[dict[str, Any]], list[BaseException]]:
    failures: list[BaseException] = []
    encoder = UIMessageEncoder(message_id)
    chunks = [c async for batch in aencode_batches(source, encoder, on_error=failures.append) for c in batch]
    return chunks, failures


async def test_an_agent_run_becomes_a_stored_message_without_the_carried_events() -> None:
    async def agent(ctx: RunContext) -> None:
        ctx.state_snapshot({"x": 1})
        with ctx.tool_call("f") as call:
            call.args({"a": 1})
        call.result({"ok": True})
        ctx.say("done")

    seen: list[dict[str, Any]] = []
    chunks, failures = await encode(
        agent_source(agent, thread_id="t", run_id="r", message_id="msg1", on_event=seen.append)
    )
    assert not failures
    assert seen[0]["type"] == "RUN_STARTED"
    reader = UIMessageReader()
    for chunk in chunks:
        reader.feed(chunk)
    parts = reader.message["parts"]
    assert [p["type"] for p in parts] == ["step-start", "tool-f", "step-start", "text"]
    assert parts[1]["output"] == {"ok": True}
    assert {
        "type": "data-agui-event",
        "data": {"type": "STATE_SNAPSHOT", "snapshot": {"x": 1}},
        "transient": True,
    } in chunks


async def test_a_failing_agent_raises_after_everything_it_emitted() -> None:
    async def agent(ctx: RunContext) -> None:
        ctx.say("first")
        raise LookupError("private")

    chunks, failures = await encode(agent_source(agent, thread_id="t", run_id="r"))
    assert [type(f) for f in failures] == [LookupError]
    assert chunks[-1] == {"type": "error", "errorText": "An error occurred."}
    assert {"type": "text-delta", "id": "text-0", "delta": "first"} in chunks


async def test_closing_the_source_cancels_the_agent() -> None:
    released = asyncio.Event()
    cancelled: list[bool] = []

    async def agent(ctx: RunContext) -> None:
        with ctx.assistant_message() as message:
            message.delta("waiting")
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.append(ctx.cancelled)
                released.set()

    source = agent_source(agent, thread_id="t", run_id="r")
    first = await anext(source)
    assert first == ev.TextDelta("waiting")
    await source.aclose()  # type: ignore[attr-defined]
    assert released.is_set()
    assert cancelled == [True]


async def test_an_agents_result_survives_the_canonical_log() -> None:
    from uistream_app.protocol.agui.renderer import AGUIRenderer

    async def agent(ctx: RunContext) -> None:
        ctx.say("done")
        ctx.finish(result={"answer": 42})

    seen: list[dict[str, Any]] = []
    chunks, _ = await encode(agent_source(agent, thread_id="t", run_id="r", on_event=seen.append))
    renderer = AGUIRenderer("t", "r", clock=lambda: 0)
    wire = [e for c in chunks for e in renderer.events(c)]
    assert wire[-1]["result"] == seen[-1]["result"] == {"answer": 42}
