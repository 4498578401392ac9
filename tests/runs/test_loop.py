"""``ToolLoop``: steps, concurrency, the error policy, limits, cancellation."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from uistream_app.protocol.events import (
    Done,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    StepFinished,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    ToolDenied,
    ToolInputError,
    ToolResult,
)
from uistream_app.runs import (
    AssistantMessage,
    ClientTool,
    ClientToolResult,
    ModelMessage,
    ScriptedModel,
    ScriptExhaustedError,
    Tool,
    ToolApproval,
    ToolCallRequest,
    ToolContext,
    ToolError,
    ToolLoop,
    ToolMessage,
    UserMessage,
    tool,
)
from uistream_app.runs.scripted import call, reasoning, text

pytestmark = pytest.mark.asyncio


async def run_all(loop: ToolLoop, prompt: str = "go", **kwargs: Any) -> list[Any]:
    return [e async for e in loop.run([UserMessage(prompt)], **kwargs)]


@tool(run_sync_in_thread=False)
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    if city == "Atlantis":
        raise ToolError("No such city: Atlantis.")
    return {"city": city, "temp": 21}


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def drain(source: Any, into: list[Any]) -> None:
    async for event in source:
        into.append(event)


def other_tasks() -> set[asyncio.Task[Any]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


async def test_a_multi_step_run_streams_the_model_then_the_results_in_order() -> None:
    model = ScriptedModel(
        [
            reasoning("Need data."),
            "Checking.",
            call("get_weather", {"city": "Paris"}, fragments=2),
            call("add", {"a": 2, "b": 3}),
        ],
        "It is 21 degrees; 2 + 3 = 5.",
    )
    events = await run_all(ToolLoop(model, [get_weather, add]))
    assert events == [
        ReasoningDelta("Need data."),
        ReasoningEnd(),
        TextDelta("Checking."),
        ToolCallStart("call_0", "get_weather"),
        ToolCallDelta("call_0", '{"city": '),
        ToolCallDelta("call_0", '"Paris"}'),
        ToolCall("call_0", "get_weather", '{"city": "Paris"}'),
        ToolCallStart("call_1", "add"),
        ToolCallDelta("call_1", '{"a": 2, "b": 3}'),
        ToolCall("call_1", "add", '{"a": 2, "b": 3}'),
        Finish("tool-calls"),
        ToolResult("call_0", {"city": "Paris", "temp": 21}, tool_name="get_weather"),
        ToolResult("call_1", 5, tool_name="add"),
        StepFinished(0),
        TextDelta("It is 21 degrees; 2 + 3 = 5."),
        Finish("stop"),
        StepFinished(1),
        Done(),
    ]
    first, second = model.requests
    assert [t.name for t in first.tools] == ["get_weather", "add"]
    assert second.messages == (
        UserMessage("go"),
        AssistantMessage(
            "Checking.",
            (
                ToolCallRequest("call_0", "get_weather", '{"city": "Paris"}'),
                ToolCallRequest("call_1", "add", '{"a": 2, "b": 3}'),
            ),
            "Need data.",
        ),
        ToolMessage("call_0", '{"city": "Paris", "temp": 21}', False, "get_weather"),
        ToolMessage("call_1", "5", False, "add"),
    )
    assert model.open_streams == 0


async def test_a_step_without_tool_calls_ends_the_run() -> None:
    model = ScriptedModel(text("Hello there.", words=True))
    events = await run_all(ToolLoop(model, [add]))
    assert events == [TextDelta("Hello"), TextDelta(" there."), Finish("stop"), StepFinished(0), Done()]
    assert model.remaining == 0


async def test_calls_of_a_step_run_concurrently_and_report_in_call_order() -> None:
    a_started, b_started, b_done = asyncio.Event(), asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    @tool
    async def slow(name: str) -> str:
        """Waits for its partner: only possible when both run at once."""
        if name == "a":
            a_started.set()
            await b_started.wait()
            await b_done.wait()  # a finishes after b
        else:
            b_started.set()
            await a_started.wait()
            b_done.set()
        finished.append(name)
        return name

    model = ScriptedModel([call("slow", {"name": "a"}), call("slow", {"name": "b"})], "done")
    events = await asyncio.wait_for(run_all(ToolLoop(model, [slow])), timeout=10)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert finished == ["b", "a"]
    assert [r.content for r in results] == ["a", "b"]


async def test_invalid_arguments_become_tool_input_errors_and_the_function_is_not_called() -> None:
    calls: list[Any] = []

    @tool
    async def record(city: str, days: int = 1) -> str:
        """Records its call."""
        calls.append((city, days))
        return "ok"

    model = ScriptedModel(
        [
            call("record", '{"city": "Par'),  # not JSON
            call("record", {"city": "Paris", "days": "two"}),  # does not fit the schema
            call("record", {"town": "Paris"}),  # missing + unknown parameter
            call("nope", {"x": 1}),  # no such tool
            call("record", '["Paris"]'),  # not an object
            call("record", {"city": "Oslo"}),  # fine
        ],
        "Sorry.",
    )
    events = await run_all(ToolLoop(model, [record]))
    outcomes = [e for e in events if isinstance(e, ToolInputError | ToolResult)]
    assert calls == [("Oslo", 1)]
    assert outcomes == [
        ToolInputError(
            "call_0",
            "record",
            '{"city": "Par',
            "Invalid JSON in arguments of record: unexpected end of data: line 1 column 14 (char 13)",
        ),
        ToolInputError(
            "call_1",
            "record",
            {"city": "Paris", "days": "two"},
            "Invalid arguments for record: `days`: expected integer, got string",
        ),
        ToolInputError("call_2", "record", {"town": "Paris"}, "Invalid arguments for record: `city` is required"),
        ToolInputError("call_3", "nope", {"x": 1}, "Model tried to call unavailable tool 'nope'.", dynamic=True),
        ToolInputError("call_4", "record", ["Paris"], "Arguments of record must be a JSON object, got array"),
        ToolResult("call_5", "ok", tool_name="record"),
    ]
    # The model hears about every failure, as an error result per call.
    answers = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.is_error) for m in answers] == [
        ("call_0", True),
        ("call_1", True),
        ("call_2", True),
        ("call_3", True),
        ("call_4", True),
        ("call_5", False),
    ]


async def test_a_tool_that_raises_is_masked_unless_it_raises_tool_error(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def leaky(key: str) -> str:
        """Fails with a secret in the message."""
        raise RuntimeError(f"database password is {key}")

    model = ScriptedModel([call("leaky", {"key": "hunter2"}), call("get_weather", {"city": "Atlantis"})], "Oh well.")
    with caplog.at_level(logging.ERROR, logger="uistream_app.runs"):
        events = await run_all(ToolLoop(model, [leaky, get_weather]))
    results = [e for e in events if isinstance(e, ToolResult)]
    assert results == [
        ToolResult("call_0", "An error occurred.", is_error=True, tool_name="leaky"),
        ToolResult("call_1", "No such city: Atlantis.", is_error=True, tool_name="get_weather"),
    ]
    assert "hunter2" in caplog.text  # the detail is logged, never sent
    answers = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert answers[0] == ToolMessage("call_0", "An error occurred.", True, "leaky")


async def test_the_masked_text_is_configurable() -> None:
    @tool
    async def boom() -> None:
        """Fails."""
        raise ValueError("x")

    model = ScriptedModel([call("boom")], "ok")
    events = await run_all(ToolLoop(model, [boom], error_text="The tool failed."))
    assert ToolResult("call_0", "The tool failed.", is_error=True, tool_name="boom") in events


async def test_a_tool_that_outlives_its_timeout_is_cancelled_and_reported() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.05)
    async def hang() -> str:
        """Never answers."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    model = ScriptedModel([call("hang"), call("add", {"a": 1, "b": 1})], "Too slow.")
    events = await run_all(ToolLoop(model, [hang, add]))
    assert [e for e in events if isinstance(e, ToolResult)] == [
        ToolResult("call_0", "Tool hang timed out after 0.05 seconds.", is_error=True, tool_name="hang"),
        ToolResult("call_1", 2, tool_name="add"),
    ]
    assert cancelled.is_set()
    assert other_tasks() == set()


