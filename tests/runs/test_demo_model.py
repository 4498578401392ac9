"""The demo's offline model and tools (``demo_project/demo_model.py``)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from demo_project import demo_model
from demo_project.demo_model import DEMO_TOOLS, DemoModel, make_model, safe_eval
from uistream_app.protocol.events import (
    Done,
    Finish,
    ReasoningDelta,
    StepFinished,
    TextDelta,
    ToolApprovalRequest,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from uistream_app.runs import (
    AssistantMessage,
    ModelMessage,
    ToolApproval,
    ToolCallRequest,
    ToolError,
    ToolLoop,
    UserMessage,
)
from uistream_app.runs.openai import OpenAIChatModel
from uistream_app.runs.steering import SteeringInbox, SteeringRequest

pytestmark = pytest.mark.asyncio


async def run(prompt: str, tools: Any = DEMO_TOOLS) -> list[Any]:
    loop = ToolLoop(DemoModel(delay_ms=0), tools)
    return [e async for e in loop.run([UserMessage(prompt)])]


def answer(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_it_thinks_aloud_then_answers_word_by_word() -> None:
    events = await run("hello")
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert isinstance(events[0], ReasoningDelta)
    assert first_text > 1
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 10
    assert all(d.count(" ") <= 1 for d in deltas)
    assert 'You said: "hello"' in answer(events)
    assert isinstance(events[-3], Finish)
    assert events[-1] == Done()


async def test_the_weather_calls_get_weather_per_city_in_parallel_then_answers() -> None:
    events = await run("What's the weather in Paris and Tokyo?")
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.tool_call_id, c.input) for c in calls] == [
        ("call_0", '{"city": "Paris"}'),
        ("call_1", '{"city": "Tokyo"}'),
    ]
    assert any(isinstance(e, ToolCallDelta) for e in events)
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.content["city"] for r in results] == ["Paris", "Tokyo"]
    paris = results[0].content
    text = answer(events)
    assert f"In Paris it is {paris['temperature_c']}°C and {paris['conditions']}" in text
    assert "In Tokyo it is" in text
    assert [e.reason for e in events if isinstance(e, Finish)] == ["tool-calls", "stop"]


async def test_it_is_deterministic() -> None:
    prompt = "weather in Oslo and compute 2 ** 10"
    assert await run(prompt) == await run(prompt)


async def test_compute_calls_calculate_and_answers_from_the_result() -> None:
    events = await run("compute 12 * (3 + 4) please")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == {"expression": "12 * (3 + 4)", "result": 84}
    assert "12 * (3 + 4) = 84." in answer(events)


async def test_a_calculation_error_is_answered_too() -> None:
    events = await run("what is 1 / 0?")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert result.content == "Division by zero."
    assert "The calculate tool failed: Division by zero." in answer(events)


@pytest.mark.parametrize("n", [1, 5, 100])
async def test_count_to_n_streams_one_delta_per_number(n: int) -> None:
    events = await run(f"Please count to {n}")
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == [str(i) if i == 1 else f" {i}" for i in range(1, n + 1)]
    assert not any(isinstance(e, ToolCall) for e in events)


async def test_email_asks_for_approval_then_pretends_to_send() -> None:
    events = await run("email ada@example.com saying the report is ready")
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert call.tool_name == "send_email"
    assert call.input == '{"to": "ada@example.com", "body": "the report is ready"}'
    assert events[-3] == ToolApprovalRequest("approval-call_0", "call_0")
    assert not any(isinstance(e, ToolResult) for e in events)

    history: list[ModelMessage] = [
        UserMessage("email ada@example.com saying the report is ready"),
        AssistantMessage("", (ToolCallRequest(call.tool_call_id, call.tool_name, call.input),)),
    ]
    loop = ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS)
    approved = {"call_0": ToolApproval("approval-call_0", True)}
    events = [e async for e in loop.run(history, approvals=approved)]
    assert events[0] == ToolResult(
        "call_0",
        {"status": "sent", "to": "ada@example.com", "characters": 19, "note": "The demo only pretends to send email."},
        tool_name="send_email",
    )
    assert "Done: the email to ada@example.com is sent" in answer(events)

    denied = {"call_0": ToolApproval("approval-call_0", False, "not now")}
    events = [e async for e in loop.run(history, approvals=denied)]
    assert "I did not run send_email: The user denied this tool call. Reason: not now" in answer(events)


async def test_a_missing_tool_is_explained_not_called() -> None:
    events = await run("weather in Paris", tools=[])
    assert not any(isinstance(e, ToolCall) for e in events)
    assert "the get_weather tool is not available" in answer(events)


async def test_weather_without_a_city_asks_for_one() -> None:
    assert answer(await run("how is the weather?")) == "Which city would you like the weather for?"


async def test_usage_is_reported() -> None:
    events = await run("count to 3")
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert usage.output_tokens == sum(isinstance(e, TextDelta | ReasoningDelta) for e in events)


async def test_the_delay_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UISTREAM_DEMO_DELAY_MS", raising=False)
    assert DemoModel().delay() == 0.03
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "0")
    assert DemoModel().delay() == 0
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "250")
    assert DemoModel().delay() == 0.25
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "soon")
    assert DemoModel().delay() == 0.03
    assert DemoModel(delay_ms=5).delay() == 0.005

    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "7")
    monkeypatch.setattr(demo_model, "asyncio", types.SimpleNamespace(sleep=sleep))
    events = [e async for e in DemoModel().stream([UserMessage("count to 4")])]
    deltas = [e for e in events if isinstance(e, TextDelta | ReasoningDelta)]
    assert pauses == [0.007] * len(deltas)


async def test_make_model_switches_to_openai_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    assert isinstance(make_model(), DemoModel)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = make_model()
    assert isinstance(model, OpenAIChatModel)
    assert (model.model, model.url) == ("gpt-test", "http://127.0.0.1:9/v1/chat/completions")


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("-2 ^ 2", -4),
        ("2 ** -1", 0.5),
        ("10 % 4", 2),
        ("6 × 7", 42),
        ("1e3 + 1", 1001),
        ("0.1 + 0.2", 0.30000000000000004),
    ],
)
async def test_safe_eval_computes(expression: str, value: float) -> None:
    assert safe_eval(expression) == value


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "x + 1",
        "(1).__class__",
        "[1, 2]",
        "9 ** 9 ** 9",
        "2 ** 100000",
        "10 ** 5000",
        "1 / 0",
        "",
        "1 +",
        "(-8) ** 0.5",
        "2" * 400,
        "True + 1",
        "'a' * 3",
        "lambda: 1",
    ],
)
async def test_safe_eval_refuses(expression: str) -> None:
    with pytest.raises(ToolError):
        safe_eval(expression)


def _steps_said(events: list[Any]) -> list[str]:
    """The text of each step, and ``| pause`` where the step called it."""
    steps, text = [], []
    for event in events:
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, ToolCall):
            text.append(f" | {event.tool_name}")
        elif isinstance(event, StepFinished):
            steps.append("".join(text))
            text = []
    return steps


async def test_count_slowly_counts_in_six_steps_of_fifty_with_a_pause_between() -> None:
    steps = _steps_said(await run("count to 300 slowly"))
    assert len(steps) == 6
    assert steps[0] == " ".join(str(i) for i in range(1, 51)) + " | pause"
    assert steps[4] == " ".join(str(i) for i in range(201, 251)) + " | pause"
    assert steps[5] == " ".join(str(i) for i in range(251, 301))  # the last: no pause, the answer ends


async def test_now_count_backwards_steered_in_turns_the_next_step_round() -> None:
    inbox = SteeringInbox()
    loop = ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS)
    events = []
    async for event in loop.run([UserMessage("count to 300 slowly")], steering=inbox):
        events.append(event)
        if event == StepFinished(1):
            said = [{"type": "text", "text": "now count backwards"}]
            outcome = inbox.send(SteeringRequest("s1", "steer", said, UserMessage("now count backwards")))
    steps = _steps_said(events)
    assert steps[1].endswith("99 100 | pause")
    assert steps[2] == " ".join(str(i) for i in range(99, 49, -1)) + " | pause"
    assert steps[3] == " ".join(str(i) for i in range(49, 0, -1))
    assert len(steps) == 4
    assert (await outcome).to_wire() == {"type": "delivered", "id": "s1", "stepNumber": 2}


async def test_a_question_after_a_slow_count_is_answered_as_itself() -> None:
    counted = await run("count to 60 slowly")
    history: list[ModelMessage] = [UserMessage("count to 60 slowly")]
    history.append(AssistantMessage("".join(e.text for e in counted if isinstance(e, TextDelta))))
    history.append(UserMessage("compute 2 + 2"))
    events = [e async for e in ToolLoop(DemoModel(delay_ms=0), DEMO_TOOLS).run(history)]
    assert ToolResult("call_0", {"expression": "2 + 2", "result": 4}, tool_name="calculate") in events
