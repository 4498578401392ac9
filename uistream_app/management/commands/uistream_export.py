"""``uistream_export``: runs as a JSONL dataset, one line per run: the
history the model was sent, the tools it was offered, its answer as a
``UIMessage``, the feedback on it, its status, model, usage and ids
(``inspect.dataset``: the same lines as the admin's export action).

Filters, all optional and combined: ``--rating down`` (``down_comment``,
``up``, ``none``: as the admin's feedback filter), ``--since`` and
``--until`` (an ISO date or date-time, on when the run started: since
inclusive, until exclusive; a date without a zone is in ``TIME_ZONE``),
``--model`` and ``--status`` (each repeatable). ``--output FILE`` writes
the file (default: standard output); the count goes to standard error.
Streamed: the runs are read a chunk at a time, each line written as made.
"""

from __future__ import annotations

import datetime as dt
from argparse import ArgumentParser
from typing import IO, Any, Final

from django.core.management.base import BaseCommand, CommandError
from django.db.models import OuterRef, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from ...inspect.dataset import dataset_lines
from ...inspect.list_filters import FEEDBACK_CHOICES, feedback_q
from ...models import Feedback, Run
from ._runs import write_bytes

#: Bytes gathered before a write to standard output.
FLUSH_BYTES: Final = 64 * 1024


def _moment(value: str, option: str) -> dt.datetime:
    """``value`` (an ISO date or date-time) as an aware date-time."""
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"{option} {value!r} is neither a date (2025-06-30) nor a date-time")
        moment = dt.datetime.combine(day, dt.time())
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = "Export runs as a JSONL dataset (history sent, tools offered, answer, feedback, status, model, usage)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--rating", choices=sorted(FEEDBACK_CHOICES), help="Only runs whose answer was rated so.")
        parser.add_argument("--since", help="Only runs started at or after this ISO date or date-time.")
        parser.add_argument("--until", help="Only runs started before this ISO date or date-time.")
        parser.add_argument("--model", action="append", help="Only runs of this model (Run.model; repeatable).")
        parser.add_argument(
            "--status", action="append", choices=Run.Status.values, help="Only runs that ended so (repeatable)."
        )
        parser.add_argument("--output", "-o", help="The file to write (default: standard output).")

    def runs(self, options: dict[str, Any]) -> QuerySet[Run]:
        """The runs the options select."""
        runs = Run.objects.all()
        if options["rating"]:
            runs = runs.filter(
                feedback_q(options["rating"], Feedback.objects.filter(message_id=OuterRef("message_id")))
            )
        if options["since"]:
            runs = runs.filter(started_at__gte=_moment(options["since"], "--since"))
        if options["until"]:
            runs = runs.filter(started_at__lt=_moment(options["until"], "--until"))
        if options["model"]:
            runs = runs.filter(model__in=options["model"])
        if options["status"]:
            runs = runs.filter(status__in=options["status"])
        return runs

    def handle(self, *args: Any, **options: Any) -> None:
        runs = self.runs(options)
        output = options["output"]
        if output and output != "-":
            try:
                with open(output, "wb") as handle:
                    count = self.write_file(runs, handle)
            except OSError as exc:
                raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from None
            where = output
        else:
            count = self.write_stdout(runs)
            where = "standard output"
        self.stderr.write(f"exported {count} run{'' if count == 1 else 's'} to {where}")

    @staticmethod
    def write_file(runs: QuerySet[Run], handle: IO[bytes]) -> int:
        count = 0
        for line in dataset_lines(runs):
            handle.write(line)
            count += 1
        return count

    def write_stdout(self, runs: QuerySet[Run]) -> int:
        count = 0
        pending = bytearray()
        for line in dataset_lines(runs):
            pending += line
            count += 1
            if len(pending) >= FLUSH_BYTES:
                write_bytes(self.stdout, bytes(pending))
                pending.clear()
        if pending:
            write_bytes(self.stdout, bytes(pending))
        return count