async def test_a_timeout_error_raised_by_the_tool_itself_is_masked() -> None:
    @tool(timeout=60)
    async def flaky() -> str:
        """Its own I/O timed out."""
        raise TimeoutError("upstream at 10.0.0.3 timed out")

    events = await run_all(ToolLoop(ScriptedModel([call("flaky")], "ok"), [flaky]))
    assert ToolResult("call_0", "An error occurred.", is_error=True, tool_name="flaky") in events


async def test_max_steps_ends_the_run_with_its_own_reason() -> None:
    model = ScriptedModel(*[[call("add", {"a": i, "b": 1})] for i in range(5)])
    events = await run_all(ToolLoop(model, [add], max_steps=3))
    assert len(model.requests) == 3
    assert model.remaining == 2
    assert [e for e in events if isinstance(e, StepFinished | Done)] == [
        StepFinished(0),
        StepFinished(1),
        StepFinished(2),
        Done("length"),
    ]
    assert events[-3:] == [ToolResult("call_2", 3, tool_name="add"), StepFinished(2), Done("length")]


async def test_max_steps_reason_is_configurable_and_one_step_is_allowed() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 1})])
    events = await run_all(ToolLoop(model, [add], max_steps=1, max_steps_reason="tool-calls"))
    assert events[-1] == Done("tool-calls")
    with pytest.raises(ValueError, match="max_steps"):
        ToolLoop(model, max_steps=0)


