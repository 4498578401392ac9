"""``uistream_export_fixture RUN DIR``: a stored run as a UI message stream
fixture, in the layout of ``fixtures/ui-message-stream/v1/<scenario>/``.

DIR is the scenario's directory (created). It gets ``scenario.json``, the
source (``events.jsonl`` when the log re-encodes from source events, else
``chunks.jsonl``; see ``uistream_app.inspect.fixture``), ``v7.sse``,
``v6.sse``, ``v5.sse`` and ``message.json``. With ``--node`` and
``--build-message tests/js/build_message.mjs`` the messages are the ones
the real ai@7/6/5 clients build. Check the result with the real clients:
``UISTREAM_FIXTURES=<DIR's parent> node --test tests/js/fixtures.test.mjs``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...inspect.fixture import write_fixture
from ...recording import iter_log
from ._runs import find_run


class Command(BaseCommand):
    help = "Turn a stored run into a UI message stream fixture directory."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("run", help="The run's id, or a unique prefix of it (6+ hex digits).")
        parser.add_argument("directory", help="The scenario directory to write (created).")
        parser.add_argument("--description", help="scenario.json's description (default: names the run).")
        parser.add_argument("--force", action="store_true", help="Write into a directory that has files already.")
        parser.add_argument("--node", help="A Node.js binary, to have the real clients build message*.json.")
        parser.add_argument("--build-message", help="The path of tests/js/build_message.mjs (with --node).")

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["directory"])
        if directory.exists() and not directory.is_dir():
            raise CommandError(f"{directory} is not a directory")
        if directory.is_dir() and any(directory.iterdir()) and not options["force"]:
            raise CommandError(f"{directory} is not empty; pass --force to write into it")
        if bool(options["node"]) != bool(options["build_message"]):
            raise CommandError("--node and --build-message go together")
        run = find_run(options["run"])
        chunks = [entry.chunk for entry in iter_log(run)]
        if not chunks:
            raise CommandError(f"run {run.pk} has no chunks")
        description = options["description"] or (
            f"Exported from run {run.pk} ({run.status}, {run.model or 'unknown model'}, {len(chunks)} chunks)."
        )
        try:
            exported = write_fixture(
                chunks,
                directory,
                description=description,
                node=options["node"],
                build_message=options["build_message"],
            )
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {', '.join(exported.files)} to {directory}")
        if exported.source != "events.jsonl":
            self.stderr.write(
                f"the log has no source events ({exported.reason}): wrote its chunks as chunks.jsonl; "
                "the .sse files and messages are exact, but tests/ui_fixtures.py re-encodes only events.jsonl"
            )
