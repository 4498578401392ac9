"""Finding the bad ones in the admin: the run and conversation lists
filtered by feedback, outcome, model, owner and date (each row once); a
run's page with the feedback beside its message and links to the other
attempts; a conversation's page showing its current branch only, with
"n versions" where a message has more, at a cost that does not grow."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from uistream_app.models import Conversation, Feedback, Message, Run

from .test_admin import admin_client, body, count_queries, inspector_url, staff  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

START = timezone.now() - dt.timedelta(days=3)


def tool_part(state: str) -> dict[str, Any]:
    part = {"type": "tool-get_weather", "toolCallId": "call-1", "state": state, "input": {"city": "Paris"}}
    if state == "output-error":
        part["errorText"] = "the weather service is down"
    else:
        part["output"] = {"temperature": 18}
    return part


class Chat:
    """A conversation whose answers may each have several versions."""

    def __init__(self, key: str, *, owner: Any = None, session_key: str = "", title: str = "") -> None:
        self.conversation = Conversation.objects.create(
            pk=key, owner=owner, session_key=session_key, title=title or key
        )
        self.last: Message | None = None
        self.clock = START

    def tick(self) -> dt.datetime:
        self.clock += dt.timedelta(seconds=1)
        return self.clock

    def ask(self, text: str, *, key: str = "", parent: Message | None = None, current: bool = True) -> Message:
        parent = self.last if parent is None and current else parent
        position = 0 if parent is None else parent.position + 1
        at = self.tick()
        message = Message.objects.create(
            pk=key or f"{self.conversation.pk}-u{position}-{at.timestamp()}",
            conversation=self.conversation,
            role="user",
            parts=[{"type": "text", "text": text}],
            position=position,
            parent_key=parent.pk if parent is not None else "",
            current=current,
            created_at=at,
            selected_at=at,
        )
        if current:
            self.last = message
        return message

    def answer(
        self,
        question: Message,
        text: str = "an answer",
        *,
        key: str = "",
        current: bool = True,
        status: str = "completed",
        model: str = "demo",
        error_code: str = "",
        parts: list[dict[str, Any]] | None = None,
    ) -> Run:
        at = self.tick()
        message = Message.objects.create(
            pk=key or f"{question.pk}-a-{at.timestamp()}",
            conversation=self.conversation,
            role="assistant",
            parts=parts if parts is not None else [{"type": "text", "text": text}],
            position=question.position + 1,
            parent_key=question.pk,
            current=current,
            created_at=at,
            selected_at=at,
        )
        if current:
            self.last = message
        return Run.objects.create(
            conversation=self.conversation,
            message=message,
            status=status,
            model=model,
            error_code=error_code,
            started_at=at,
            finished_at=None if status == "running" else at + dt.timedelta(seconds=1),
        )


def rate(run: Run, rating: str, comment: str = "", reason: str = "") -> Feedback:
    assert run.message is not None
    return Feedback.objects.create(message=run.message, run=run, rating=rating, comment=comment, reason=reason)


def listed(client: Client, model: str, query: dict[str, str], rows: list[Any]) -> list[Any]:
    """Which of ``rows`` the changelist of ``model`` lists under ``query``."""
    html = body(client.get(reverse(f"admin:uistream_app_{model}_changelist"), query))
    assert "?e=1" not in html
    return [row for row in rows if reverse(f"admin:uistream_app_{model}_change", args=[row.pk]) in html]


@pytest.fixture
def runs(django_user_model: Any) -> dict[str, Run]:
    ada = django_user_model.objects.create_user("ada", "ada@example.com", "pw")
    found: dict[str, Run] = {}
    chat = Chat("by-ada", owner=ada)
    found["down"] = chat.answer(chat.ask("one"), model="gpt-a")
    rate(found["down"], "down")
    found["down_comment"] = chat.answer(chat.ask("two"), model="gpt-a")
    rate(found["down_comment"], "down", comment="Wrong city.", reason="inaccurate")
    found["up"] = chat.answer(chat.ask("three"), model="gpt-b")
    rate(found["up"], "up", comment="great")
    visitor = Chat("by-a-visitor", session_key="v" * 32)
    found["failed"] = visitor.answer(visitor.ask("four"), status="failed", error_code="ModelError")
    found["usage_limit"] = visitor.answer(visitor.ask("five"), status="failed", error_code="usage_limit")
    found["interrupted"] = visitor.answer(visitor.ask("six"), status="interrupted")
    found["stopped"] = visitor.answer(visitor.ask("seven"), status="stopped")
    found["tool_error"] = visitor.answer(
        visitor.ask("eight"), parts=[tool_part("output-error"), {"type": "text", "text": "sorry"}]
    )
    found["tool_ok"] = visitor.answer(
        # A text that quotes the error state is no tool error.
        visitor.ask("nine"),
        parts=[tool_part("output-available"), {"type": "text", "text": 'it said "state": "output-error"'}],
    )
    return found


# -- the run list ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"feedback": "down"}, ["down", "down_comment"]),
        ({"feedback": "down_comment"}, ["down_comment"]),
        ({"feedback": "up"}, ["up"]),
        (
            {"feedback": "none"},
            ["failed", "usage_limit", "interrupted", "stopped", "tool_error", "tool_ok"],
        ),
        ({"outcome": "failed"}, ["failed", "usage_limit"]),
        ({"outcome": "usage_limit"}, ["usage_limit"]),
        ({"outcome": "interrupted"}, ["interrupted"]),
        ({"outcome": "stopped"}, ["stopped"]),
        ({"outcome": "tool_error"}, ["tool_error"]),
        ({"model": "gpt-a"}, ["down", "down_comment"]),
        ({"owner": "anonymous"}, ["failed", "usage_limit", "interrupted", "stopped", "tool_error", "tool_ok"]),
        ({"owner": "user"}, ["down", "down_comment", "up"]),
        ({"feedback": "down", "model": "gpt-b"}, []),
    ],
)
def test_the_run_list_finds_the_bad_ones(
    admin_client: Client, runs: dict[str, Run], query: dict[str, str], expected: list[str]
) -> None:
    found = listed(admin_client, "run", query, list(runs.values()))
    assert [name for name, run in runs.items() if run in found] == expected


def test_the_run_list_filters_by_one_user_and_by_date(
    admin_client: Client, runs: dict[str, Run], django_user_model: Any
) -> None:
    ada = django_user_model.objects.get(username="ada")
    html = body(admin_client.get(reverse("admin:uistream_app_run_changelist")))
    assert f"?owner={ada.pk}" in html  # a recent owner is offered by name
    assert f"user {ada.pk} (ada)" in html
    assert listed(admin_client, "run", {"owner": str(ada.pk)}, list(runs.values())) == [
        runs["down"],
        runs["down_comment"],
        runs["up"],
    ]
    assert listed(admin_client, "run", {"owner": "nobody"}, list(runs.values())) == []
    # The date filter's own links: "Today", "Past 7 days"... (aware bounds).
    after = {"started_at__gte": str(timezone.now() + dt.timedelta(days=1))}
    assert listed(admin_client, "run", after, list(runs.values())) == []
    since = {"started_at__gte": str(START - dt.timedelta(days=1))}
    assert len(listed(admin_client, "run", since, list(runs.values()))) == len(runs)


def test_the_filters_are_subqueries_not_joins(admin_client: Client, runs: dict[str, Run]) -> None:
    url = reverse("admin:uistream_app_run_changelist")
    with CaptureQueriesContext(connection) as queries:
        admin_client.get(url, {"feedback": "down", "outcome": "failed", "owner": "user"})
    listing = [q["sql"] for q in queries if 'FROM "uistream_app_run"' in q["sql"] and "LIMIT" in q["sql"]]
    assert listing
    assert all("EXISTS" in sql for sql in listing)
    assert not any('JOIN "uistream_app_feedback"' in sql for sql in listing)


# -- the conversation list ---------------------------------------------------------------------


def test_the_conversation_list_finds_the_bad_ones_and_lists_each_once(
    admin_client: Client, runs: dict[str, Run]
) -> None:
    ada, visitor = Conversation.objects.get(pk="by-ada"), Conversation.objects.get(pk="by-a-visitor")
    quiet = Chat("quiet")
    quiet.answer(quiet.ask("hello"))
    rows = [ada, visitor, quiet.conversation]

    def find(**query: str) -> list[Any]:
        return listed(admin_client, "conversation", query, rows)

    assert find(feedback="down") == [ada]
    assert find(feedback="down_comment") == [ada]
    assert find(feedback="up") == [ada]
    assert find(feedback="none") == [visitor, quiet.conversation]
    assert find(outcome="failed") == [visitor]
    assert find(outcome="usage_limit") == [visitor]
    assert find(outcome="tool_error") == [visitor]
    assert find(outcome="stopped") == [visitor]
    assert find(model="gpt-b") == [ada]
    assert find(owner="anonymous") == [visitor, quiet.conversation]
    # Two runs rated down in one conversation: it is listed once.
    html = body(admin_client.get(reverse("admin:uistream_app_conversation_changelist"), {"feedback": "down"}))
    assert html.count(reverse("admin:uistream_app_conversation_change", args=["by-ada"])) == 1
    assert "1 conversation" in html


# -- a run's page --------------------------------------------------------------------------------


def test_the_run_page_shows_the_feedback_escaped(admin_client: Client) -> None:
    chat = Chat("rated")
    run = chat.answer(chat.ask("weather?"))
    rate(run, "down", comment="<script>alert('comment')</script> wrong", reason="<b>inaccurate</b>")

    html = body(admin_client.get(inspector_url(run)))

    assert "rated down" in html
    assert "&lt;script&gt;alert(&#x27;comment&#x27;)&lt;/script&gt; wrong" in html
    assert "&lt;b&gt;inaccurate&lt;/b&gt;" in html
    assert "<script>alert('comment')" not in html
    unrated = chat.answer(chat.ask("and tomorrow?"))
    assert "No feedback on this answer." in body(admin_client.get(inspector_url(unrated)))


def test_the_run_page_links_every_version_of_its_answer(admin_client: Client) -> None:
    chat = Chat("regenerated")
    question = chat.ask("weather?")
    first = chat.answer(question, key="answer-v1", current=False)
    second = chat.answer(question, key="answer-v2", current=False)
    third = chat.answer(question, key="answer-v3")

    html = body(admin_client.get(inspector_url(second)))

    versions = html[html.index('id="attempts"') :]
    assert "The answer's versions (3)" in versions
    assert inspector_url(first) in versions
    assert inspector_url(third) in versions
    assert inspector_url(second) not in versions  # this page's own: marked, not linked
    assert versions.index("answer-v1") < versions.index("answer-v2") < versions.index("answer-v3")
    current = versions[versions.index("answer-v3") :]
    assert "current" in current[: current.index("</li>")]
    # A run with a single version shows no list.
    lone = Chat("lone")
    assert 'id="attempts"' not in body(admin_client.get(inspector_url(lone.answer(lone.ask("hi")))))


def test_the_run_page_links_the_versions_of_an_edited_question(admin_client: Client) -> None:
    chat = Chat("edited")
    original = chat.ask("weather in Pariss?", key="q-v1")
    old = chat.answer(original, key="a-of-v1")
    Message.objects.filter(pk__in=["q-v1", "a-of-v1"]).update(current=False)
    chat.last = None
    edited = chat.ask("weather in Paris?", key="q-v2")
    new = chat.answer(edited, key="a-of-v2")

    html = body(admin_client.get(inspector_url(new)))

    versions = html[html.index('id="attempts"') :]
    assert "weather in Pariss?" in versions
    assert "weather in Paris?" in versions
    assert inspector_url(old) in versions  # the older question's answer


# -- a conversation's page -------------------------------------------------------------------------


def versioned(key: str, turns: int, versions: int) -> Chat:
    chat = Chat(key)
    for n in range(turns):
        question = chat.ask(f"question {n}", key=f"{key}-q{n}")
        for v in range(versions):
            chat.answer(question, f"answer {n} version {v}", key=f"{key}-a{n}v{v}", current=v == versions - 1)
    return chat


def test_the_conversation_page_shows_the_current_branch_with_its_versions(admin_client: Client) -> None:
    versioned("three", 2, 3)
    Message.objects.filter(pk="three-q0").update(parts=[{"type": "text", "text": "question 0 <b>x</b>"}])

    html = body(admin_client.get(reverse("admin:uistream_app_conversation_change", args=["three"])))

    assert "answer 1 version 2" in html
    assert "answer 1 version 0" not in html
    assert "answer 0 version 1" not in html
    assert html.count("3 versions") == 2
    assert "version 3 of 3" in html
    assert "messages_page=" not in html
    # The list counts the current branch too.
    listing = body(admin_client.get(reverse("admin:uistream_app_conversation_changelist")))
    assert '<td class="field-message_count">4</td>' in listing


def test_the_conversation_page_costs_the_same_with_versions(admin_client: Client) -> None:
    versioned("plain", 30, 1)
    versioned("tried", 30, 3)
    plain = count_queries(admin_client, reverse("admin:uistream_app_conversation_change", args=["plain"]))
    tried = count_queries(admin_client, reverse("admin:uistream_app_conversation_change", args=["tried"]))
    assert tried == plain
