"""The full live-run path, a plugin of the encoder benchmark's peer runner
(docs/benchmarks.md, "Reproduce"): tool loop + encoder → SSE bytes.

``make`` turns the workload's model-side events (the AI SDK's
LanguageModelV4 stream parts) into one ``ScriptedModel`` step each, untimed,
the way a provider adapter hands them over, and builds the workload's two
tools with their JSON Schemas; the tools answer with the recorded results.
``run`` then times what a live request does: ``ToolLoop`` drives the model
step by step, validates each call's arguments against its tool's schema,
runs the step's calls concurrently as tasks, feeds the results back as
messages, and its events go through ``aencode_events`` /
``UIMessageEncoder`` and the ai@7 renderer to SSE frames.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import DONE_FRAME
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.render import UIStreamRenderer
from uistream_app.protocol.ui.stream import aencode_events
from uistream_app.runs import ScriptedModel, Tool, ToolContext, ToolLoop, UserMessage
from uistream_app.runs.model import ModelEvent

Run = Callable[..., Awaitable[tuple[int, int]]]


def model_steps(wl: dict[str, Any]) -> list[list[ModelEvent]]:
    """Each workload step as the events a model stream yields (the tool
    results are not the model's: the loop's tools produce them)."""
    steps = []
    for step in wl["steps"]:
        events: list[ModelEvent] = []
        for e in step["events"]:
            t = e["type"]
            if t == "text-delta":
                events.append(ev.TextDelta(e["delta"]))
            elif t == "reasoning-delta":
                events.append(ev.ReasoningDelta(e["delta"]))
            elif t == "tool-input-delta":
                events.append(ev.ToolCallDelta(e["toolCallId"], e["delta"]))
            elif t == "text-end":
                events.append(ev.TextEnd())
            elif t == "reasoning-end":
                events.append(ev.ReasoningEnd())
            elif t == "tool-input-start":
                events.append(ev.ToolCallStart(e["toolCallId"], e["toolName"]))
            elif t == "tool-call":
                events.append(ev.ToolCall(e["toolCallId"], e["toolName"], e["input"]))
        events.append(ev.Finish(step["finish_reason"]))
        steps.append(events)
    return steps


def recorded_tools(wl: dict[str, Any]) -> list[Tool]:
    results = {
        e["toolCallId"]: e["result"] for step in wl["steps"] for e in step["events"] if e["type"] == "tool-result"
    }

    async def replay(context: ToolContext, **arguments: Any) -> Any:
        return results[context.tool_call_id]

    return [
        Tool(replay, name=name, description=spec["description"], parameters=spec["parameters"])
        for name, spec in wl["tools"].items()
    ]


def make(wl: dict[str, Any]) -> Run:
    steps = model_steps(wl)
    tools = recorded_tools(wl)
    message_id = wl["message_id"]
    prompt = [UserMessage("Run the workload.")]

    async def run(sink: list[bytes] | None = None) -> tuple[int, int]:
        model = ScriptedModel(name="workload")
        for step in steps:
            model.enqueue_events(step)
        loop = ToolLoop(model, tools, max_steps=len(steps))
        render = UIStreamRenderer(7).render
        n = nb = 0
        async for chunk in aencode_events(loop.run(prompt), UIMessageEncoder(message_id)):
            frame = render(chunk)
            n += 1
            nb += len(frame)
            if sink is not None:
                sink.append(frame)
        if sink is not None:
            sink.append(DONE_FRAME)
        return n + 1, nb + len(DONE_FRAME)

    return run
