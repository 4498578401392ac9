"""The tool loop's streaming tools (preliminary outputs) and approval
policies (ai@7's ``toolApproval``), on the loop alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from uistream_app.protocol.events import (
    Done,
    Finish,
    StepFinished,
    TextDelta,
    ToolApprovalRequest,
    ToolApprovalResponse,
    ToolDenied,
    ToolResult,
)
from uistream_app.protocol.ui.encoder import UIMessageEncoder
from uistream_app.protocol.ui.reader import UIMessageReader
from uistream_app.runs import (
    ApprovalStatus,
    AssistantMessage,
    ModelMessage,
    ScriptedModel,
    ToolApproval,
    ToolCallRequest,
    ToolContext,
    ToolError,
    ToolLoop,
    ToolMessage,
    UserMessage,
    tool,
)
from uistream_app.runs.scripted import call

pytestmark = pytest.mark.asyncio

FINAL = {"status": "done", "found": 3}


@tool
async def research(topic: str) -> AsyncGenerator[dict[str, Any], None]:
    """Research a topic, step by step."""
    for i in range(1, 4):
        yield {"status": "searching", "step": i, "topic": topic}
    yield FINAL


@tool(requires_approval=True)
async def send_email(to: str, body: str) -> str:
    """Send an email."""
    SENT.append(to)
    return f"sent to {to}"


SENT: list[str] = []


@pytest.fixture(autouse=True)
def _nothing_sent() -> None:
    SENT.clear()


async def run_all(loop: ToolLoop, messages: list[ModelMessage] | None = None, **kwargs: Any) -> list[Any]:
    return [e async for e in loop.run(messages or [UserMessage("go")], **kwargs)]


# -- streaming tools -------------------------------------------------------------


async def test_every_yield_is_preliminary_and_the_last_is_the_output() -> None:
    model = ScriptedModel([call("research", {"topic": "tides"})], "Done.")
    events = await run_all(ToolLoop(model, [research]))
    results = [e for e in events if isinstance(e, ToolResult)]
    progress = [{"status": "searching", "step": i, "topic": "tides"} for i in (1, 2, 3)]
    # ai@7's rule: each value preliminary (the last too), then the last once more as the output.
    assert [r.content for r in results] == [*progress, FINAL, FINAL]
    assert [r.preliminary for r in results] == [True, True, True, True, None]
    # The model's next step reads the final output only.
    assert model.requests[1].messages[-1] == ToolMessage("call_0", json.dumps(FINAL), False, "research")


async def test_the_message_keeps_one_part_with_the_final_output() -> None:
    model = ScriptedModel([call("research", {"topic": "tides"})], "Done.")
    encoder = UIMessageEncoder("m1")
    reader = UIMessageReader(message_id="m1")
    async for event in ToolLoop(model, [research]).run([UserMessage("go")]):
        for chunk in encoder.feed(event):
            reader.feed(chunk)
    (part,) = [p for p in reader.message["parts"] if p["type"] == "tool-research"]
    assert part["state"] == "output-available"
    assert part["output"] == FINAL
    assert not part.get("preliminary")


async def test_progress_of_concurrent_calls_comes_before_each_ones_output() -> None:
    gate = asyncio.Event()

    @tool
    async def slow(name: str) -> AsyncGenerator[str, None]:
        """Waits for the gate."""
        yield f"{name} started"
        await gate.wait()
        yield f"{name} done"

    @tool
    async def fast(name: str) -> AsyncGenerator[str, None]:
        """Opens the gate."""
        yield f"{name} started"
        gate.set()
        yield f"{name} done"

    model = ScriptedModel([call("slow", {"name": "a"}), call("fast", {"name": "b"})], "ok")
    events = await run_all(ToolLoop(model, [slow, fast]))
    said = [(e.tool_call_id, e.content, e.preliminary) for e in events if isinstance(e, ToolResult)]
    for call_id in ("call_0", "call_1"):
        mine = [s for s in said if s[0] == call_id]
        assert mine[-1][2] is None  # the output comes last
        assert all(s[2] for s in mine[:-1])
    # The slow call's progress went out while it still ran (before the fast call's output
    # let it finish), not held back until it ended.
    assert said.index(("call_0", "a started", True)) < said.index(("call_1", "b done", None))


async def test_a_streaming_tool_that_fails_midway_ends_in_its_error() -> None:
    @tool
    async def flaky() -> AsyncGenerator[str, None]:
        """Fails after one value."""
        yield "working"
        raise ToolError("the source went away")

    model = ScriptedModel([call("flaky")], "ok")
    events = await run_all(ToolLoop(model, [flaky]))
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results == [
        ToolResult("call_0", "working", tool_name="flaky", preliminary=True),
        ToolResult("call_0", "the source went away", is_error=True, tool_name="flaky"),
    ]


async def test_a_streaming_tool_past_its_timeout_is_stopped() -> None:
    @tool(timeout=0.05)
    async def endless() -> AsyncGenerator[int, None]:
        """Never ends."""
        n = 0
        while True:
            n += 1
            yield n
            await asyncio.sleep(0.01)

    model = ScriptedModel([call("endless")], "ok")
    events = await run_all(ToolLoop(model, [endless]))
    final = [e for e in events if isinstance(e, ToolResult) and not e.preliminary]
    assert final == [ToolResult("call_0", "Tool endless timed out after 0.05 seconds.", True, "endless")]


# -- approval policies -----------------------------------------------------------


def by_domain(context: ToolContext) -> Any:
    domain = str(context.arguments.get("to", "")).rpartition("@")[2]
    if domain == "trusted.test":
        return {"type": "approved", "reason": "trusted"}
    if domain == "blocked.test":
        return ApprovalStatus("denied", "blocked")
    return None  # the tool's own rule


async def test_a_policy_approves_and_the_call_runs_saying_so() -> None:
    model = ScriptedModel([call("send_email", {"to": "a@trusted.test", "body": "hi"})], "Sent.")
    events = await run_all(ToolLoop(model, [send_email], tool_approval=by_domain))
    assert events[events.index(ToolApprovalRequest("approval-call_0", "call_0", is_automatic=True)) :][:3] == [
        ToolApprovalRequest("approval-call_0", "call_0", is_automatic=True),
        ToolApprovalResponse("approval-call_0", True, "trusted"),
        ToolResult("call_0", "sent to a@trusted.test", tool_name="send_email"),
    ]
    assert SENT == ["a@trusted.test"]
    assert events[-1] == Done()


async def test_a_policy_denies_and_the_tool_never_runs() -> None:
    model = ScriptedModel([call("send_email", {"to": "a@blocked.test", "body": "hi"})], "Not sent.")
    events = await run_all(ToolLoop(model, [send_email], tool_approval=by_domain))
    start = events.index(ToolApprovalRequest("approval-call_0", "call_0", is_automatic=True))
    assert events[start : start + 3] == [
        ToolApprovalRequest("approval-call_0", "call_0", is_automatic=True),
        ToolApprovalResponse("approval-call_0", False, "blocked"),
        ToolDenied("call_0"),
    ]
    assert SENT == []
    assert model.requests[1].messages[-1] == ToolMessage(
        "call_0", "The tool call was denied by the approval policy. Reason: blocked", True, "send_email"
    )


async def test_a_policy_with_no_opinion_leaves_the_tools_rule_to_ask() -> None:
    model = ScriptedModel([call("send_email", {"to": "a@example.com", "body": "hi"})])
    events = await run_all(ToolLoop(model, [send_email], tool_approval=by_domain))
    assert events[-3:] == [ToolApprovalRequest("approval-call_0", "call_0"), StepFinished(0), Done()]
    assert SENT == []


async def test_a_per_tool_policy_may_ask_with_a_reason_or_waive_approval() -> None:
    async def ask(arguments: dict[str, Any], context: ToolContext) -> Any:
        return {"type": "user-approval", "reason": f"{arguments['to']} is new to {context.runtime_context}"}

    model = ScriptedModel([call("send_email", {"to": "a@example.com", "body": "hi"})])
    events = await run_all(ToolLoop(model, [send_email], tool_approval={"send_email": ask}), context="ada")
    assert ToolApprovalRequest("approval-call_0", "call_0", "a@example.com is new to ada") in events

    model = ScriptedModel([call("send_email", {"to": "a@example.com", "body": "hi"})], "Sent.")
    events = await run_all(ToolLoop(model, [send_email], tool_approval={"send_email": "not-applicable"}))
    assert not any(isinstance(e, ToolApprovalRequest) for e in events)
    assert SENT == ["a@example.com"]


async def test_a_tools_own_rule_sees_the_input_and_the_context() -> None:
    seen: list[Any] = []

    def rule(arguments: dict[str, Any], context: ToolContext) -> bool:
        seen.append((arguments["to"], context.tool_call_id, context.runtime_context))
        return arguments["to"].endswith("@outside.test")

    @tool(requires_approval=rule)
    async def notify(to: str) -> str:
        """Notify someone."""
        return f"notified {to}"

    model = ScriptedModel([call("notify", {"to": "a@inside.test"}), call("notify", {"to": "b@outside.test"})])
    events = await run_all(ToolLoop(model, [notify]), context={"user": "ada"})
    assert ToolResult("call_0", "notified a@inside.test", tool_name="notify") in events
    assert ToolApprovalRequest("approval-call_1", "call_1") in events
    assert seen == [("a@inside.test", "call_0", {"user": "ada"}), ("b@outside.test", "call_1", {"user": "ada"})]
    # The one-argument form of before still works.
    assert tool(requires_approval=lambda a: a["to"] == "x")(notify.function).needs_approval({"to": "x"}) is True


async def test_a_failing_policy_runs_nothing() -> None:
    def broken(context: ToolContext) -> Any:
        raise RuntimeError("policy store down")

    model = ScriptedModel([call("send_email", {"to": "a@trusted.test", "body": "hi"})], "Hm.")
    events = await run_all(ToolLoop(model, [send_email], tool_approval=broken))
    assert ToolResult("call_0", "An error occurred.", is_error=True, tool_name="send_email") in events
    assert SENT == []


async def test_a_policy_answering_nonsense_runs_nothing() -> None:
    model = ScriptedModel([call("send_email", {"to": "a@trusted.test", "body": "hi"})], "Hm.")
    events = await run_all(ToolLoop(model, [send_email], tool_approval=lambda context: "sure"))
    assert ToolResult("call_0", "An error occurred.", is_error=True, tool_name="send_email") in events
    assert SENT == []


def pending(to: str) -> list[ModelMessage]:
    arguments = json.dumps({"to": to, "body": "hi"})
    return [UserMessage("email"), AssistantMessage("", (ToolCallRequest("call_0", "send_email", arguments),))]


async def test_a_policy_denial_wins_over_a_persons_approval_of_edited_arguments() -> None:
    model = ScriptedModel("Not sent.")
    approvals = {"call_0": ToolApproval("apv", True)}
    events = await run_all(
        ToolLoop(model, [send_email], tool_approval=by_domain), pending("a@blocked.test"), approvals=approvals
    )
    # The policy answers the person's approval, then the call is denied.
    assert events[:2] == [ToolApprovalResponse("apv", False, "blocked"), ToolDenied("call_0")]
    assert SENT == []
    assert model.requests[0].messages[-1] == ToolMessage(
        "call_0", "The tool call was denied by the approval policy. Reason: blocked", True, "send_email"
    )


async def test_a_persons_approval_runs_the_call_as_stored() -> None:
    model = ScriptedModel("Sent.")
    approvals = {"call_0": ToolApproval("apv", True)}
    events = await run_all(
        ToolLoop(model, [send_email], tool_approval=by_domain), pending("b@example.com"), approvals=approvals
    )
    assert events[:2] == [ToolResult("call_0", "sent to b@example.com", tool_name="send_email"), TextDelta("Sent.")]
    assert events[-3:] == [Finish("stop"), StepFinished(0), Done()]
    assert SENT == ["b@example.com"]


# -- the encoder's side ----------------------------------------------------------


async def test_the_encoder_answers_only_approvals_this_message_requested() -> None:
    from uistream_app.protocol.events import ToolCall

    encoder = UIMessageEncoder("m1")
    encoder.feed(ToolCall("c1", "send_email", '{"to": "a@b.c"}'))
    assert encoder.feed(ToolApprovalResponse("apv-unknown", True)) == []  # the SDK would throw
    assert encoder.feed(ToolApprovalRequest("apv-1", "c1", is_automatic=True)) == [
        {"type": "tool-approval-request", "approvalId": "apv-1", "toolCallId": "c1", "isAutomatic": True}
    ]
    assert encoder.feed(ToolApprovalResponse("apv-1", False, "no")) == [
        {"type": "tool-approval-response", "approvalId": "apv-1", "approved": False, "reason": "no"}
    ]
