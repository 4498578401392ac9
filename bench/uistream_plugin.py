"""The encoder, a plugin of the encoder benchmark's peer runner
(docs/benchmarks.md, "Reproduce"): workload source events → SSE bytes.

``make`` maps the workload's events (the AI SDK's LanguageModelV4 stream
parts) to uistream's source events once, untimed, the way a provider adapter
would hand them over, and times ``UIMessageEncoder`` + the ai@7 renderer
over them. ``make_with_conversion`` also times that mapping, for an honest
upper bound.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import DONE_FRAME
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.render import UIStreamRenderer

Run = Callable[..., Awaitable[tuple[int, int]]]


def source_events(wl: dict[str, Any]) -> Iterator[ev.Event]:
    for step_no, step in enumerate(wl["steps"]):
        for e in step["events"]:
            t = e["type"]
            if t == "text-delta":
                yield ev.TextDelta(e["delta"])
            elif t == "reasoning-delta":
                yield ev.ReasoningDelta(e["delta"])
            elif t == "tool-input-delta":
                yield ev.ToolCallDelta(e["toolCallId"], e["delta"])
            elif t == "text-end":
                yield ev.TextEnd()
            elif t == "reasoning-end":
                yield ev.ReasoningEnd()
            elif t == "tool-input-start":
                yield ev.ToolCallStart(e["toolCallId"], e["toolName"])
            elif t == "tool-call":
                yield ev.ToolCall(e["toolCallId"], e["toolName"], e["input"])
            elif t == "tool-result":
                yield ev.ToolResult(e["toolCallId"], e["result"], tool_name=e["toolName"])
            # text-start / reasoning-start / tool-input-end: the encoder opens
            # and closes parts itself.
        yield ev.Finish(step["finish_reason"])
        yield ev.StepFinished(step_no)
    yield ev.Done()


def _runner(wl: dict[str, Any], events: Callable[[], Any]) -> Run:
    message_id = wl["message_id"]

    async def run(sink: list[bytes] | None = None) -> tuple[int, int]:
        encoder = UIMessageEncoder(message_id)
        render = UIStreamRenderer(7).render
        feed = encoder.feed
        n = nb = 0
        for event in events():
            for chunk in feed(event):
                frame = render(chunk)
                n += 1
                nb += len(frame)
                if sink is not None:
                    sink.append(frame)
        if sink is not None:
            sink.append(DONE_FRAME)
        return n + 1, nb + len(DONE_FRAME)

    return run


def make(wl: dict[str, Any]) -> Run:
    prepared = list(source_events(wl))
    return _runner(wl, lambda: prepared)


def make_with_conversion(wl: dict[str, Any]) -> Run:
    return _runner(wl, lambda: source_events(wl))