async def test_cancelling_the_run_mid_tool_cancels_every_running_tool() -> None:
    started = {"a": asyncio.Event(), "b": asyncio.Event()}
    cancelled: list[str] = []

    @tool
    async def wait_forever(name: str) -> str:
        """Runs until cancelled."""
        started[name].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return name

    model = ScriptedModel([call("wait_forever", {"name": "a"}), call("wait_forever", {"name": "b"})])
    run = ToolLoop(model, [wait_forever]).run([UserMessage("go")])
    while not isinstance(await anext(run), Finish):
        pass

    async def next_event() -> Any:
        return await anext(run)

    consumer = asyncio.create_task(next_event())  # blocks on the first tool's result
    await started["a"].wait()
    await started["b"].wait()
    tool_tasks = other_tasks() - {consumer}
    assert len(tool_tasks) == 2

    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert sorted(cancelled) == ["a", "b"]
    assert all(t.cancelled() for t in tool_tasks)
    assert other_tasks() == set()
    assert model.open_streams == 0


async def test_closing_the_run_between_results_cancels_the_rest() -> None:
    release_slow = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def fast() -> str:
        """Answers at once."""
        return "fast"

    @tool
    async def slow() -> str:
        """Answers when released."""
        try:
            await release_slow.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "slow"

    model = ScriptedModel([call("fast"), call("slow")], "never asked")
    run = ToolLoop(model, [fast, slow]).run([UserMessage("go")])
    async for event in run:
        if isinstance(event, ToolResult):
            assert event.content == "fast"
            break
    await run.aclose()
    assert cancelled.is_set()
    assert other_tasks() == set()
    assert len(model.requests) == 1


async def test_closing_the_run_mid_model_stream_closes_the_model_stream() -> None:
    model = ScriptedModel(text("one two three four", words=True))
    run = ToolLoop(model).run([UserMessage("go")])
    assert await anext(run) == TextDelta("one")
    assert model.open_streams == 1
    await run.aclose()
    assert model.open_streams == 0


