"""``uistream_validate FILE``: check a captured UI message stream.

FILE is an SSE capture (``curl -N … > stream.sse``, a browser's saved
response, ``uistream_replay``'s output) or JSON lines (one chunk a line, or
the ``{"seq", "offsetMs", "chunk"}`` lines of a log download); ``-`` reads
stdin. The format is told by the extension or the first byte, or given
with ``--format``.

The stream is checked by the verifiers of ``uistream_app.protocol.ui.verify``
(the target client's chunk schema, the reader, the encoder's framing
rules) and, for SSE, its framing: every event's data is JSON, the stream
ends with ``data: [DONE]`` and a blank line, nothing follows it. Prints one
line per check; exits with status 1 when any fails (``--json`` prints the
verdict as JSON instead).
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...protocol.sse import DONE, SSEParser
from ...protocol.ui.verify import BaseVerifier, Check, Verdict, default_verifiers


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from None


def _looks_like_jsonl(path: str, body: bytes) -> bool:
    if path.endswith((".jsonl", ".ndjson")):
        return True
    if path.endswith(".sse"):
        return False
    return body.lstrip()[:1] == b"{"


class _Collector(BaseVerifier):
    """Problems of the file format itself (SSE framing, unparsable lines)."""

    def __init__(self, name: str, label: str) -> None:
        super().__init__()
        self.name = name
        self.label = label


def _sse_entries(body: bytes, framing: _Collector) -> list[tuple[Any, int | None, int | None]]:
    parser = SSEParser()
    events = parser.feed(body)
    clean = parser.close()
    entries: list[tuple[Any, int | None, int | None]] = []
    done_at = None
    for index, event in enumerate(events):
        if event.data == DONE:
            if done_at is None:
                done_at = index
            continue
        if done_at is not None:
            framing.problem(f"event {index} comes after [DONE]")
        try:
            entries.append((json.loads(event.data), None, None))
        except ValueError as exc:
            framing.problem(f"event {index}: data is not JSON ({exc})")
    if done_at is None:
        framing.problem("the stream does not end with data: [DONE]")
    if not clean:
        framing.problem("the stream ends in the middle of an event (the client drops it)")
    return entries


def _jsonl_entries(body: bytes, framing: _Collector) -> list[tuple[Any, int | None, int | None]]:
    entries: list[tuple[Any, int | None, int | None]] = []
    for number, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            framing.problem(f"line {number} is not JSON ({exc})")
            continue
        if isinstance(value, dict) and "chunk" in value and "type" not in value:
            seq, offset = value.get("seq"), value.get("offsetMs")
            entries.append(
                (value["chunk"], seq if isinstance(seq, int) else None, offset if isinstance(offset, int) else None)
            )
        else:
            entries.append((value, None, None))
    return entries


def verify_file(path: str, body: bytes, *, sdk_version: int, file_format: str = "auto") -> Verdict:
    jsonl = file_format == "jsonl" or (file_format == "auto" and _looks_like_jsonl(path, body))
    if jsonl:
        framing = _Collector("jsonl", "every line is a JSON chunk")
        entries = _jsonl_entries(body, framing)
    else:
        framing = _Collector("sse", "SSE framing: JSON events, ending with [DONE]")
        entries = _sse_entries(body, framing)
    verifiers = default_verifiers(sdk_version)
    for chunk, seq, offset in entries:
        for verifier in verifiers:
            verifier.feed(chunk, seq, offset)
    checks: list[Check] = [framing.close(), *(v.close() for v in verifiers)]
    return Verdict(checks)


class Command(BaseCommand):
    help = "Check a captured UI message stream (SSE or JSON lines) with the reader and the verifiers."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", help="The capture (.sse or .jsonl); '-' reads stdin.")
        parser.add_argument(
            "--sdk-version",
            type=int,
            choices=(5, 6, 7),
            default=7,
            help="The AI SDK major the stream was rendered for (its chunk schema is checked). Default: 7.",
        )
        parser.add_argument("--format", choices=("auto", "sse", "jsonl"), default="auto")
        parser.add_argument("--json", action="store_true", help="Print the verdict as JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"]
        verdict = verify_file(path, _read(path), sdk_version=options["sdk_version"], file_format=options["format"])
        if options["json"]:
            self.stdout.write(json.dumps(verdict.as_dict(), indent=2, ensure_ascii=False))
        else:
            for line in verdict.lines():
                self.stdout.write(line)
        if not verdict.ok:
            raise CommandError(f"{path}: {len(verdict.failed)} check(s) failed", returncode=1)
