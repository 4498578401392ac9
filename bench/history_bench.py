"""What a 300-turn chat sends at turn 300 under each history strategy.

    .venv/bin/python bench/history_bench.py [--turns 300]

Runs in this process against a throwaway file SQLite database
(``bench/bench_settings.py`` in a temporary directory, migrated, removed at
the end). The chat: ``--turns - 1`` stored turns, each a user question of
about 20 words and an answer of about 60; every fifth answer called a tool
whose result is about 1 500 characters of JSON, and one (turn 150) returned
200 000 characters. Turn ``--turns`` is a new question. The system prompt
is 60 words.

For each strategy the store's ``select`` and the run's ``build`` run as a
turn does (``SummarizeOlder`` with a scripted summariser that answers 150
words, its first turn writing the summary); printed: the model messages
sent, their characters, and their estimated tokens (characters / 4 plus 4
per message: ``uistream_app.history.estimate_tokens``), and for the
summary strategy the turn after too (the summary reused).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

BENCH_DIR = Path(tempfile.mkdtemp(prefix="uistream-history-bench-"))
os.environ["UISTREAM_BENCH_DIR"] = str(BENCH_DIR)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench_settings")

PROMPT = " ".join(["You are the travel desk of a small agency; answer briefly and use the tools."] * 4)
WORDS = [
    "the",
    "weather",
    "in",
    "the",
    "north",
    "is",
    "mild",
    "with",
    "light",
    "rain",
    "expected",
    "later",
    "today",
    "and",
    "clear",
    "skies",
    "tomorrow",
]


def sentence(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n))


def stored_chat(turns: int) -> str:
    from uistream_app.models import Conversation, Message

    chat = Conversation.objects.create(pk="bench-300", session_key="bench")
    rows = []
    for turn in range(1, turns):
        rows.append(
            Message(
                id=f"u{turn}",
                conversation=chat,
                role="user",
                position=2 * turn - 2,
                parts=[{"type": "text", "text": f"Question {turn}: " + sentence(20, turn)}],
            )
        )
        parts: list[dict[str, Any]] = [{"type": "step-start"}]
        if turn % 5 == 0:
            report = "x" * 200_000 if turn == 150 else sentence(250, turn)
            parts += [
                {
                    "type": "tool-get_forecast",
                    "toolCallId": f"call-{turn}",
                    "state": "output-available",
                    "input": {"city": f"city {turn}"},
                    "output": {"city": turn, "report": report},
                },
                {"type": "step-start"},
            ]
        parts.append({"type": "text", "text": f"Answer {turn}: " + sentence(60, turn), "state": "done"})
        rows.append(Message(id=f"a{turn}", conversation=chat, role="assistant", position=2 * turn - 1, parts=parts))
    rows.append(
        Message(
            id=f"u{turns}",
            conversation=chat,
            role="user",
            position=2 * turns - 2,
            parts=[{"type": "text", "text": f"Question {turns}: " + sentence(20, turns)}],
        )
    )
    Message.objects.bulk_create(rows)
    return chat.pk


def send(strategy: Any, chat_id: str, model: Any) -> dict[str, Any]:
    from asgiref.sync import async_to_sync

    from uistream_app.models import Conversation

    messages = Conversation.objects.get(pk=chat_id).messages.order_by("position")
    history = [m.as_ui_message() for m in strategy.select(messages)]
    sent, build = async_to_sync(strategy.build)(history, system_prompt=PROMPT, model=model, chat_id=chat_id)
    return {
        "messages": len(sent),
        "chars": sum(len(getattr(m, "content", "")) for m in sent),
        "tokens": build.record["estimated_tokens"],
        "stored_rows_loaded": len(history),
        "summary_written": bool(build.record.get("summary_written")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    args = parser.parse_args()
    import django

    django.setup()
    from django.core.management import call_command

    from uistream_app.history import AllMessages, LastMessages, SummarizeOlder, TokenBudget
    from uistream_app.models import Message
    from uistream_app.testing import ScriptedModel

    try:
        call_command("migrate", verbosity=0)
        chat_id = stored_chat(args.turns)
        summariser = ScriptedModel(name="summariser")
        summariser.enqueue("Summary: " + sentence(150, 1))
        strategies = [
            ("AllMessages()", AllMessages(max_tool_result_tokens=None)),
            ("AllMessages() (tool results cut at 4000 tokens, the default)", AllMessages()),
            ("LastMessages(100) (the default)", LastMessages(100)),
            ("LastMessages(40)", LastMessages(40)),
            ("TokenBudget(8000)", TokenBudget(8000)),
            ("TokenBudget(4000)", TokenBudget(4000)),
            ("SummarizeOlder(20, batch_messages=20)", SummarizeOlder(20, batch_messages=20)),
        ]
        results = []
        for label, strategy in strategies:
            results.append((label, send(strategy, chat_id, summariser)))
        # The next turn: its question stored, the summary reused.
        Message.objects.create(
            id=f"a{args.turns}",
            conversation_id=chat_id,
            role="assistant",
            position=2 * args.turns - 1,
            parts=[{"type": "text", "text": "Answer."}],
        )
        Message.objects.create(
            id=f"u{args.turns + 1}",
            conversation_id=chat_id,
            role="user",
            position=2 * args.turns,
            parts=[{"type": "text", "text": "One more question."}],
        )
        results.append(
            (
                f"SummarizeOlder, turn {args.turns + 1} (summary reused)",
                send(strategies[-1][1], chat_id, summariser),
            )
        )
        print(f"turn {args.turns} of a chat; summariser calls: {len(summariser.requests)}")
        print(f"{'strategy':<62} {'messages':>8} {'chars':>9} {'tokens':>8} {'rows':>5}")
        for label, r in results:
            print(f"{label:<62} {r['messages']:>8} {r['chars']:>9} {r['tokens']:>8} {r['stored_rows_loaded']:>5}")
        print(json.dumps({label: r for label, r in results}))
    finally:
        shutil.rmtree(BENCH_DIR, ignore_errors=True)


if __name__ == "__main__":
    main()
