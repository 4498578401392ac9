"""History strategies on a 300-turn chat: what the model received (a
recording ``ScriptedModel``) is what each strategy says, tool calls travel
with their results, oversized tool results are cut with a marker, what was
sent is recorded on the run, and a summary is written once and reused."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from django.urls import path

from uistream_app.history import AllMessages, LastMessages, SummarizeOlder, TokenBudget
from uistream_app.models import Conversation, Message, Run
from uistream_app.runs import SystemMessage
from uistream_app.runs.messages import AssistantMessage, ToolMessage, UserMessage
from uistream_app.testing import ScriptedModel
from uistream_app.views import ChatView

from .test_bad_input_everywhere import Page, page_of
from .test_consumer import runs_finished

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

MODEL = ScriptedModel(name="recorder")
SUMMARIES = ScriptedModel(name="summariser")
PROMPT = "You are the weather desk."
TURNS = 299  # stored before the test's turn 300
BIG = 100_000  # characters of one tool result (turn 150)


def view(strategy: Any) -> Any:
    return type(
        "HistoryChatView", (ChatView,), {"model": MODEL, "system_prompt": PROMPT, "history_strategy": strategy}
    ).as_view()


urlpatterns = [
    path("all/chat", view(AllMessages())),
    path("last/chat", view(LastMessages(40))),
    path("budget/chat", view(TokenBudget(3000))),
    path("summary/chat", view(SummarizeOlder(20, batch_messages=20, summary_model=SUMMARIES))),
    path("own-summary/chat", view(SummarizeOlder(40, batch_messages=10))),
]


def question(turn: int) -> str:
    return f"Question {turn}: what is the weather in city number {turn}?"


async def long_chat(chat_id: str) -> Page:
    """alice's chat of ``TURNS`` turns; every tenth answer called a tool."""
    alice = await page_of("alice")
    user = await get_user_model().objects.aget(username="alice")
    chat = await Conversation.objects.acreate(pk=chat_id, owner=user)
    rows = []
    for turn in range(1, TURNS + 1):
        rows.append(
            Message(
                id=f"{chat_id}-u{turn}",
                conversation=chat,
                role="user",
                position=2 * turn - 2,
                parts=[{"type": "text", "text": question(turn)}],
            )
        )
        parts: list[dict[str, Any]] = [{"type": "step-start"}]
        if turn % 10 == 0:
            output = {"city": turn, "report": "x" * BIG if turn == 150 else "sunny"}
            parts += [
                {
                    "type": "tool-get_weather",
                    "toolCallId": f"call-{turn}",
                    "state": "output-available",
                    "input": {"city": str(turn)},
                    "output": output,
                },
                {"type": "step-start"},
            ]
        parts.append({"type": "text", "text": f"Answer {turn}: it is sunny.", "state": "done"})
        rows.append(
            Message(id=f"{chat_id}-a{turn}", conversation=chat, role="assistant", position=2 * turn - 1, parts=parts)
        )
    await Message.objects.abulk_create(rows)
    return alice


async def turn(page: Page, route: str, chat_id: str, number: int) -> tuple[Any, ...]:
    """Send turn ``number``; what the model received for it."""
    MODEL.enqueue("Noted.")
    body = {
        "id": chat_id,
        "messages": [{"id": f"new-{number}", "role": "user", "parts": [{"type": "text", "text": question(number)}]}],
    }
    with override_settings(ROOT_URLCONF="tests.test_history"):
        response = await page.post(f"/{route}/chat", body)
        assert response.status_code == 200, response.content
        raw = b"".join([chunk async for chunk in response.streaming_content])
    assert b'"type":"error"' not in raw, raw
    await runs_finished()
    return MODEL.requests[-1].messages


def questions(messages: Any) -> list[int]:
    return [int(m.content.split(":")[0].split()[1]) for m in messages if isinstance(m, UserMessage)]


def assert_tool_calls_paired(messages: Any) -> None:
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            results = messages[index + 1 : index + 1 + len(message.tool_calls)]
            assert [r.tool_call_id for r in results] == [c.id for c in message.tool_calls]
            assert all(isinstance(r, ToolMessage) for r in results)
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    called = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    assert answered == called


def estimated(messages: Any) -> int:
    """The documented heuristic, written out: chars / 4 rounded up, plus 4 a message."""
    total = 0
    for m in messages:
        text = m.content
        if isinstance(m, AssistantMessage):
            text += m.reasoning + "".join(c.name + c.arguments for c in m.tool_calls)
        total += math.ceil(len(text) / 4) + 4
    return total


async def recorded(chat_id: str) -> dict[str, Any]:
    run = await Run.objects.filter(conversation__client_id=chat_id).order_by("-started_at").afirst()
    assert run is not None
    assert run.history is not None
    return run.history


