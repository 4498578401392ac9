"""The demo's pydantic-ai chat: a ``pydantic_ai.Agent`` on pydantic-ai's own
offline ``FunctionModel``, whose stream function asks ``script.reply()``
and speaks the answer as pydantic-ai parts (a thinking part, text deltas
paced by ``script.delay()``, tool calls with their arguments streamed in
fragments). ``send_email`` needs approval in pydantic-ai's own way
(``requires_approval=True``); the view is a ``ChatView`` with the agent
set, nothing else."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, DeltaToolCalls, FunctionModel

from uistream_app.views import ChatView

from . import script

__all__ = ["PydanticAIChatView", "agent", "demo_stream"]


def _prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    if isinstance(part.content, str):
                        return part.content
                    # With files: the text pieces between them.
                    return "".join(piece for piece in part.content if isinstance(piece, str))
    return ""


_STATUS = {"denied": "denied", "failed": "error", "retried": "error"}


def _outcomes(messages: list[ModelMessage]) -> list[script.ToolOutcome]:
    """The tool returns the model has not answered yet: those after its
    last response."""
    outcomes: list[script.ToolOutcome] = []
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            break
        returns = [part for part in message.parts if isinstance(part, ToolReturnPart)]
        outcomes[:0] = [
            script.ToolOutcome(part.tool_name, part.content, _STATUS.get(part.outcome, "ok")) for part in returns
        ]
    return outcomes


async def demo_stream(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls | dict[int, DeltaThinkingPart]]:
    """The ``FunctionModel`` stream function: the script's reply as
    pydantic-ai stream items."""
    answer = script.reply(_prompt(messages), _outcomes(messages))
    if answer.reasoning:
        yield {0: DeltaThinkingPart(content=answer.reasoning)}
    for delta in answer.text:
        await asyncio.sleep(script.delay())
        yield delta
    for index, (name, arguments) in enumerate(answer.calls, start=1):
        await asyncio.sleep(script.delay())
        text = json.dumps(arguments)
        # The arguments in two fragments, as a provider streams them.
        middle = len(text) // 2
        yield {index: DeltaToolCall(name=name, json_args=text[:middle])}
        yield {index: DeltaToolCall(json_args=text[middle:])}


agent = Agent(FunctionModel(stream_function=demo_stream, model_name="demo-script"), name="demo")


@agent.tool_plain
def get_weather(city: str) -> dict[str, Any]:
    """Get the current weather for a city.

    Args:
        city: The city's name, e.g. "Paris".
    """
    return script.get_weather(city)


@agent.tool_plain(requires_approval=True)
def send_email(to: str, body: str) -> dict[str, Any]:
    """Send an email. Needs a person's approval.

    Args:
        to: The recipient's address.
        body: The text of the email.
    """
    return script.send_email(to, body)


class PydanticAIChatView(ChatView):
    """``POST /api/agents/pydantic-ai/chat``: the pydantic-ai agent."""

    agent = agent