async def test_cancelling_the_task_mid_model_stream_closes_the_model_stream() -> None:
    gate = asyncio.Event()
    closed = asyncio.Event()

    class StuckModel:
        async def stream(self, messages: Any, tools: Any = (), options: Any = None) -> Any:
            try:
                yield TextDelta("partial")
                gate.set()
                await asyncio.Event().wait()
                yield TextDelta("never")
            finally:
                closed.set()

    async def consume() -> list[Any]:
        return [e async for e in ToolLoop(StuckModel()).run([UserMessage("go")])]

    task = asyncio.create_task(consume())
    await gate.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


async def test_a_model_failure_propagates_after_what_it_streamed() -> None:
    model = ScriptedModel(["Hel", RuntimeError("provider down")])
    events: list[Any] = []
    with pytest.raises(RuntimeError, match="provider down"):
        await drain(ToolLoop(model).run([UserMessage("go")]), events)
    assert events == [TextDelta("Hel")]
    assert model.open_streams == 0


async def test_an_exhausted_script_says_so() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 2})])
    with pytest.raises(ScriptExhaustedError, match="called 2 times but only 1 steps"):
        await run_all(ToolLoop(model, [add]))


async def test_hooks_see_each_call_and_may_short_circuit_or_rewrite() -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    async def before(context: ToolContext) -> ToolResult | None:
        seen.append(("before", context.tool_name, dict(context.arguments)))
        if context.arguments.get("city") == "Cache":
            return ToolResult(context.tool_call_id, {"cached": True}, tool_name=context.tool_name)
        if context.arguments.get("city") == "Forbidden":
            raise ToolError("Not allowed.")
        return None

    def after(context: ToolContext, result: ToolResult) -> ToolResult | None:
        seen.append(("after", context.tool_name, {"is_error": result.is_error}))
        if context.arguments.get("city") == "Paris":
            return ToolResult(result.tool_call_id, {**result.content, "checked": True}, tool_name="get_weather")
        return None

    model = ScriptedModel([call("get_weather", {"city": c}) for c in ("Paris", "Cache", "Forbidden")], "ok")
    events = await run_all(ToolLoop(model, [get_weather], before_tool=before, after_tool=after))
    assert [e for e in events if isinstance(e, ToolResult)] == [
        ToolResult("call_0", {"city": "Paris", "temp": 21, "checked": True}, tool_name="get_weather"),
        ToolResult("call_1", {"cached": True}, tool_name="get_weather"),
        ToolResult("call_2", "Not allowed.", is_error=True, tool_name="get_weather"),
    ]
    assert ("before", "get_weather", {"city": "Paris"}) in seen
    assert seen.count(("after", "get_weather", {"is_error": False})) == 2


async def test_hooks_as_subclass_overrides() -> None:
    log: list[str] = []

    class AuditedLoop(ToolLoop):
        async def before_tool(self, context: ToolContext) -> ToolResult | None:
            log.append(f"{context.step}:{context.tool_call_id}")
            return None

    model = ScriptedModel([call("add", {"a": 1, "b": 2})], [call("add", {"a": 3, "b": 4})], "done")
    await run_all(AuditedLoop(model, [add]))
    assert log == ["0:call_0", "1:call_1"]


async def test_tools_receive_their_context() -> None:
    contexts: list[ToolContext] = []

    @tool
    async def introspect(x: int, ctx: ToolContext) -> int:
        """Looks at its own call."""
        contexts.append(ctx)
        return x

    model = ScriptedModel([call("introspect", {"x": 1}, id="abc")], "ok")
    await run_all(ToolLoop(model, [introspect]))
    [context] = contexts
    assert (context.tool_call_id, context.tool_name, context.step) == ("abc", "introspect", 0)
    assert context.arguments == {"x": 1}
    assert context.messages[0] == UserMessage("go")
    assert "ctx" not in introspect.parameters["properties"]