async def test_all_sends_every_turn() -> None:
    page = await long_chat("h-all")
    sent = await turn(page, "all", "h-all", 300)
    assert sent[0] == SystemMessage(PROMPT)
    assert questions(sent) == list(range(1, 301))
    assert_tool_calls_paired(sent)
    # The 100 000-character result went as its first 16 000 and a marker.
    (big,) = [m for m in sent if isinstance(m, ToolMessage) and m.tool_call_id == "call-150"]
    assert big.content.startswith('{"city": 150, "report": "xxx')
    assert len(big.content) < 16_200
    assert big.content.endswith("more characters of this tool result were cut to fit the context]")
    record = await recorded("h-all")
    assert record["strategy"] == "all"
    assert record["shortened_tool_results"] == ["call-150"]
    assert len(record["messages"]) == 2 * 300 - 1


async def test_last_messages_sends_the_last_n() -> None:
    page = await long_chat("h-last")
    sent = await turn(page, "last", "h-last", 300)
    assert sent[0] == SystemMessage(PROMPT)
    assert isinstance(sent[1], UserMessage)
    # 40 stored messages ending at the new question: turns 281-300 (the
    # 40th from the end is an answer, dropped so the history starts a turn).
    assert questions(sent) == list(range(281, 301))
    assert_tool_calls_paired(sent)
    assert [m.tool_call_id for m in sent if isinstance(m, ToolMessage)] == ["call-290"]
    record = await recorded("h-last")
    assert record["messages"][0] == "h-last-u281"
    assert record["messages"][-1] == "new-300"


async def test_token_budget_keeps_whole_turns_within_the_budget() -> None:
    page = await long_chat("h-budget")
    sent = await turn(page, "budget", "h-budget", 300)
    assert sent[0] == SystemMessage(PROMPT)
    assert isinstance(sent[1], UserMessage)
    assert estimated(sent) <= 3000
    kept = questions(sent)
    assert kept == list(range(kept[0], 301))
    assert 300 - kept[0] > 20  # it did keep a good stretch
    assert_tool_calls_paired(sent)
    record = await recorded("h-budget")
    assert record["estimated_tokens"] == estimated(sent)
    assert record["dropped_messages"] == 2 * (kept[0] - 1)


async def test_the_summary_is_written_once_and_reused_on_the_next_turn() -> None:
    page = await long_chat("h-sum")
    SUMMARIES.enqueue("Earlier: the user asked about the weather in 290 cities; it was sunny everywhere.")
    before = len(SUMMARIES.requests)
    sent = await turn(page, "summary", "h-sum", 300)
    assert len(SUMMARIES.requests) == before + 1
    # The summariser read the older turns, tool results included (cut).
    asked = SUMMARIES.requests[-1].messages[1].content
    assert "User: Question 1:" in asked
    assert "Tool result (get_weather)" in asked
    assert sent[0] == SystemMessage(PROMPT)
    assert sent[1] == SystemMessage(
        "Summary of the earlier conversation:\n"
        "Earlier: the user asked about the weather in 290 cities; it was sunny everywhere."
    )
    verbatim = questions(sent)
    assert verbatim == list(range(291, 301))  # the last 20 messages
    assert_tool_calls_paired(sent)
    stored = (await Conversation.objects.aget(client_id="h-sum")).history_summary
    assert stored["through"] == "h-sum-a290"
    # Its row, by key: the versions of a question share its id.
    through = await Message.objects.current().aget(conversation__client_id="h-sum", position=stored["through_position"])
    assert (stored["through_key"], through.ui_id) == (through.pk, "h-sum-a290")
    assert stored["model"] == "summariser"
    record = await recorded("h-sum")
    assert record["summary"]["through"] == "h-sum-a290"
    assert record["summary_written"] is True

    # The next turn reuses it: no summariser call, the verbatim part grows.
    sent = await turn(page, "summary", "h-sum", 301)
    assert len(SUMMARIES.requests) == before + 1
    assert sent[1] == SystemMessage(
        "Summary of the earlier conversation:\n"
        "Earlier: the user asked about the weather in 290 cities; it was sunny everywhere."
    )
    assert questions(sent) == list(range(291, 302))
    record = await recorded("h-sum")
    assert "summary_written" not in record
    assert json.dumps(record["summary"]).count("290 cities") == 1


async def test_the_runs_own_model_writes_the_summary_by_default() -> None:
    page = await long_chat("h-own")
    # The run's model is called twice: the summary (no tools), then the answer.
    MODEL.enqueue("Weather questions about 280 cities, all sunny.")
    calls = len(MODEL.requests)
    sent = await turn(page, "own-summary", "h-own", 300)
    summary_request, answer_request = MODEL.requests[calls:]
    assert summary_request.tools == ()
    assert "User: Question 1:" in summary_request.messages[1].content
    assert answer_request.messages == sent
    assert sent[1] == SystemMessage(
        "Summary of the earlier conversation:\nWeather questions about 280 cities, all sunny."
    )
    assert questions(sent) == list(range(281, 301))
    stored = (await Conversation.objects.aget(client_id="h-own")).history_summary
    assert stored["model"] == "recorder"
