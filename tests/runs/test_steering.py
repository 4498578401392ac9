"""Steering in the tool loop: where a message is delivered, what the next
model call sees, and every outcome the SDK names (runs.steering rules)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uistream_app.protocol.events import Done, Finish, SteeringMessage, StepFinished, TextDelta, ToolResult
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.runs import (
    AssistantMessage,
    ScriptedModel,
    ToolCallRequest,
    ToolLoop,
    ToolMessage,
    UserMessage,
    tool,
)
from uistream_app.runs.scripted import call
from uistream_app.runs.steering import SteeringInbox, SteeringOutcome, SteeringRequest
from uistream_app.runs.ui_messages import ui_to_model_messages

pytestmark = pytest.mark.asyncio


def steer(text: str, id: str = "s1", kind: Any = "steer") -> SteeringRequest:
    return SteeringRequest(id, kind, [{"type": "text", "text": text}], UserMessage(text))


class Sender:
    """A tool that sends steering messages while it runs: a deterministic
    "meanwhile" (the message arrives during the step, as from a person)."""

    def __init__(self, inbox: SteeringInbox, *requests: SteeringRequest) -> None:
        self.inbox = inbox
        self.requests = list(requests)
        self.outcomes: list[asyncio.Future[SteeringOutcome]] = []

        @tool(name="pause")
        async def pause() -> str:
            """Wait a moment."""
            if self.requests:
                self.outcomes.append(self.inbox.send(self.requests.pop(0)))
            return "paused"

        self.tool = pause


async def run(loop: ToolLoop, inbox: SteeringInbox, prompt: str = "count") -> list[Any]:
    return [e async for e in loop.run([UserMessage(prompt)], steering=inbox)]


async def test_a_steer_is_delivered_after_the_step_and_its_tools_and_the_next_call_sees_it() -> None:
    inbox = SteeringInbox()
    sender = Sender(inbox, steer("now count backwards"))
    model = ScriptedModel(["1 2 3", call("pause")], "2 1")
    events = await run(ToolLoop(model, [sender.tool]), inbox)

    result = events.index(ToolResult("call_0", "paused", tool_name="pause"))
    assert events[result + 1 :] == [
        StepFinished(0),
        SteeringMessage("s1", [{"type": "text", "text": "now count backwards"}]),
        TextDelta("2 1"),
        Finish("stop"),
        StepFinished(1),
        Done(),
    ]
    assert model.requests[1].messages[-3:] == (
        AssistantMessage("1 2 3", (ToolCallRequest("call_0", "pause", "{}"),)),
        ToolMessage("call_0", "paused", False, "pause"),
        UserMessage("now count backwards"),
    )
    assert (await sender.outcomes[0]).to_wire() == {"type": "delivered", "id": "s1", "stepNumber": 1}


async def test_a_steer_keeps_a_finished_answer_going_for_one_more_step() -> None:
    inbox = SteeringInbox()
    model = ScriptedModel("Done counting.", "Counting backwards then.")

    async def run_and_steer() -> list[Any]:
        out = []
        async for event in ToolLoop(model, []).run([UserMessage("count")], steering=inbox):
            if isinstance(event, Finish) and not out.count(Finish("stop")):
                outcome.append(inbox.send(steer("backwards")))
            out.append(event)
        return out

    outcome: list[asyncio.Future[SteeringOutcome]] = []
    events = await run_and_steer()
    assert [type(e).__name__ for e in events] == [
        "TextDelta", "Finish", "StepFinished", "SteeringMessage", "TextDelta", "Finish", "StepFinished", "Done",
    ]  # fmt: skip
    assert (await outcome[0]).to_wire() == {"type": "delivered", "id": "s1", "stepNumber": 1}
    assert model.requests[1].messages[-1] == UserMessage("backwards")


async def test_a_queued_message_waits_for_the_final_answer() -> None:
    inbox = SteeringInbox()
    sender = Sender(inbox, steer("then say hi", id="q1", kind="queue"))
    model = ScriptedModel([call("pause")], [call("pause")], "done", "hi")
    events = await run(ToolLoop(model, [sender.tool]), inbox)

    steered = [e for e in events if isinstance(e, SteeringMessage)]
    assert steered == [SteeringMessage("q1", [{"type": "text", "text": "then say hi"}])]
    # Not after the first step (it called a tool): after the answer "done".
    assert events[events.index(steered[0]) - 3 : events.index(steered[0])] == [
        TextDelta("done"),
        Finish("stop"),
        StepFinished(2),
    ]
    assert (await sender.outcomes[0]).to_wire() == {"type": "delivered", "id": "q1", "stepNumber": 3}


async def test_a_queued_message_is_not_delivered_after_an_answer_cut_short() -> None:
    inbox = SteeringInbox()
    sender = Sender(inbox, steer("more", id="q1", kind="queue"))
    model = ScriptedModel([call("pause")], ["cut", Finish("length")])
    events = await run(ToolLoop(model, [sender.tool]), inbox)
    assert not any(isinstance(e, SteeringMessage) for e in events)
    assert (await sender.outcomes[0]).to_wire() == {"type": "not-delivered", "id": "q1", "reason": "finished"}


async def test_the_step_limit_ends_a_run_with_a_steer_waiting() -> None:
    inbox = SteeringInbox()
    sender = Sender(inbox, steer("again"))
    model = ScriptedModel([call("pause")])
    events = await run(ToolLoop(model, [sender.tool], max_steps=1), inbox)
    assert events[-1] == Done("length")
    assert (await sender.outcomes[0]).to_wire() == {"type": "not-delivered", "id": "s1", "reason": "stop-condition"}


async def test_a_run_that_waits_for_an_approval_does_not_deliver() -> None:
    inbox = SteeringInbox()

    @tool(requires_approval=True)
    async def send_email(to: str) -> str:
        """Send an email."""
        return "sent"

    pending: list[asyncio.Future[SteeringOutcome]] = []

    @tool(name="pause")
    async def pause() -> str:
        """Wait."""
        pending.append(inbox.send(steer("hold on")))
        return "paused"

    model = ScriptedModel([call("pause"), call("send_email", {"to": "a@example.com"})])
    await run(ToolLoop(model, [pause, send_email]), inbox)
    assert (await pending[0]).to_wire() == {
        "type": "not-delivered",
        "id": "s1",
        "reason": "waiting-for-tool-results",
    }


async def test_a_resend_with_the_same_id_gets_the_first_outcome_and_a_late_one_finished() -> None:
    inbox = SteeringInbox()
    first = inbox.send(steer("a"))
    assert inbox.send(steer("something else")) is first
    inbox.end("aborted")
    assert (await first).reason == "aborted"
    late = inbox.send(steer("b", id="s2"))
    assert (await late).to_wire() == {"type": "not-delivered", "id": "s2", "reason": "finished"}
    inbox.end("error")  # idempotent: the first reason stands
    assert (await first).reason == "aborted"


async def test_the_stored_message_gives_the_model_the_steering_message_as_the_users() -> None:
    inbox = SteeringInbox()
    sender = Sender(inbox, steer("now count backwards"))
    model = ScriptedModel(["1 2 3", call("pause")], "2 1")
    encoder = UIMessageEncoder("m1")
    chunks = [c for e in await run(ToolLoop(model, [sender.tool]), inbox) for c in encoder.feed(e)]
    types = [c["type"] for c in chunks]
    at = types.index("steering-message")
    assert types[at - 1 : at + 2] == ["finish-step", "steering-message", "start-step"]
    assert chunks[at] == {
        "type": "steering-message",
        "id": "s1",
        "parts": [{"type": "text", "text": "now count backwards"}],
    }

    stored = {
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "1 2 3", "state": "done"},
            {
                "type": "tool-pause",
                "toolCallId": "call_0",
                "state": "output-available",
                "input": {},
                "output": "paused",
            },
            {"type": "steering-message", "id": "s1", "parts": [{"type": "text", "text": "now count backwards"}]},
            {"type": "step-start"},
            {"type": "text", "text": "2 1", "state": "done"},
        ],
    }
    history = ui_to_model_messages([{"role": "user", "parts": [{"type": "text", "text": "count"}]}, stored])
    assert [type(m).__name__ for m in history] == [
        "UserMessage", "AssistantMessage", "ToolMessage", "UserMessage", "AssistantMessage",
    ]  # fmt: skip
    assert history[3] == UserMessage("now count backwards")
    assert history[1] == AssistantMessage("1 2 3", (ToolCallRequest("call_0", "pause", "{}"),))
