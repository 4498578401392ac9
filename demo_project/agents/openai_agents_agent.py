"""The demo's OpenAI Agents SDK chat: an ``agents.Agent`` on an offline
model, behind ``ChatView`` with ``agent = demo_agent``.

The SDK ships no fake model, so ``ScriptModel`` implements its ``Model``
interface: it reads the Responses input items the runner hands it (the
last user message, the ``function_call_output`` items since), asks
``script.reply()`` what to say, and streams the answer as the Responses
events an OpenAI model sends (``response.created``, a reasoning item with
its summary deltas, a message with ``response.output_text.delta`` events
or ``function_call`` items with argument deltas, ``response.completed``
carrying the whole output), built with the ``openai`` package's types.
No network and no API key; tracing is off so nothing tries to export
spans to OpenAI.

``send_email`` has ``needs_approval=True``: the run ends with an
interruption, and the adapter saves the SDK's ``RunState`` with the run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, ModelSettings, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.tool import DEFAULT_APPROVAL_REJECTION_MESSAGE, default_tool_error_function
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseReasoningSummaryPartAddedEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_reasoning_summary_part_added_event import Part as SummaryPart
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

from uistream_app.views import ChatView

from . import script

__all__ = ["OpenAIAgentsChatView", "ScriptModel", "demo_agent", "get_weather", "send_email"]

# The demo never talks to OpenAI: no spans exported either.
set_tracing_disabled(True)


def _id(prefix: str) -> str:
    """A fresh item id: call ids must not repeat in a conversation, across
    processes and restarts."""
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


#: What the SDK tells the model when a function tool raised.
_TOOL_ERROR = default_tool_error_function(None, Exception())  # type: ignore[arg-type]


def _prompt_and_outcomes(items: str | list[TResponseInputItem]) -> tuple[str, list[script.ToolOutcome]]:
    """The last user message, and the tool outcomes the model has been
    given since (a rejected call reads as denied and a failed one as
    failed, from the SDK's texts for them)."""
    if isinstance(items, str):
        return items, []
    prompt = ""
    names: dict[str, str] = {}
    outcomes: list[script.ToolOutcome] = []
    for item in items:
        entry: dict[str, Any] = dict(item)
        if entry.get("role") == "user":
            prompt, outcomes = _text(entry.get("content")), []
        elif entry.get("type") == "function_call":
            names[str(entry.get("call_id"))] = str(entry.get("name"))
        elif entry.get("type") == "function_call_output":
            output = entry.get("output")
            name = names.get(str(entry.get("call_id")), "the tool")
            if output == DEFAULT_APPROVAL_REJECTION_MESSAGE or str(output).startswith("The user denied"):
                outcomes.append(script.ToolOutcome(name, output, "denied"))
            elif output == _TOOL_ERROR:
                outcomes.append(script.ToolOutcome(name, output, "error"))
            else:
                outcomes.append(script.ToolOutcome(name, output))
        elif entry.get("role") == "assistant" and outcomes:
            # The model already answered these outcomes.
            outcomes = []
    return prompt, outcomes


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


class ScriptModel(Model):
    """The Agents SDK ``Model`` interface over ``script.reply()``: the
    answer streamed as Responses events, paced by ``script.delay()``.

    ``calls`` counts the model calls and ``inputs`` keeps the input items
    of each, so a test can see what the agent was given; ``completed`` and
    ``cancelled`` count the streams that ran to their end and those cut
    short, so it can see that a stopped run's stream was cancelled."""

    def __init__(self) -> None:
        self.calls = 0
        self.completed = 0
        self.cancelled = 0
        self.inputs: list[list[dict[str, Any]]] = []

    def _reply(self, input: str | list[TResponseInputItem]) -> script.Reply:
        self.calls += 1
        self.inputs.append([{"role": "user", "content": input}] if isinstance(input, str) else [dict(i) for i in input])
        prompt, outcomes = _prompt_and_outcomes(input)
        return script.reply(prompt, outcomes)

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        answer = self._reply(input)
        output = [item for item, _ in _items(answer)]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        answer = self._reply(input)
        seq = itertools.count()
        response = _response(_id("resp"), [], "in_progress")
        try:
            yield ResponseCreatedEvent(type="response.created", response=response, sequence_number=next(seq))
            output: list[TResponseOutputItem] = []
            for index, (item, pieces) in enumerate(_items(answer)):
                async for event in _stream_item(index, item, pieces, seq):
                    yield event
                output.append(item)
            done = _response(response.id, output, "completed")
            yield ResponseCompletedEvent(type="response.completed", response=done, sequence_number=next(seq))
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled += 1
            raise
        self.completed += 1


def _items(answer: script.Reply) -> list[tuple[TResponseOutputItem, list[str]]]:
    """The response's output items, each with the deltas it streams in."""
    items: list[tuple[TResponseOutputItem, list[str]]] = []
    if answer.reasoning:
        summary = [Summary(type="summary_text", text=answer.reasoning)]
        items.append((ResponseReasoningItem(id=_id("rs"), type="reasoning", summary=summary), [answer.reasoning]))
    if answer.text:
        text = ResponseOutputText(type="output_text", text="".join(answer.text), annotations=[])
        message = ResponseOutputMessage(
            id=_id("msg"), type="message", role="assistant", status="completed", content=[text]
        )
        items.append((message, list(answer.text)))
    for name, arguments in answer.calls:
        raw = json.dumps(arguments)
        call = ResponseFunctionToolCall(
            id=_id("fc"), call_id=_id("call"), type="function_call", name=name, arguments=raw, status="completed"
        )
        # Arguments arrive in pieces, as a model streams them.
        items.append((call, [raw[i : i + 8] for i in range(0, len(raw), 8)]))
    return items


async def _stream_item(
    index: int, item: TResponseOutputItem, pieces: list[str], seq: itertools.count[int]
) -> AsyncIterator[TResponseStreamEvent]:
    item_id = str(item.id)
    if isinstance(item, ResponseReasoningItem):
        opened = item.model_copy(update={"summary": []})
        yield ResponseOutputItemAddedEvent(
            type="response.output_item.added", item=opened, output_index=index, sequence_number=next(seq)
        )
        yield ResponseReasoningSummaryPartAddedEvent(
            type="response.reasoning_summary_part.added",
            item_id=item_id,
            output_index=index,
            summary_index=0,
            part=SummaryPart(type="summary_text", text=""),
            sequence_number=next(seq),
        )
        for piece in pieces:
            yield ResponseReasoningSummaryTextDeltaEvent(
                type="response.reasoning_summary_text.delta",
                item_id=item_id,
                output_index=index,
                summary_index=0,
                delta=piece,
                sequence_number=next(seq),
            )
    elif isinstance(item, ResponseOutputMessage):
        opened_message = item.model_copy(update={"content": [], "status": "in_progress"})
        yield ResponseOutputItemAddedEvent(
            type="response.output_item.added", item=opened_message, output_index=index, sequence_number=next(seq)
        )
        yield ResponseContentPartAddedEvent(
            type="response.content_part.added",
            item_id=item_id,
            output_index=index,
            content_index=0,
            part=ResponseOutputText(type="output_text", text="", annotations=[]),
            sequence_number=next(seq),
        )
        for piece in pieces:
            await asyncio.sleep(script.delay())
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=piece,
                logprobs=[],
                sequence_number=next(seq),
            )
        yield ResponseTextDoneEvent(
            type="response.output_text.done",
            item_id=item_id,
            output_index=index,
            content_index=0,
            text="".join(pieces),
            logprobs=[],
            sequence_number=next(seq),
        )
    elif isinstance(item, ResponseFunctionToolCall):
        opened_call = item.model_copy(update={"arguments": "", "status": "in_progress"})
        yield ResponseOutputItemAddedEvent(
            type="response.output_item.added", item=opened_call, output_index=index, sequence_number=next(seq)
        )
        for piece in pieces:
            await asyncio.sleep(script.delay())
            yield ResponseFunctionCallArgumentsDeltaEvent(
                type="response.function_call_arguments.delta",
                item_id=item_id,
                output_index=index,
                delta=piece,
                sequence_number=next(seq),
            )
        yield ResponseFunctionCallArgumentsDoneEvent(
            type="response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=item.arguments,
            sequence_number=next(seq),
        )
    yield ResponseOutputItemDoneEvent(
        type="response.output_item.done", item=item, output_index=index, sequence_number=next(seq)
    )


