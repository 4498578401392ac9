"""The admin with every attempt kept: a 500-turn conversation whose every
answer has 3 versions, against the same conversation with one.

    .venv/bin/python bench/branches_admin.py [--reps 21] [--turns 500] [--versions 3]

Runs in this process against a throwaway file SQLite database
(``bench/bench_settings.py`` in a temporary directory, migrated, removed at
the end), with Django's test ``Client`` logged in as a superuser, as
``bench/admin_bench.py`` does.

The data: conversation ``plain`` of ``--turns`` turns (a user message, an
assistant message with a text and a tool part, the run that built it and
its 10-chunk log), and conversation ``tried`` of the same turns where each
answer has ``--versions`` versions (the older ones off the current branch,
each with its own run and log, as regenerating leaves them). Every
tenth answer of ``tried`` is rated down with a comment.

Measured, after a warm-up request each, in ``--reps`` rounds that each
request every page once:

* the change page of ``plain`` (the reference) and of ``tried``: the newest
  page, and the oldest page of messages and of runs;
* a run's page (the inspector) of a version in ``tried``, with its
  feedback and the links to the other versions;
* the run list filtered "rated down", and "a tool error".

Printed: each page's median time, the median of each round's ratio to the
reference's (paired, so it holds while a shared machine's speed drifts),
the page's bytes and its queries.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from admin_pages import measure  # noqa: E402

BENCH_DIR = Path(tempfile.mkdtemp(prefix="uistream-branches-bench-"))
os.environ["UISTREAM_BENCH_DIR"] = str(BENCH_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")

#: The budget the issue sets for the conversation page.
BUDGET_MS = 300
BUDGET_KB = 200


def turn_chunks(message_id: str) -> list[dict[str, Any]]:
    """The log of one answer's run: a text and a tool call (admin_bench.py's turn)."""
    return [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": "The weather in Paris is "},
        {"type": "text-delta", "id": "text-0", "delta": "<b>clear</b>, 18 °C."},
        {"type": "text-end", "id": "text-0"},
        {"type": "tool-input-available", "toolCallId": "call-1", "toolName": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool-output-available", "toolCallId": "call-1", "output": {"temperature": 18, "sky": "clear"}},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def assistant_parts(n: int) -> list[dict[str, Any]]:
    return [
        {"type": "step-start"},
        {"type": "text", "text": f"Turn {n}: the weather in Paris is <b>clear</b>, 18 °C.", "state": "done"},
        {
            "type": "tool-get_weather",
            "toolCallId": "call-1",
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": {"temperature": 18, "sky": "clear"},
        },
    ]


def build_conversation(chat_id: str, turns: int, versions: int, *, owner: Any) -> list[Any]:
    """The conversation; returns the runs of ``tried``-style versions, newest turn last."""
    from uistream_app.models import Conversation, Feedback, Message, Run
    from uistream_app.recording import write_log

    conversation = Conversation.objects.create(id=chat_id, title=chat_id, owner=owner)
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    messages: list[Message] = []
    runs: list[Run] = []
    parent = ""
    at = start
    for n in range(turns):
        at += dt.timedelta(seconds=1)
        question = f"{chat_id}-u{n}"
        messages.append(
            Message(
                id=question,
                conversation=conversation,
                role="user",
                parts=[{"type": "text", "text": f"What is the weather in Paris? (question {n} of {chat_id})"}],
                position=2 * n,
                parent_key=parent,
                created_at=at,
                selected_at=at,
            )
        )
        for v in range(versions):
            at += dt.timedelta(seconds=1)
            key = f"{chat_id}-a{n}v{v}"
            messages.append(
                Message(
                    id=key,
                    conversation=conversation,
                    role="assistant",
                    parts=assistant_parts(n),
                    position=2 * n + 1,
                    parent_key=question,
                    current=v == versions - 1,
                    created_at=at,
                    selected_at=at,
                )
            )
            runs.append(
                Run(
                    conversation=conversation,
                    message_id=key,
                    status="completed",
                    finish_reason="stop",
                    model="demo",
                    trigger="submit-message" if v == 0 else "regenerate-message",
                    started_at=at,
                    finished_at=at + dt.timedelta(milliseconds=150),
                    chunk_count=10,
                )
            )
        parent = f"{chat_id}-a{n}v{versions - 1}"
    Message.objects.bulk_create(messages)
    runs = Run.objects.bulk_create(runs)
    for run in runs:
        chunks = turn_chunks(run.message_id)
        write_log(run, chunks, [10 * i for i in range(len(chunks))])
    Feedback.objects.bulk_create(
        Feedback(message_id=run.message_id, run=run, rating="down", comment="Wrong <b>city</b>.") for run in runs[::10]
    )
    return runs


def build(turns: int, versions: int) -> tuple[Any, list[Any]]:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    user_model = get_user_model()
    superuser = user_model.objects.create_superuser("admin", "admin@example.com", "pw")
    user = user_model.objects.create_user("ada", "ada@example.com")
    with transaction.atomic():
        build_conversation("plain", turns, 1, owner=user)
        tried = build_conversation("tried", turns, versions, owner=user)
    return superuser, tried


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--versions", type=int, default=3)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.urls import reverse

    try:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        superuser, tried = build(args.turns, args.versions)
        print(
            f"built two {args.turns}-turn conversations, one with {args.versions} versions of each answer, "
            f"in {time.perf_counter() - started:.1f} s (SQLite {connection.Database.sqlite_version})"
        )
        client = Client(SERVER_NAME="localhost")
        client.force_login(superuser)

        def get(url: str, query: dict[str, str] | None = None) -> Callable[[], Any]:
            return lambda: client.get(url, query or {})

        def page(chat_id: str) -> str:
            return reverse("admin:uistream_app_conversation_change", args=[chat_id])

        last_messages = -(-2 * args.turns // 50)
        last_runs_plain, last_runs_tried = -(-args.turns // 25), -(-args.turns * args.versions // 25)
        middle = tried[len(tried) // 2 - (len(tried) // 2) % args.versions]  # the first version of a middle turn
        runs = reverse("admin:uistream_app_run_changelist")
        pages = [
            ("reference: change page, 1 version", get(page("plain"))),
            (f"change page, {args.versions} versions", get(page("tried"))),
            (
                "reference, oldest pages",
                get(page("plain"), {"messages_page": str(last_messages), "runs_page": str(last_runs_plain)}),
            ),
            (
                f"{args.versions} versions, oldest pages",
                get(page("tried"), {"messages_page": str(last_messages), "runs_page": str(last_runs_tried)}),
            ),
            ("run page of a version (inspector)", get(reverse("admin:uistream_app_run_change", args=[middle.pk]))),
            ("run list, rated down", get(runs, {"feedback": "down"})),
            ("run list, a tool error", get(runs, {"outcome": "tool_error"})),
        ]
        results = measure(pages, args.reps)
        reference = results[0][1]
        print(f"{args.reps} rounds; ratios are to the reference (paired by round)")
        print(f"{'':40} {'ms':>8} {'x ref':>7} {'KB':>8} {'queries':>8}")
        for label, times, size, queries in results:
            ratio = statistics.median(t / r for t, r in zip(times, reference, strict=True))
            print(f"{label:40} {statistics.median(times):8.1f} {ratio:7.2f} {size / 1024:8.1f} {queries:8d}")
        _label, times, size, _queries = results[1]
        verdict = "within" if statistics.median(times) < BUDGET_MS and size < BUDGET_KB * 1024 else "OVER"
        print(f"the {args.versions}-version page: {verdict} the budget of {BUDGET_MS} ms and {BUDGET_KB} KB")
    finally:
        shutil.rmtree(BENCH_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