async def test_plain_functions_are_accepted_as_tools_and_sync_ones_run_in_a_thread() -> None:
    import threading

    threads: list[str] = []

    def where() -> str:
        """Which thread ran me."""
        threads.append(threading.current_thread().name)
        return "ok"

    model = ScriptedModel([call("where")], "ok")
    await run_all(ToolLoop(model, [where]))
    assert threads
    assert threads[0] != threading.current_thread().name
    with pytest.raises(ValueError, match="two tools"):
        ToolLoop(model, [where, Tool(where)])


# -- approval ----------------------------------------------------------------------


@tool(requires_approval=True)
async def send_email(to: str, body: str) -> str:
    """Sends an email."""
    return f"sent to {to}"


async def test_a_tool_that_needs_approval_asks_and_ends_the_run() -> None:
    model = ScriptedModel(["Sending.", call("send_email", {"to": "a@b.c", "body": "hi"})])
    events = await run_all(ToolLoop(model, [send_email]))
    assert events[-4:] == [
        Finish("tool-calls"),
        ToolApprovalRequest("approval-call_0", "call_0"),
        StepFinished(0),
        Done(),
    ]
    assert len(model.requests) == 1


async def test_an_approved_call_runs_on_the_continuation_then_the_model_answers() -> None:
    history: list[ModelMessage] = [
        UserMessage("email a@b.c saying hi"),
        AssistantMessage("Sending.", (ToolCallRequest("call_0", "send_email", '{"to": "a@b.c", "body": "hi"}'),)),
    ]
    model = ScriptedModel("Sent!")
    approvals = {"call_0": ToolApproval("approval-call_0", True)}
    events = [e async for e in ToolLoop(model, [send_email]).run(history, approvals=approvals)]
    assert events == [
        ToolResult("call_0", "sent to a@b.c", tool_name="send_email"),
        TextDelta("Sent!"),
        Finish("stop"),
        StepFinished(0),
        Done(),
    ]
    assert model.requests[0].messages[-1] == ToolMessage("call_0", "sent to a@b.c", False, "send_email")


async def test_a_denied_call_does_not_run_and_the_model_hears_why() -> None:
    history: list[ModelMessage] = [
        UserMessage("email a@b.c saying hi"),
        AssistantMessage("", (ToolCallRequest("call_0", "send_email", '{"to": "a@b.c", "body": "hi"}'),)),
    ]
    model = ScriptedModel("OK, not sent.")
    approvals = {"call_0": ToolApproval("approval-call_0", False, "wrong person")}
    events = [e async for e in ToolLoop(model, [send_email]).run(history, approvals=approvals)]
    assert events[0] == ToolDenied("call_0")
    assert model.requests[0].messages[-1] == ToolMessage(
        "call_0", "The user denied this tool call. Reason: wrong person", True, "send_email"
    )


async def test_a_continuation_without_a_decision_asks_again() -> None:
    history: list[ModelMessage] = [
        UserMessage("email"),
        AssistantMessage("", (ToolCallRequest("call_0", "send_email", '{"to": "a@b.c", "body": "hi"}'),)),
    ]
    model = ScriptedModel()
    events = [e async for e in ToolLoop(model, [send_email]).run(history)]
    assert events == [ToolApprovalRequest("approval-call_0", "call_0"), StepFinished(0), Done()]
    assert model.requests == []


async def test_concurrent_runs_of_one_loop_each_see_their_own_client_results() -> None:
    ask = ClientTool("ask_user")
    model = ScriptedModel(
        ["Asking A.", call("ask_user", id="call_0")],
        ["Asking B.", call("ask_user", id="call_0")],
        "A heard.",
        "B heard.",
    )
    loop = ToolLoop(model, [ask])
    run_a = loop.run([UserMessage("a")], client_results={"call_0": ClientToolResult("from A")})
    run_b = loop.run([UserMessage("b")], client_results={"call_0": ClientToolResult("from B")})
    # Both runs are under way before either reaches its tool call.
    assert await anext(run_a) == TextDelta("Asking A.")
    assert await anext(run_b) == TextDelta("Asking B.")
    rest_a = [e async for e in run_a]
    rest_b = [e async for e in run_b]

    assert ToolResult("call_0", "from A", tool_name="ask_user") in rest_a
    assert ToolResult("call_0", "from B", tool_name="ask_user") in rest_b
    assert model.requests[2].messages[-1] == ToolMessage("call_0", "from A", False, "ask_user")
    assert model.requests[3].messages[-1] == ToolMessage("call_0", "from B", False, "ask_user")


