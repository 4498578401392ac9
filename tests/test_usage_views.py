"""Where usage is read: the admin's usage report (per owner and period,
with cost by the price table), the run page's history and cost, and the
API's ``usage/`` (the requesting owner's own, with their budgets)."""

from __future__ import annotations

import datetime
import hashlib
from typing import Any

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from uistream_app.lifecycle.spend import period_bounds
from uistream_app.models import Conversation, Run

from .test_admin import admin_client, body, inspector_url, make_full_run, staff  # noqa: F401

pytestmark = pytest.mark.django_db

PRICED = {"PRICES": {"gpt-x": {"input": 2.0, "output": 10.0}}}


def run_of(owner: Any, tokens_in: int, tokens_out: int, at: datetime.datetime, *, session: str = "") -> Run:
    chat = Conversation.objects.create(
        pk=f"c-{owner}-{session}-{at.timestamp()}-{tokens_in}", owner=owner, session_key=session
    )
    return Run.objects.create(
        conversation=chat,
        status="completed",
        model="gpt-x",
        started_at=at,
        usage={"input_tokens": tokens_in, "output_tokens": tokens_out},
    )


@pytest.fixture
def spenders(django_user_model: Any) -> tuple[Any, Any]:
    alice = django_user_model.objects.create_user("alice", password="pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    start, _ = period_bounds("month")
    now = timezone.now()
    run_of(alice, 1_000_000, 100_000, now)  # 2.0 + 1.0
    run_of(alice, 500_000, 0, now)  # 1.0
    run_of(bob, 0, 10, now)
    run_of(alice, 9_000_000, 0, start - datetime.timedelta(hours=1))  # last month
    run_of(None, 10, 10, now, session="visitor-session-key")
    return alice, bob


def test_the_admin_usage_report_shows_each_owner_and_cost(admin_client: Client, spenders: Any) -> None:
    alice, bob = spenders
    url = reverse("admin:uistream_app_run_usage")
    with override_settings(UISTREAM=PRICED):
        html = body(admin_client.get(url + "?period=month"))
    rows = html.split('class="uistream-usage-row"')[1:]
    assert len(rows) == 3
    # Most expensive first: alice's two runs this month, 1 600 000 tokens, 4.0.
    assert f"user {alice.pk} (alice)" in rows[0]
    assert "<td>2</td>" in rows[0]
    assert "<td>1500000</td><td>100000</td><td>4.000000</td>" in rows[0]
    assert f"user {bob.pk} (bob)" in rows[1] or f"user {bob.pk} (bob)" in rows[2]
    # A visitor by the fingerprint of the session key, never the key.
    fingerprint = hashlib.sha256(b"visitor-session-key").hexdigest()[:12]
    assert any(f"anonymous visitor {fingerprint}" in r for r in rows)
    assert "visitor-session" not in html
    # The month before holds alice's 9 000 000 tokens alone.
    start, _ = period_bounds("month")
    before = (start - datetime.timedelta(days=1)).date().isoformat()
    with override_settings(UISTREAM=PRICED):
        html = body(admin_client.get(url + f"?period=month&date={before}"))
    (row,) = html.split('class="uistream-usage-row"')[1:]
    assert "<td>9000000</td><td>0</td><td>18.000000</td>" in row


def test_the_usage_report_needs_the_view_permission(spenders: Any) -> None:
    alice, _ = spenders
    client = Client()
    client.force_login(alice)
    response = client.get(reverse("admin:uistream_app_run_usage"))
    assert response.status_code in (302, 403)


def test_the_api_gives_an_owner_their_own_usage(spenders: Any) -> None:
    alice, _ = spenders
    client = APIClient()
    client.force_authenticate(alice)
    with override_settings(UISTREAM={**PRICED, "BUDGETS": {"month": {"cost": 10.0}, "day": {"tokens": 2_000_000}}}):
        data = client.get("/api/usage/").json()
    month, day = data["periods"]["month"], data["periods"]["day"]
    assert (month["runs"], month["input_tokens"], month["output_tokens"]) == (2, 1_500_000, 100_000)
    assert month["cost"] == 4.0
    assert month["budget"] == {"cost": 10.0}
    assert month["remaining"] == {"cost": 6.0}
    assert day["budget"] == {"tokens": 2_000_000}
    assert day["remaining"] == {"tokens": 400_000}
    assert month["end"] == period_bounds("month")[1].isoformat()
    # Nobody else's usage: someone with no runs sees none.
    carol = type(alice).objects.create_user("carol", password="pw")
    client.force_authenticate(carol)
    assert client.get("/api/usage/").json()["periods"]["month"]["runs"] == 0


def test_the_run_page_shows_what_the_model_was_sent(admin_client: Client) -> None:
    run = make_full_run()
    Run.objects.filter(pk=run.pk).update(
        history={
            "strategy": "summarize",
            "stored_messages": 42,
            "messages": ["u20", "a20", "u21"],
            "estimated_tokens": 812,
            "summary": {"text": "The user planned a trip to Oslo.", "through": "a19", "covers": 38},
            "shortened_tool_results": ["call-7"],
        }
    )
    html = body(admin_client.get(inspector_url(run)))
    section = html.split('id="history"')[1]
    assert "summarize" in section
    assert "3 of 42" in section
    assert "812" in section
    assert "The user planned a trip to Oslo." in section
    assert "call-7" in section


def test_the_run_list_links_the_usage_report(admin_client: Client) -> None:
    html = body(admin_client.get(reverse("admin:uistream_app_run_changelist")))
    assert f'href="{reverse("admin:uistream_app_run_usage")}"' in html


def test_the_conversation_page_shows_its_history_summary(admin_client: Client) -> None:
    chat = Conversation.objects.create(
        pk="summarised",
        history_summary={
            "text": "They <b>planned</b> a trip.",
            "through": "a19",
            "through_position": 39,
            "covers": 40,
            "model": "gpt-x",
            "created_at": "2026-12-01T10:00:00+00:00",
        },
    )
    html = body(admin_client.get(reverse("admin:uistream_app_conversation_change", args=[chat.pk])))
    assert "They &lt;b&gt;planned&lt;/b&gt; a trip." in html
    assert "covers 40 messages, through a19; written by gpt-x" in html
