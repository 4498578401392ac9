"""``uistream_replay RUN [--format ai7|ai6|ai5|jsonl]``: a stored run's wire
on stdout, exactly as a client of that dialect was (or would be) sent it.

RUN is the run's id or a unique prefix of it (as the admin lists it). The
log is read a page at a time and written as it is read, so a run of any
length streams through in bounded memory: ``uistream_replay 3f2a9c > run.sse``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...inspect.formats import get_format, stream_transcript, transcript_formats
from ._runs import find_run, write_bytes


class Command(BaseCommand):
    help = "Write a stored run's wire (ai@7/6/5 SSE, or its log as JSON lines) to stdout."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("run", help="The run's id, or a unique prefix of it (6+ hex digits).")
        parser.add_argument(
            "--format",
            default="ai7",
            help="One of: " + ", ".join(f"{f.name} ({f.label})" for f in transcript_formats()) + ". Default: ai7.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["format"]
        if get_format(name) is None:
            names = ", ".join(f.name for f in transcript_formats())
            raise CommandError(f"unknown format {name!r}; use one of {names}")
        run = find_run(options["run"])
        for data in stream_transcript(run, name):
            write_bytes(self.stdout, data)