async def test_a_call_the_provider_ran_is_shown_with_its_result_and_not_run_again() -> None:
    """A provider-executed call (web search) and its result arrive in one
    model stream: the loop runs nothing, asks the model once, and the tool
    part the browser builds shows the provider's result."""
    from uistream_app.protocol.ui.encoder import UIMessageEncoder
    from uistream_app.protocol.ui.reader import UIMessageReader
    from uistream_app.protocol.ui.stream import aencode_events

    found = [{"url": "https://a.example/", "title": "A"}]
    model = ScriptedModel(
        [
            ToolCallStart("srvtoolu_1", "web_search", provider_executed=True),
            ToolCallDelta("srvtoolu_1", '{"query": "a"}'),
            ToolCall("srvtoolu_1", "web_search", '{"query": "a"}', provider_executed=True),
            ToolResult("srvtoolu_1", found, tool_name="web_search", provider_executed=True),
            "Found A.",
            Finish("stop"),
        ]
    )
    reader = UIMessageReader(message_id="m1")
    events: list[Any] = []

    async def recorded() -> Any:
        async for event in ToolLoop(model, [add]).run([UserMessage("search a")]):
            events.append(event)
            yield event

    async for chunk in aencode_events(recorded(), UIMessageEncoder("m1")):
        reader.feed(chunk)
    assert len(model.requests) == 1
    assert not [e for e in events if isinstance(e, ToolInputError)]
    assert events[-2:] == [StepFinished(0), Done()]
    tool_parts = [p for p in reader.message["parts"] if p["type"] == "tool-web_search"]
    assert len(tool_parts) == 1
    part = tool_parts[0]
    assert (part["state"], part["output"], part["providerExecuted"]) == ("output-available", found, True)
    assert part["input"] == {"query": "a"}


async def test_a_provider_ran_call_next_to_a_client_call_runs_only_the_client_call() -> None:
    model = ScriptedModel(
        [
            ToolCall("srvtoolu_1", "web_search", "{}", provider_executed=True),
            ToolResult("srvtoolu_1", [], tool_name="web_search", provider_executed=True),
            call("add", {"a": 1, "b": 2}, id="c1"),
        ],
        "3",
    )
    events = await run_all(ToolLoop(model, [add]))
    assert len(model.requests) == 2
    assert not [e for e in events if isinstance(e, ToolInputError)]
    assert ToolResult("c1", 3, tool_name="add") in events
    # The second call sees the client call and its result, not the provider's own.
    assert model.requests[1].messages[1:] == (
        AssistantMessage("", (ToolCallRequest("c1", "add", '{"a": 1, "b": 2}'),)),
        ToolMessage("c1", "3", False, "add"),
    )


async def test_the_next_call_gets_the_reasoning_parts_that_came_with_provider_metadata() -> None:
    from uistream_app.runs import ReasoningPart

    signed = {"anthropic": {"signature": "sig-1"}}
    model = ScriptedModel(
        [
            ReasoningDelta("Plain. "),
            ReasoningEnd(),
            ReasoningDelta("Signed"),
            ReasoningDelta(" thought."),
            ReasoningEnd(signed),
            call("add", {"a": 1, "b": 2}, id="c1"),
        ],
        "3",
    )
    await run_all(ToolLoop(model, [add]))
    step = model.requests[1].messages[1]
    assert isinstance(step, AssistantMessage)
    assert step.reasoning == "Plain. Signed thought."
    assert step.reasoning_parts == (ReasoningPart("Signed thought.", signed),)
