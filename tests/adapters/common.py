"""What the three frameworks' adapter tests share: reading what was stored,
and the drop-then-resume round trip every adapter run must survive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from demo_project.agents import pydantic_ai_agent
from uistream_app.models import Conversation

from ..test_chat_http import Browser, read_chunks, text_of


def stored(chat_id: str) -> list[dict[str, Any]]:
    """The chat's stored messages as UIMessages, oldest first."""
    return [m.as_ui_message() for m in Conversation.objects.get(client_id=chat_id).messages.order_by("position")]


def record_pydantic_ai_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[ModelMessage]]:
    """What the pydantic-ai demo agent's FunctionModel is sent from now on,
    call by call (the test's ``monkeypatch`` undoes it)."""
    calls: list[list[ModelMessage]] = []
    model = pydantic_ai_agent.agent.model
    assert isinstance(model, FunctionModel)
    original = model.stream_function
    assert original is not None

    def recording(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        calls.append(list(messages))
        return original(messages, info)

    monkeypatch.setattr(model, "stream_function", recording)
    return calls


def text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def tool_parts(message: dict[str, Any], name: str) -> list[dict[str, Any]]:
    return [p for p in message["parts"] if p["type"] == f"tool-{name}"]


def drop_then_resume(
    browser: Browser, api: str, chat_id: str, prompt: str, *, words: int = 5
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """POST ``prompt``, drop the connection once ``words`` words of text
    arrived, then GET the chat's resume URL: the chunks the POST read, the
    resumed stream's, and whether ``[DONE]`` ended it."""
    with browser.client.stream(
        "POST", api, json=browser.chat_body(chat_id, prompt), headers={"X-CSRFToken": browser.token}
    ) as response:
        head, _ = read_chunks(response, stop=lambda cs: text_of(cs).count(" ") >= words)
    with browser.client.stream("GET", f"{api}/{chat_id}/stream") as resumed:
        assert resumed.status_code == 200
        replay, done = read_chunks(resumed)
    return head, replay, done
