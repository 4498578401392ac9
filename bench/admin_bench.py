"""The admin at scale: a long conversation's page and the conversation search.

    .venv/bin/python bench/admin_bench.py [--reps 21] [--turns 500] [--conversations 500]

Runs in this process against a throwaway file SQLite database
(``bench/bench_settings.py`` in a temporary directory, migrated, removed at
the end), with Django's test ``Client`` logged in as a superuser.

The data: one conversation of ``--turns`` turns (a user message; an
assistant message with a text part and a tool part; the run that built it
and a small chunk log of that run), a one-turn conversation of the same
shape, and ``--conversations`` more conversations of one turn each, owned
by 50 users in turn.

Measured, after a warm-up request each, in ``--reps`` rounds that each
request every page once, the reference first:

* the reference: the one-turn conversation's change page;
* the long conversation's change page (time and bytes);
* the same with its oldest pages of messages and runs;
* the conversation changelist searching a title, and an owner's username;
* the changelist with no search.

Printed: the median time, the median of each round's ratio to the
reference's time in that round (paired, so it holds while a shared
machine's speed drifts), and the bytes of the page and their ratio.
"""

from __future__ import annotations

import argparse
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

BENCH_DIR = Path(tempfile.mkdtemp(prefix="uistream-admin-bench-"))
os.environ["UISTREAM_BENCH_DIR"] = str(BENCH_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")

USERS = 50


def turn_chunks(message_id: str, n: int) -> list[dict[str, Any]]:
    """The log of one turn's run: a step with a text and a tool call and its output."""
    call = f"call-{n}"
    return [
        {"type": "start", "messageId": message_id},
        {"type": "start-step"},
        {"type": "text-start", "id": "text-0"},
        {"type": "text-delta", "id": "text-0", "delta": f"Turn {n}: the weather in Paris is "},
        {"type": "text-delta", "id": "text-0", "delta": "<b>clear</b>, 18 °C."},
        {"type": "text-end", "id": "text-0"},
        {"type": "tool-input-available", "toolCallId": call, "toolName": "get_weather", "input": {"city": "Paris"}},
        {"type": "tool-output-available", "toolCallId": call, "output": {"temperature": 18, "sky": "clear"}},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop"},
    ]


def assistant_parts(n: int) -> list[dict[str, Any]]:
    return [
        {"type": "step-start"},
        {"type": "text", "text": f"Turn {n}: the weather in Paris is <b>clear</b>, 18 °C.", "state": "done"},
        {
            "type": "tool-get_weather",
            "toolCallId": f"call-{n}",
            "state": "output-available",
            "input": {"city": "Paris"},
            "output": {"temperature": 18, "sky": "clear"},
        },
    ]


def build_conversation(chat_id: str, turns: int, *, title: str, owner: Any) -> None:
    from uistream_app.models import Conversation, Message, Run
    from uistream_app.recording import write_log

    conversation = Conversation.objects.create(id=chat_id, title=title, owner=owner)
    messages: list[Message] = []
    for n in range(turns):
        messages.append(
            Message(
                id=f"{chat_id}-u{n}",
                conversation=conversation,
                role="user",
                parts=[{"type": "text", "text": f"What is the weather in Paris? (question {n} of {chat_id})"}],
                position=2 * n,
            )
        )
        messages.append(
            Message(
                id=f"{chat_id}-a{n}",
                conversation=conversation,
                role="assistant",
                parts=assistant_parts(n),
                position=2 * n + 1,
            )
        )
    Message.objects.bulk_create(messages)
    runs = Run.objects.bulk_create(
        Run(
            conversation=conversation,
            message_id=f"{chat_id}-a{n}",
            status="completed",
            finish_reason="stop",
            model="demo",
            trigger="submit-message",
        )
        for n in range(turns)
    )
    for n, run in enumerate(runs):
        chunks = turn_chunks(f"{chat_id}-a{n}", n)
        write_log(run, chunks, [10 * i for i in range(len(chunks))])


def build(turns: int, conversations: int) -> Any:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    user_model = get_user_model()
    superuser = user_model.objects.create_superuser("admin", "admin@example.com", "pw")
    users = [user_model.objects.create_user(f"user{i:02d}", f"user{i:02d}@example.com") for i in range(USERS)]
    with transaction.atomic():
        build_conversation("long", turns, title="A long chat", owner=users[0])
        build_conversation("short", 1, title="A short chat", owner=users[0])
        for i in range(conversations):
            build_conversation(f"chat-{i:04d}", 1, title=f"Topic {i:04d} about Paris", owner=users[i % USERS])
    return superuser


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--conversations", type=int, default=500)
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
        superuser = build(args.turns, args.conversations)
        print(
            f"built {args.turns}-turn conversation and {args.conversations} conversations "
            f"in {time.perf_counter() - started:.1f} s (SQLite {connection.Database.sqlite_version})"
        )
        client = Client(SERVER_NAME="localhost")
        client.force_login(superuser)

        def page(chat_id: str, query: str = "") -> Callable[[], Any]:
            url = reverse("admin:uistream_app_conversation_change", args=[chat_id]) + query
            return lambda: client.get(url)

        changelist = reverse("admin:uistream_app_conversation_changelist")
        last_messages, last_runs = -(-2 * args.turns // 50), -(-args.turns // 25)
        pages = [
            ("reference: change page, 1-turn conversation", page("short")),
            (f"change page, {args.turns}-turn conversation", page("long")),
            (
                f"change page, {args.turns}-turn conversation, oldest pages",
                page("long", f"?messages_page={last_messages}&runs_page={last_runs}"),
            ),
            (
                f"changelist search by title, {args.conversations} conversations",
                lambda: client.get(changelist, {"q": "Topic 0420"}),
            ),
            (
                f"changelist search by owner, {args.conversations} conversations",
                lambda: client.get(changelist, {"q": "user07"}),
            ),
            (f"changelist, {args.conversations} conversations, no search", lambda: client.get(changelist)),
        ]
        results = measure(pages, args.reps)
        _label, reference_times, reference_bytes, _queries = results[0]
        print(f"{args.reps} rounds; ratios are to the reference (paired by round for time)")
        print(f"{'':60} {'ms':>8} {'x ref':>7} {'KB':>8} {'x ref':>7}")
        for label, times, size, _queries in results:
            ratio = statistics.median(t / r for t, r in zip(times, reference_times, strict=True))
            print(
                f"{label:60} {statistics.median(times):8.1f} {ratio:7.2f} "
                f"{size / 1024:8.1f} {size / reference_bytes:7.2f}"
            )
    finally:
        shutil.rmtree(BENCH_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
