"""A run's other attempts, as its admin page links them: the versions of
the answer it built (each regenerate made one) and, when the question it
answers was edited, the versions of that question with the answer each
got. Each links the page of the run that built it (its last, when a
continuation added to it) and says which one is on the current branch.

A handful of queries, whatever the conversation's length: the versions of
the message, their runs, the question and its versions, the answers to
those and their runs (``Message.versions``: the (conversation, position)
index).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from django.urls import reverse

from ..models import Message, Run

__all__ = ["Attempt", "Attempts", "attempts_of"]

#: Characters of a question's text shown to tell its versions apart.
PREVIEW_CHARS: Final = 80


@dataclass(frozen=True)
class Attempt:
    """One version of a message: which (1-based, oldest first), whether it
    is on the current branch or is the message of the page, the run that
    built it (for a question: the run that built its answer), and for a
    question the start of its text."""

    key: str
    number: int
    current: bool
    this: bool
    run_url: str | None
    run_status: str
    preview: str = ""


@dataclass(frozen=True)
class Attempts:
    """The versions of a run's answer and of its question (each empty when
    the message has only the one)."""

    answers: tuple[Attempt, ...]
    questions: tuple[Attempt, ...]


def _preview(message: Message) -> str:
    texts = [p.get("text", "") for p in message.parts if isinstance(p, dict) and p.get("type") == "text"]
    text = " ".join(t for t in texts if isinstance(t, str)).strip()
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


def _last_runs(message_keys: Iterable[str], site_name: str) -> dict[str, tuple[str, str]]:
    """For each message, the URL and status of the last run that built it."""
    found: dict[str, tuple[str, str]] = {}
    rows = Run.objects.filter(message_id__in=list(message_keys)).order_by("started_at", "pk")
    for pk, message_id, status in rows.values_list("pk", "message_id", "status"):
        found[message_id] = (reverse(f"{site_name}:uistream_app_run_change", args=[pk]), status)
    return found


def _attempt(message: Message, number: int, this: bool, run: tuple[str, str] | None, *, preview: str = "") -> Attempt:
    url, status = run if run is not None else (None, "")
    return Attempt(message.pk, number, message.current, this, url, status, preview)


def attempts_of(message: Message | None, site_name: str = "admin") -> Attempts:
    """The attempts around ``message`` (a run's answer; None: none)."""
    if message is None:
        return Attempts((), ())
    versions = list(message.versions().only("pk", "current"))
    answers: tuple[Attempt, ...] = ()
    if len(versions) > 1:
        runs = _last_runs((v.pk for v in versions), site_name)
        answers = tuple(_attempt(v, n, v.pk == message.pk, runs.get(v.pk)) for n, v in enumerate(versions, 1))
    question = (
        Message.objects.filter(conversation_id=message.conversation_id, pk=message.parent_key).first()
        if message.parent_key
        else None
    )
    questions: tuple[Attempt, ...] = ()
    if question is not None:
        asked = list(question.versions().only("pk", "current", "parts"))
        if len(asked) > 1:
            # Each version's answer: the one on the current branch, else the one last on it.
            replies = (
                Message.objects.filter(
                    conversation_id=message.conversation_id,
                    position=question.position + 1,
                    parent_key__in=[q.pk for q in asked],
                )
                .order_by("current", "selected_at", "created_at")
                .values_list("parent_key", "pk")
            )
            answer_of = dict(replies)  # the last of each parent's wins: current, else most recent
            runs = _last_runs(answer_of.values(), site_name)
            questions = tuple(
                _attempt(q, n, q.pk == question.pk, runs.get(answer_of.get(q.pk, "")), preview=_preview(q))
                for n, q in enumerate(asked, 1)
            )
    return Attempts(answers, questions)
