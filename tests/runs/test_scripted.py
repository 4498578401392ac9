"""``ScriptedModel``: the public test double (``uistream_app.testing``)."""

from __future__ import annotations

from typing import Any

import pytest

from uistream_app.protocol.events import (
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    TextDelta,
    TextEnd,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)
from uistream_app.runs import ChatModel, ModelOptions, ScriptExhaustedError, ToolSpec, UserMessage
from uistream_app.testing import ScriptedModel, call, reasoning, text, usage

pytestmark = pytest.mark.asyncio


async def stream(model: ScriptedModel, *args: Any) -> list[Any]:
    return [e async for e in model.stream([UserMessage("hi")], *args)]


async def test_shorthands_expand_to_events() -> None:
    model = ScriptedModel()
    model.enqueue(
        [
            reasoning("a b", words=True),
            text("Hi there", words=True, end=True),
            call("f", {"x": "é"}, fragments=3),
            call("g", "not json", id="mine"),
            usage(3, 4),
        ]
    )
    assert await stream(model) == [
        ReasoningDelta("a"),
        ReasoningDelta(" b"),
        ReasoningEnd(),
        TextDelta("Hi"),
        TextDelta(" there"),
        TextEnd(),
        ToolCallStart("call_0", "f"),
        ToolCallDelta("call_0", '{"x"'),
        ToolCallDelta("call_0", ': "é'),
        ToolCallDelta("call_0", '"}'),
        ToolCall("call_0", "f", '{"x": "é"}'),
        ToolCallStart("mine", "g"),
        ToolCallDelta("mine", "not json"),
        ToolCall("mine", "g", "not json"),
        Usage(input_tokens=3, output_tokens=4),
        Finish("tool-calls"),
    ]


async def test_a_string_step_is_one_text_delta_and_an_explicit_finish_is_kept() -> None:
    model = ScriptedModel("Hello", ["Cut", Finish("length")])
    assert await stream(model) == [TextDelta("Hello"), Finish("stop")]
    assert await stream(model) == [TextDelta("Cut"), Finish("length")]
    assert model.remaining == 0


async def test_a_lone_call_or_event_is_a_step_of_its_own() -> None:
    model = ScriptedModel(call("f", {"x": 1}), TextDelta("done"))
    assert await stream(model) == [
        ToolCallStart("call_0", "f"),
        ToolCallDelta("call_0", '{"x": 1}'),
        ToolCall("call_0", "f", '{"x": 1}'),
        Finish("tool-calls"),
    ]
    assert await stream(model) == [TextDelta("done"), Finish("stop")]


async def test_requests_are_recorded_and_ids_count_over_the_models_life() -> None:
    model = ScriptedModel([call("f")], [call("f")])
    spec = ToolSpec("f", "F.", {"type": "object"})
    options = ModelOptions(temperature=0)
    first = await stream(model, [spec], options)
    second = await stream(model)
    assert first[0] == ToolCallStart("call_0", "f")
    assert second[0] == ToolCallStart("call_1", "f")
    assert model.requests[0].tools == (spec,)
    assert model.requests[0].options == options
    assert model.requests[0].messages == (UserMessage("hi"),)


async def test_enqueue_events_replays_exactly() -> None:
    model = ScriptedModel().enqueue_events([TextDelta("x")])
    assert await stream(model) == [TextDelta("x")]


async def test_an_exception_item_raises_there_and_an_empty_queue_says_so() -> None:
    model = ScriptedModel(["a", ValueError("boom"), "b"])
    seen: list[Any] = []

    async def drain() -> None:
        async for event in model.stream([]):
            seen.append(event)

    with pytest.raises(ValueError, match="boom"):
        await drain()
    assert seen == [TextDelta("a")]
    assert model.open_streams == 0
    with pytest.raises(ScriptExhaustedError):
        await stream(model)


async def test_it_satisfies_the_model_port() -> None:
    assert isinstance(ScriptedModel(), ChatModel)
