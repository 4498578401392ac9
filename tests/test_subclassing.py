"""The README's "subclass the chat view" path, as a project writes it:
class attributes and ``get_*`` hooks, ``get_source`` passed through or
replaced by an agent of one's own."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import AsyncClient, override_settings
from django.urls import path

from uistream_app.hooks import TurnContext
from uistream_app.models import Message
from uistream_app.protocol import events as ev
from uistream_app.protocol.sse import SSEParser
from uistream_app.runs import SystemMessage, tool
from uistream_app.testing import ScriptedModel, call
from uistream_app.views import ChatView

from .test_consumer import runs_finished

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

MODEL = ScriptedModel()


@tool
def get_weather(city: str) -> dict[str, Any]:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return {"city": city, "temperature": 18}


@tool
def refund_order(order_id: str) -> dict[str, Any]:
    """Refund an order.

    Args:
        order_id: The order's number.
    """
    return {"refunded": order_id}


class SupportChatView(ChatView):
    """The README's example, word for word but for the model."""

    system_prompt = "You are our support agent."
    max_steps = 4

    def get_model(self, context: TurnContext) -> Any:  # per user, per plan...
        return MODEL

    def get_tools(self, context: TurnContext) -> Any:
        user = context.owner.user
        if user is not None and user.is_staff:
            return [get_weather, refund_order]  # refund_order: another tool of yours
        return [get_weather]

    def get_system_prompt(self, context: TurnContext) -> Any:
        return f"You are our support agent. The plan is {context.extra.get('plan', 'free')}."

    def get_history(self, messages: Any) -> Any:  # what the model sees (default: the last 100 messages)
        return super().get_history(messages)

    def get_source(self, history: Any, run: Any, model: Any) -> Any:
        return super().get_source(history, run, model)


class OwnAgentChatView(ChatView):
    """``get_source`` replaced by an agent of one's own, reading useChat's
    extra body keys from the run."""

    model = MODEL

    def get_source(self, history: Any, run: Any, model: Any) -> AsyncIterator[ev.Event]:
        async def agent() -> AsyncIterator[ev.Event]:
            yield ev.TextDelta(f"{len(history)} message(s), plan {run.extra.get('plan')}, chat {run.chat_id}")
            yield ev.Finish("stop")

        return agent()


urlpatterns = [
    path("support/chat", SupportChatView.as_view()),
    path("own/chat", OwnAgentChatView.as_view()),
]


async def chat(path_: str, chat_id: str, text: str, *, user: Any = None, **extra: Any) -> list[dict[str, Any]]:
    client = AsyncClient()
    if user is not None:
        await client.aforce_login(user)
    body = {"id": chat_id, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}
    with override_settings(ROOT_URLCONF="tests.test_subclassing", UISTREAM={"ALLOW_ANONYMOUS": True}):
        response = await client.post(path_, json.dumps({**body, **extra}), content_type="application/json")
        assert response.status_code == 200, response.content
        raw = b"".join([chunk async for chunk in response.streaming_content])
    await runs_finished()
    return [json.loads(e.data) for e in SSEParser().feed(raw) if e.data != "[DONE]"]


async def test_the_readme_subclass_runs_its_prompt_tools_and_model() -> None:
    MODEL.enqueue([call("get_weather", {"city": "Paris"})], "It is 18 °C in Paris.")
    chunks = await chat("/support/chat", "s1", "Weather in Paris?")
    assert [c["output"] for c in chunks if c["type"] == "tool-output-available"] == [
        {"city": "Paris", "temperature": 18}
    ]
    first = MODEL.requests[-2]
    assert first.messages[0] == SystemMessage("You are our support agent. The plan is free.")
    assert [t.name for t in first.tools] == ["get_weather"]
    stored = await Message.objects.filter(conversation__client_id="s1", role="assistant").aget()
    assert [p["text"] for p in stored.parts if p["type"] == "text"] == ["It is 18 °C in Paris."]


async def test_the_readme_subclass_chooses_by_the_user_and_the_extra_keys() -> None:
    staff = await get_user_model().objects.acreate_user("ada", password="pw", is_staff=True)
    MODEL.enqueue("Which order?")
    await chat("/support/chat", "s2", "Refund me", user=staff, plan="team")
    asked = MODEL.requests[-1]
    assert asked.messages[0] == SystemMessage("You are our support agent. The plan is team.")
    assert [t.name for t in asked.tools] == ["get_weather", "refund_order"]


async def test_an_agent_of_ones_own_through_get_source() -> None:
    chunks = await chat("/own/chat", "o1", "hello", plan="pro")
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "1 message(s), plan pro, chat o1"
