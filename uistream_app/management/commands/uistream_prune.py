"""``uistream_prune``: delete what ``UISTREAM["RETENTION"]`` no longer keeps.

Run it from cron (daily is plenty): ``CHUNK_LOGS_DAYS`` deletes the chunk
logs of runs that ended longer ago, ``OLD_BRANCHES_DAYS`` the messages off
the current branch that left it longer ago, with their runs and files.
Feedback keeps what it marks, and a ``running`` run is never touched
(``lifecycle.retention`` has the rules; docs/operations.md, "Feedback,
attempts and retention"). ``--dry-run`` prints what it would delete, by
count, and changes nothing. Prints one line per limit set. Whatever the
limits, the owners' days before yesterday (the storage cap's count) go.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from ...conf import settings
from ...lifecycle.retention import BATCH, Pruner


class Command(BaseCommand):
    help = "Delete old chunk logs and old branches of conversations, as UISTREAM['RETENTION'] says."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Print what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", type=int, default=BATCH, help=f"Rows deleted per query (default {BATCH}).")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            retention = settings.RETENTION
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        report = Pruner(retention, dry_run=options["dry_run"], batch=options["batch_size"]).prune()
        if not retention.prunes:
            self.stdout.write(
                "Nothing to prune: UISTREAM['RETENTION'] sets no limit (CHUNK_LOGS_DAYS, OLD_BRANCHES_DAYS)."
            )
        for line in report.lines(retention):
            self.stdout.write(line)
