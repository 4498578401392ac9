"""Per-owner budgets over a period: an owner over budget gets 429 JSON
(``budget_exceeded``, ``Retry-After``, ``resets_at``) before any run starts,
with nothing written, on the useChat POST, AG-UI and the WebSocket; day
and month windows count the runs of their own period; two runs started at
once can't both slip past a nearly-spent budget."""

from __future__ import annotations

import asyncio
import datetime
from types import SimpleNamespace
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone

from uistream_app.lifecycle.spend import period_bounds
from uistream_app.models import Conversation, Message, Run
from uistream_app.policies import DailyBudget, OwnerBudget

from .test_bad_input_everywhere import agui_body, assert_error, chat_body, page_of
from .test_consumer import DEMO, Socket, runs_finished, send_frame

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

DEMO_MODEL = "uistream-demo"


def budgets(**periods: dict[str, Any]) -> dict[str, Any]:
    return {
        **DEMO,
        "THROTTLE_CLASSES": ["uistream_app.policies.DailyBudget", "uistream_app.policies.MonthlyBudget"],
        "BUDGETS": periods,
        # 1000 per million: a token costs a thousandth.
        "PRICES": {DEMO_MODEL: {"input": 1000, "output": 1000}},
    }


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UISTREAM_DEMO_DELAY_MS", "1")
    cache.clear()


async def spent(username: str, tokens: int, at: datetime.datetime, *, status: str = "completed") -> None:
    """A run of ``username`` that started at ``at`` and used ``tokens``."""
    user = await get_user_model().objects.aget(username=username)
    chat = await Conversation.objects.acreate(pk=f"old-{username}-{at.timestamp()}-{tokens}", owner=user)
    await Run.objects.acreate(
        conversation=chat,
        status=status,
        model=DEMO_MODEL,
        started_at=at,
        usage={"input_tokens": tokens // 2, "output_tokens": tokens - tokens // 2},
    )


async def written() -> tuple[int, int, int]:
    return (await Conversation.objects.acount(), await Message.objects.acount(), await Run.objects.acount())


async def drain(response: Any) -> None:
    async for _ in response.streaming_content:
        pass


async def test_an_owner_over_budget_is_refused_before_any_run_starts() -> None:
    alice = await page_of("alice")
    bob = await page_of("bob")
    await spent("alice", 1000, timezone.now())
    before = await written()
    with override_settings(UISTREAM=budgets(day={"tokens": 1000})):
        _, end = period_bounds("day")
        for path, body in (("/api/chat", chat_body("a1")), ("/api/agui", agui_body("a1"))):
            response = await alice.post(path, body)
            error = assert_error(response, 429, "budget_exceeded")
            assert error["resets_at"] == end.isoformat()
            assert error["budget"] == "day:tokens"
            assert 1 <= int(response["Retry-After"]) <= 86400
            assert "resets at" in error["message"]
        async with Socket(alice.cookie) as page:
            await page.send(send_frame("r1", "a2", "count to 2"))
            (refused,) = await page.until("r1")
        assert (refused["type"], refused["code"]) == ("error", "budget_exceeded")
        assert await written() == before
        # Someone else's budget is their own.
        response = await bob.post("/api/chat", chat_body("b1"))
        assert response.status_code == 200
        await drain(response)
    await runs_finished()


async def test_day_and_month_windows_count_the_runs_of_their_period(monkeypatch: pytest.MonkeyPatch) -> None:
    alice = await page_of("alice")
    now = timezone.make_aware(datetime.datetime(2026, 11, 15, 12, 0))
    monkeypatch.setattr(OwnerBudget, "now", lambda self: now)
    await spent("alice", 400, now - datetime.timedelta(hours=1))  # today
    await spent("alice", 500, now - datetime.timedelta(days=3))  # this month, not today
    await spent("alice", 5000, now - datetime.timedelta(days=20))  # last month
    # Today: 400 of 500 tokens; this month: 900 of 1000. Both open.
    with override_settings(UISTREAM=budgets(day={"tokens": 500}, month={"tokens": 1000, "reserve_tokens": 1})):
        response = await alice.post("/api/chat", chat_body("a1"))
        assert response.status_code == 200
        await drain(response)
        await runs_finished()
    # This month: 900 tokens cost 0.9 of a 0.8 budget; today's 0.4 is within 0.5.
    with override_settings(UISTREAM=budgets(day={"cost": 0.5}, month={"cost": 0.8})):
        response = await alice.post("/api/chat", chat_body("a2"))
        error = assert_error(response, 429, "budget_exceeded")
        assert error["budget"] == "month:cost"
        assert error["resets_at"] == timezone.make_aware(datetime.datetime(2026, 12, 1)).isoformat()
        assert int(response["Retry-After"]) == 15 * 86400 + 12 * 3600
    # The next day the day's window is empty again; the month's still counts.
    monkeypatch.setattr(OwnerBudget, "now", lambda self: now + datetime.timedelta(days=1))
    with override_settings(UISTREAM=budgets(day={"tokens": 100})):
        response = await alice.post("/api/chat", chat_body("a3"))
        assert response.status_code == 200
        await drain(response)
        await runs_finished()
    with override_settings(UISTREAM=budgets(month={"tokens": 900})):
        assert_error(await alice.post("/api/chat", chat_body("a4")), 429, "budget_exceeded")


async def test_two_runs_started_at_once_do_not_both_slip_past_a_nearly_spent_budget() -> None:
    alice = await page_of("alice")
    await spent("alice", 900, timezone.now())
    # 100 tokens left; a run reserves 200 while it runs.
    with override_settings(UISTREAM=budgets(day={"tokens": 1000, "reserve_tokens": 200})):
        first, second = await asyncio.gather(
            alice.post("/api/chat", chat_body("a1")), alice.post("/api/chat", chat_body("a2"))
        )
        answers = sorted([first, second], key=lambda r: r.status_code)
        assert [r.status_code for r in answers] == [200, 429]
        assert_error(answers[1], 429, "budget_exceeded")
        await drain(answers[0])
        await runs_finished()
    assert await Run.objects.filter(status="completed").acount() == 2  # the old one and one new


async def test_running_runs_count_as_reservations() -> None:
    alice = await page_of("alice")
    await spent("alice", 0, timezone.now(), status="running")
    await spent("alice", 0, timezone.now(), status="running")
    # Two runs running reserve 2 × 500 of 1000 tokens: nothing is left.
    with override_settings(UISTREAM=budgets(day={"tokens": 1000, "reserve_tokens": 500})):
        assert_error(await alice.post("/api/chat", chat_body("a1")), 429, "budget_exceeded")
    with override_settings(UISTREAM=budgets(day={"tokens": 1001, "reserve_tokens": 500})):
        response = await alice.post("/api/chat", chat_body("a1"))
        assert response.status_code == 200
        await drain(response)


async def test_a_visitors_budget_is_counted_under_a_digest_of_the_session_never_the_key() -> None:
    """The admission key goes to the cache (Redis, say): a session key there
    would be a stored credential."""

    def visitor(key: str) -> Any:
        return SimpleNamespace(user=AnonymousUser(), _request=SimpleNamespace(session=SimpleNamespace(session_key=key)))

    first, second = "a" * 32, "b" * 32
    (_, one), (_, other) = DailyBudget().owner_runs(visitor(first)), DailyBudget().owner_runs(visitor(second))
    assert first not in one
    assert second not in other
    assert one != other
