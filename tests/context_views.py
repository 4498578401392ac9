"""Endpoints whose hooks choose from the turn's context (tests/test_turn_context.py).

The same ``PerUserHooks`` on a chat view, an AG-UI view and a consumer:
every user may ask for the weather, staff may also refund orders, and the
system prompt says who asked and how. ``ContextEchoModel`` answers with the
system prompt and the names of the tools it was given, so what a client
reads is what the hooks chose.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from uistream_app.consumers import ChatConsumer
from uistream_app.hooks import TurnContext
from uistream_app.protocol import events as ev
from uistream_app.runs import ChatModel, ModelMessage, SystemMessage, Tool
from uistream_app.views import AGUIView, ChatView


def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


def refund_order(order_id: str) -> dict[str, Any]:
    """Refund an order (staff only)."""
    return {"refunded": order_id}


class ContextEchoModel:
    """Says its system prompt and the tools it may call, then stops."""

    name = "context-echo"

    async def stream(
        self, messages: Sequence[ModelMessage], tools: Sequence[Any] = (), options: Any = None
    ) -> AsyncIterator[ev.Event]:
        prompt = next((m.content for m in messages if isinstance(m, SystemMessage)), "")
        names = ", ".join(sorted(t.name for t in tools)) or "none"
        yield ev.TextDelta(f"{prompt} | tools: {names}")
        yield ev.Finish("stop")


def describe(context: TurnContext) -> str:
    """The system prompt: who asked, over what, where the run executes."""
    user = context.owner.user
    who = user.get_username() if user is not None else "anonymous"
    request = type(context.request).__name__ if context.request is not None else "none"
    return (
        f"user={who} transport={context.transport} worker={context.on_worker} "
        f"request={request} plan={context.extra.get('plan', '-')}"
    )


class PerUserHooks:
    """The hooks: tools by ``context.owner.user``, the prompt by the context."""

    def get_model(self, context: TurnContext) -> ChatModel:
        return ContextEchoModel()

    def get_tools(self, context: TurnContext) -> list[Tool]:
        tools = [Tool(get_weather)]
        user = context.owner.user
        if user is not None and user.is_staff:
            tools.append(Tool(refund_order))
        return tools

    def get_system_prompt(self, context: TurnContext) -> str:
        return describe(context)


class PerUserChatView(PerUserHooks, ChatView):
    pass


class PerUserAGUIView(PerUserHooks, AGUIView):
    pass


class PerUserConsumer(PerUserHooks, ChatConsumer):
    pass


class WorkerRefusingChatView(PerUserChatView):
    """A hook that fails where there is no request (a worker)."""

    def get_tools(self, context: TurnContext) -> list[Tool]:
        if context.on_worker:
            raise RuntimeError("no tools on a worker")
        return super().get_tools(context)
