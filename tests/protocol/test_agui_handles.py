"""The emit handles (``protocol/agui/handles.py``): each rule, the handles
closing on every path, and every misuse raising where it happens. Every
stream these tests produce is also judged by the oracles.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uistream_app.protocol.agui.handles import HandleError, RunCancelled, RunContext, run_agent
from uistream_app.protocol.agui.input import AGUIInput
from uistream_app.protocol.agui.verifier import AGUIVerificationError

from .agui_oracles import assert_accepted

pytestmark = pytest.mark.asyncio


def context(**kwargs: Any) -> RunContext:
    return RunContext(thread_id="t1", run_id="r1", clock=None, **kwargs)


def started(**kwargs: Any) -> RunContext:
    ctx = context(**kwargs)
    ctx.start()
    return ctx


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


STARTED = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


async def test_a_message_opens_on_entry_and_closes_on_exit() -> None:
    async def agent(ctx: RunContext) -> None:
        with ctx.assistant_message() as message:
            message.delta("Hello")
            message.delta("")  # nothing (AGUI105)
            message.delta(" world")

    ctx = context()
    await run_agent(agent, ctx)
    assert ctx.drain() == [
        STARTED,
        {"type": "TEXT_MESSAGE_START", "messageId": "r1-text-0", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1-text-0", "delta": "Hello"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1-text-0", "delta": " world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "r1-text-0"},
        FINISHED,
    ]
    assert ctx.drain() == []


async def test_timestamps_are_integer_milliseconds() -> None:
    ctx = RunContext(thread_id="t1", run_id="r1")
    await run_agent(lambda c: None, ctx)
    stamps = [e["timestamp"] for e in ctx.events]
    assert all(isinstance(s, int) and s > 1_700_000_000_000 for s in stamps)
    assert_accepted(ctx.events)


async def test_the_full_vocabulary_is_a_stream_every_judge_accepts() -> None:
    async def agent(ctx: RunContext) -> None:
        ctx.state_snapshot({"n": 0})
        with ctx.step("plan"):
            with ctx.reasoning() as thought:
                thought.delta("thinking")
                thought.encrypted_value("opaque")
            with ctx.subagent("helper", description="helps") as helper:
                with ctx.subagent("nested") as nested:
                    ctx.say("deep")
                with ctx.tool_call("lookup") as call:
                    call.args({"q": "x"})
                    call.custom("demo:inside-call", 1)
                call.result(["a", "b"])
            ctx.state_delta([{"op": "replace", "path": "/n", "value": 1}])
        ctx.activity_snapshot("act-1", "plan", {"steps": 1})
        ctx.activity_delta("act-1", "plan", [{"op": "replace", "path": "/steps", "value": 2}])
        ctx.raw({"provider": "event"}, source="test")
        ctx.say("done")
        assert helper.id != nested.id

    ctx = RunContext(thread_id="t1", run_id="r1", message_id="msg1", clock=lambda: 5)
    await run_agent(agent, ctx)
    events = assert_accepted(ctx.drain())
    starts = [e for e in events if e["type"] == "SUBAGENT_STARTED"]
    assert starts[1]["parentSubagentRunId"] == starts[0]["subagentRunId"] == "msg1-subagent-0"
    deep = next(e for e in events if e.get("delta") == "deep")
    assert deep["subagentRunId"] == "msg1-subagent-1"
    call_events = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert {e["subagentRunId"] for e in call_events} == {"msg1-subagent-0"}
    # The message just before belongs to the nested subagent: a call belongs
    # to the message that carries it, so this one gets its own parent.
    assert call_events[0]["parentMessageId"] == "msg1-tools-0"
    assert next(e for e in events if e["type"] == "TOOL_CALL_ARGS")["delta"] == '{"q":"x"}'
    assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"] == '["a","b"]'
    last_text = [e for e in events if e["type"] == "TEXT_MESSAGE_START"][-1]
    assert "subagentRunId" not in last_text
    assert last_text["messageId"] == "msg1-text-1"


# -- rule 1: closing on every path ------------------------------------------------------------


async def test_an_exception_closes_every_open_handle_and_ends_run_error() -> None:
    async def agent(ctx: RunContext) -> None:
        with ctx.step("s"), ctx.subagent("sub"), ctx.assistant_message() as message:
            message.delta("partial")
            raise ValueError("secret detail")

    ctx = context()
    with pytest.raises(ValueError, match="secret detail"):
        await run_agent(agent, ctx)
    events = ctx.drain()
    assert types(events)[-4:] == ["TEXT_MESSAGE_END", "SUBAGENT_ERROR", "STEP_FINISHED", "RUN_ERROR"]
    assert events[-1] == {"type": "RUN_ERROR", "message": "An error occurred.", "code": "run_failed"}
    assert events[-3]["message"] == "An error occurred."
    assert "secret" not in repr(events)
    assert_accepted(events)


async def test_expose_errors_sends_the_exception_text() -> None:
    ctx = context()

    def agent(ctx: RunContext) -> None:
        raise RuntimeError("visible")

    with pytest.raises(RuntimeError):
        await run_agent(agent, ctx, expose_errors=True)
    assert ctx.drain()[-1]["message"] == "visible"


async def test_a_tool_call_left_by_an_exception_sends_only_json_arguments() -> None:
    for fragment, args_sent in (('{"city": "Par', False), ('{"city": "Paris"}', True)):

        async def agent(ctx: RunContext, fragment: str = fragment) -> None:
            with ctx.tool_call("get_weather") as call:
                call.args(fragment)
                raise KeyError("boom")

        ctx = context()
        with pytest.raises(KeyError):
            await run_agent(agent, ctx)
        events = ctx.drain()
        assert ("TOOL_CALL_ARGS" in types(events)) is args_sent
        assert "TOOL_CALL_END" in types(events)
        assert_accepted(events)


async def test_a_reasoning_handle_closes_both_its_brackets() -> None:
    ctx = started()

    def think() -> None:
        with ctx.reasoning() as thought:
            thought.delta("x")
            _ = 1 / 0

    with pytest.raises(ZeroDivisionError):
        think()
    assert types(ctx.drain())[-2:] == ["REASONING_MESSAGE_END", "REASONING_END"]


# -- rule 2: one streaming handle at a time -------------------------------------------------------


@pytest.mark.parametrize("outer", ["assistant_message", "reasoning", "tool_call"])
@pytest.mark.parametrize("inner", ["assistant_message", "reasoning", "tool_call", "step", "subagent"])
async def test_opening_anything_inside_a_streaming_handle_raises_at_once(outer: str, inner: str) -> None:
    ctx = started()

    def open_handle(name: str) -> Any:
        method = getattr(ctx, name)
        return method("x") if name in ("tool_call", "step", "subagent") else method()

    with open_handle(outer):
        before = len(ctx.events)
        with pytest.raises(HandleError, match="close it before opening"):
            open_handle(inner).__enter__()
        assert len(ctx.events) == before  # nothing was sent
    ctx.finish()
    assert_accepted(ctx.drain())


async def test_scopes_nest_and_take_anything() -> None:
    ctx = started()
    with ctx.step("outer"), ctx.step("inner"), ctx.subagent("s"), ctx.step("deeper"):
        ctx.say("hi")
    with ctx.step("outer"), ctx.subagent("s2"), pytest.raises(AGUIVerificationError, match="open under"):
        ctx.step("outer").__enter__()
    with ctx.subagent("s3"), ctx.step("outer"):  # closed under the parent: free again
        pass
    ctx.finish()
    assert_accepted(ctx.drain())


# -- rule 4: unordered events inside handles; emit() refuses what the handles own ---------------------


async def test_unordered_events_go_out_from_inside_any_handle() -> None:
    ctx = started()
    with ctx.assistant_message() as message:
        message.delta("a")
        message.state_snapshot({"x": 1})
        message.custom("demo:ping", None)
        message.state_delta([{"op": "add", "path": "/y", "value": 2}])
        message.delta("b")
    ctx.finish()
    events = assert_accepted(ctx.drain())
    assert types(events)[1:8] == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "STATE_SNAPSHOT",
        "CUSTOM",
        "STATE_DELTA",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]


@pytest.mark.parametrize(
    "event_type",
    ["RUN_FINISHED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CHUNK", "REASONING_START", "STEP_STARTED", "SUBAGENT_STARTED"],
)
async def test_emit_refuses_the_events_the_handles_own(event_type: str) -> None:
    ctx = started()
    with pytest.raises(HandleError, match="belongs to the handles"):
        ctx.emit({"type": event_type})


async def test_interleaved_tool_calls_by_hand_are_verified() -> None:
    ctx = started()
    ctx.emit({"type": "TOOL_CALL_START", "toolCallId": "a", "toolCallName": "f"})
    ctx.emit({"type": "TOOL_CALL_START", "toolCallId": "b", "toolCallName": "g"})
    ctx.emit({"type": "TOOL_CALL_ARGS", "toolCallId": "a", "delta": "{}"})
    ctx.emit({"type": "TOOL_CALL_END", "toolCallId": "b"})
    ctx.emit({"type": "TOOL_CALL_END", "toolCallId": "a"})
    ctx.tool_result("a", "ok")
    with pytest.raises(AGUIVerificationError, match="unknown tool call"):
        ctx.tool_result("ghost", "?")
    with ctx.assistant_message(), pytest.raises(HandleError, match="close the open message"):
        ctx.emit({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"})
    ctx.finish()
    assert_accepted(ctx.drain())


# -- rule 5: tool call arguments --------------------------------------------------------------------


async def test_arguments_that_are_not_json_raise_after_the_call_closed() -> None:
    ctx = started()
    with pytest.raises(HandleError, match="not JSON"), ctx.tool_call("f") as call:
        call.args("{oops")
    assert types(ctx.events)[-2:] == ["TOOL_CALL_START", "TOOL_CALL_END"]
    ctx.finish()
    assert_accepted(ctx.drain())


async def test_a_result_ends_the_arguments_and_may_follow_the_block() -> None:
    ctx = started()
    with ctx.tool_call("f", tool_call_id="call_x") as inside:
        inside.args('{"a":')
        inside.args(" 1}")
        inside.result({"ok": True}, error=True)
        with pytest.raises(HandleError, match="already ended"):
            inside.args("{}")
    with ctx.tool_call("g") as after:
        pass
    after.result("later")
    with pytest.raises(HandleError, match="already has its result"):
        after.result("again")
    ctx.finish()
    events = assert_accepted(ctx.drain())
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results[0] == {
        "type": "TOOL_CALL_RESULT",
        "messageId": "call_x-result",
        "toolCallId": "call_x",
        "content": '{"ok":true}',
        "role": "tool",
        "metadata": {"uistream": {"outcome": "error"}},
    }
    assert results[1]["content"] == "later"
    parents = [e["parentMessageId"] for e in events if e["type"] == "TOOL_CALL_START"]
    assert parents == ["r1-tools-0", "r1-tools-1"]  # a result ends the step's shared parent


# -- rule 6: cancellation and the end -------------------------------------------------------------------


async def test_after_cancel_every_emit_raises_but_the_closings_and_the_end_go_out() -> None:
    async def agent(ctx: RunContext) -> None:
        with ctx.step("s"), ctx.assistant_message() as message:
            message.delta("before")
            ctx.cancel()
            with pytest.raises(RunCancelled):
                ctx.custom("x:y", 1)
            with pytest.raises(RunCancelled):
                ctx.state_snapshot({})
            message.delta("after")  # raises: leaves the agent through both blocks

    ctx = context()
    await run_agent(agent, ctx)
    events = ctx.drain()
    assert types(events)[-3:] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert "after" not in repr(events)
    assert_accepted(events)
    cancelled = started()
    cancelled.cancel()
    with pytest.raises(RunCancelled):
        cancelled.assistant_message().__enter__()


async def test_cancelling_the_task_ends_the_run_cancelled() -> None:
    gate = asyncio.Event()

    async def agent(ctx: RunContext) -> None:
        with ctx.subagent("slow"), ctx.assistant_message() as message:
            message.delta("waiting")
            await gate.wait()

    ctx = context()
    task = asyncio.create_task(run_agent(agent, ctx))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = ctx.drain()
    assert types(events)[-3:] == ["TEXT_MESSAGE_END", "SUBAGENT_ERROR", "RUN_FINISHED"]
    assert events[-2]["message"] == "The run was stopped."
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert_accepted(events)


async def test_after_the_end_everything_raises() -> None:
    ctx = started()
    ctx.finish()
    with pytest.raises(HandleError, match="ended"):
        ctx.custom("x:y", 1)
    with pytest.raises(HandleError, match="ended"):
        ctx.assistant_message().__enter__()
    with pytest.raises(HandleError, match="ended"):
        ctx.fail()


async def test_finishing_with_a_handle_open_raises() -> None:
    ctx = started()
    with ctx.step("s"), pytest.raises(HandleError, match="close the open step"):
        ctx.finish()


# -- rule 7 and misuse ----------------------------------------------------------------------------------


async def test_an_event_the_verifier_refuses_raises_and_is_not_sent() -> None:
    ctx = started()
    ctx.state_snapshot({"items": []})
    before = len(ctx.events)
    with pytest.raises(AGUIVerificationError, match="does not apply"):
        ctx.state_delta([{"op": "replace", "path": "/missing", "value": 1}])
    assert len(ctx.events) == before
    ctx.finish()
    assert_accepted(ctx.drain())


async def test_handle_misuse_raises() -> None:
    ctx = started()
    message = ctx.assistant_message()
    with pytest.raises(HandleError, match="not entered yet"):
        message.delta("x")
    with message:
        message.delta("x")
    with pytest.raises(HandleError, match="closed"):
        message.delta("y")
    with pytest.raises(HandleError, match="already used"):
        message.__enter__()
    with pytest.raises(TypeError), ctx.assistant_message() as other:
        other.delta(3)  # type: ignore[arg-type]
    with pytest.raises(HandleError, match="never opened"):
        ctx.tool_call("f").result("x")
    with pytest.raises(HandleError, match="needs a name"):
        ctx.step("")
    with pytest.raises(HandleError, match="already started"):
        ctx.start()
    with pytest.raises(HandleError, match="not started"):
        context().custom("x:y", 1)


async def test_the_input_reaches_the_agent() -> None:
    agui = AGUIInput(
        "t1",
        "r1",
        tools=[{"name": "confirm", "description": "ask"}],
        context=[{"description": "page", "value": "/home"}],
        state={"count": 1},
        forwarded_props={"mode": "fast"},
    )
    seen: dict[str, Any] = {}

    def agent(ctx: RunContext) -> None:
        seen.update(tools=ctx.tools, context=ctx.context, props=ctx.forwarded_props, history=ctx.history)
        ctx.state["count"] += 1
        ctx.publish_state()

    ctx = RunContext(agui, history=[{"id": "u1", "role": "user", "parts": []}], clock=None)
    await run_agent(agent, ctx)
    assert seen == {
        "tools": agui.tools,
        "context": agui.context,
        "props": {"mode": "fast"},
        "history": [{"id": "u1", "role": "user", "parts": []}],
    }
    assert {"type": "STATE_SNAPSHOT", "snapshot": {"count": 2}} in ctx.events