def _response(response_id: str, output: list[TResponseOutputItem], status: str) -> Response:
    usage = ResponseUsage(
        input_tokens=len(output) * 10,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens=len(output) * 5,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=len(output) * 15,
    )
    return Response(
        id=response_id,
        object="response",
        created_at=0,
        model="script",
        output=output,
        parallel_tool_calls=True,
        tool_choice="auto",
        tools=[],
        status=status,  # type: ignore[arg-type]
        usage=usage if status == "completed" else None,
    )


#: How many times each tool really ran (tests prove a denied call never did).
RAN: dict[str, int] = {"get_weather": 0, "send_email": 0}


@function_tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    RAN["get_weather"] += 1
    # JSON text: the SDK hands the model ``str()`` of any other value.
    return json.dumps(script.get_weather(city))


@function_tool(needs_approval=True)
def send_email(to: str, body: str) -> str:
    """Send an email (the demo only pretends to). Needs a person's approval.

    Args:
        to: The recipient's address.
        body: The text of the email.
    """
    RAN["send_email"] += 1
    return json.dumps(script.send_email(to, body))


demo_model = ScriptModel()

demo_agent: Agent[Any] = Agent(
    name="demo",
    instructions="You are the demo's offline assistant.",
    model=demo_model,
    model_settings=ModelSettings(),
    tools=[get_weather, send_email],
)


class OpenAIAgentsChatView(ChatView):
    """The demo chat on the OpenAI Agents SDK (``/api/agents/openai-agents/chat``)."""

    agent = demo_agent
