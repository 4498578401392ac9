"""What the owner caps cost a turn, against how many runs the owner
started today, and the turn's statements written out rather than built
by the ORM (issue 29).

    PYTHONPATH=.:bench .venv/bin/python bench/owner_caps_cost.py [--runs 10 100 1000 5000] [--calls 200] [--rounds 6]

``bench_settings`` (a fresh SQLite file, WAL; ``UISTREAM_BENCH_DATABASE_URL``
for PostgreSQL). One anonymous visitor's completed runs, one conversation
each, added up to each ``--runs`` figure; at each, ``--calls`` times:

* **reference**: the statement the caps ran before ``OwnerDay`` (the sum
  of ``Run.stored_bytes`` over the owner's runs started today, with the
  count of their running runs, through the ORM), which reads every run of
  the day;
* **OwnerDay**: ``caps.add_stored_bytes`` as ``check_turn`` calls it (the
  day's row added to and read back, the running runs counted, in one
  statement).

Both in one transaction per figure, rolled back (a turn's transaction
commits its rows whichever way the caps are counted).

Then two statements of every new chat's turn, each through the ORM
against written out, alternately in ``--rounds`` rounds of ``--calls``
calls, CPU time of this process; the medians and their ratio:

* an owner's first turn of a day deletes the owner's days before
  yesterday: ``OwnerDay.objects.filter(…).delete()`` against
  ``caps._forget_days_before`` (one ``DELETE``), for owners with no such
  days (a new visitor's first turn);
* a turn looks its chat id up among the owner's conversations:
  ``Conversation.objects.owned_by(owner).with_client_id(id)``'s first key
  against ``store._owned_chat_key``, for ids the owner has no chat of (a
  new chat).

On PostgreSQL the tables are analysed after each load, as autovacuum
keeps them (freshly loaded, the running runs were counted through every
conversation of the owner); SQLite is left as Django leaves it, never
analysed (after an ``ANALYZE`` its statistics say nothing of how few runs
are ``running``, and the count scans: the reference's as well). Printed: microseconds per call
of each (wall time, this process alone), and OwnerDay ÷ reference.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def per_call(fn: Callable[[], Any], calls: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e6


def main(args: argparse.Namespace) -> None:
    from stream_memory import _setup

    _setup(0)
    from django.db import connection, transaction
    from django.db.models import Count, Q, Sum
    from django.utils import timezone

    from uistream_app.lifecycle.caps import _day_of, add_stored_bytes
    from uistream_app.lifecycle.spend import period_bounds
    from uistream_app.models import Conversation, Run
    from uistream_app.owners import Owner

    owner = Owner.of_session("bench-" + uuid.uuid4().hex)

    def reference() -> Any:
        start, end = period_bounds("day", timezone.now())
        today, running = Q(started_at__gte=start, started_at__lt=end), Q(status=Run.Status.RUNNING)
        return (
            Run.objects.owned_by(owner)
            .filter(running | today)
            .aggregate(running=Count("pk", filter=running), stored=Sum("stored_bytes", filter=today))
        )

    def owner_day() -> Any:
        return add_stored_bytes(owner, _day_of(timezone.now())[0], 100, count_running=True)

    print(f"{args.calls} calls each, {connection.vendor}; µs per call")
    have = 0
    for runs in args.runs:
        chats = [
            Conversation(pk=uuid.uuid4().hex, client_id=uuid.uuid4().hex, session_key=owner.session_key)
            for _ in range(runs - have)
        ]
        Conversation.objects.bulk_create(chats, batch_size=500)
        Run.objects.bulk_create(
            [Run(conversation=chat, status="completed", stored_bytes=100) for chat in chats], batch_size=500
        )
        have = runs
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # the planner's statistics, as autovacuum keeps them
        # Both in one transaction, rolled back: the turn's commits its rows anyway.
        with transaction.atomic():
            old, new = per_call(reference, args.calls), per_call(owner_day, args.calls)
            transaction.set_rollback(True)
        ratio = new / old
        print(f"{runs:6,d} runs today: reference {old:8,.0f}  OwnerDay {new:6,.0f}  OwnerDay ÷ reference {ratio:.3f}x")
    written_out(args.calls, args.rounds, owner)


def written_out(calls: int, rounds: int, owner: Any) -> None:
    """Two statements of a new chat's turn, through the ORM and written
    out, alternately: CPU µs per call."""
    import datetime as dt

    from uistream_app.lifecycle.caps import _forget_days_before
    from uistream_app.lifecycle.store import _owned_chat_key
    from uistream_app.models import Conversation, OwnerDay

    before = dt.date.today() - dt.timedelta(days=1)
    pairs: list[tuple[str, Callable[[str], Any], Callable[[str], Any]]] = [
        (
            "an owner's first turn of a day, the days before yesterday deleted",
            lambda key: OwnerDay.objects.filter(owner_key=key, day__lt=before).delete(),
            lambda key: _forget_days_before(key, before),
        ),
        (
            "a new chat's id looked up among the owner's conversations",
            lambda key: Conversation.objects.owned_by(owner).with_client_id(key).values_list("pk", flat=True).first(),
            lambda key: _owned_chat_key(key, owner),
        ),
    ]
    for label, orm, written in pairs:
        orm_us, written_us = alternately(orm, written, calls, rounds)
        print(
            f"{label} (CPU µs, medians of {rounds} rounds): ORM {orm_us:,.0f}  written out {written_us:,.0f}  "
            f"written ÷ ORM {written_us / orm_us:.2f}x"
        )


def alternately(
    orm: Callable[[str], Any], written: Callable[[str], Any], calls: int, rounds: int
) -> tuple[float, float]:
    """The median CPU µs per call of each, over ``rounds`` rounds of
    ``calls`` fresh keys, in alternating order, each round in a
    transaction rolled back."""
    import statistics

    from django.db import transaction

    times: tuple[list[float], list[float]] = ([], [])
    for r in range(rounds):
        order = [(0, orm), (1, written)]
        for which, fn in order if r % 2 else reversed(order):
            keys = [uuid.uuid4().hex for _ in range(calls)]
            with transaction.atomic():
                start = time.process_time()
                for key in keys:
                    fn(key)
                times[which].append((time.process_time() - start) / calls * 1e6)
                transaction.set_rollback(True)
    return statistics.median(times[0]), statistics.median(times[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10, 100, 1000, 5000])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6, help="rounds of the statements, through the ORM and not")
    main(parser.parse_args())
