"""One pass over a stored run's log: its verdict, its timeline, and the
message it built.

``analyze_run`` reads the log with ``iter_log`` (``PAGE`` rows a query)
and feeds every chunk to the verifiers and the ``TimelineBuilder``; none of
them keeps the chunks, so the pass holds one page at a time whatever the
run's length. After the pass, ``StoredRunChecks`` compares what the log
says with what the recorder stored:

4. ``chunk_count`` equals the rows in the log, and ``first_chunk_at`` is
   set once there is a chunk;
5. the status agrees with the log's end: ``completed`` ends in ``finish``,
   ``failed`` in ``error``, ``stopped`` in ``abort`` with reason
   ``stopped``, ``cancelled`` in ``abort`` without one, and ``running`` in
   nothing yet;
6. the stored message is the one the log builds (what is stored is what
   the browser built), compared for the last run of its
   message (a later run, continuing it after an approval, changes it).

A run that continues an assistant message (``trigger`` "continue": a
person answered an approval, the browser a client-side tool) is read onto
the message as it stood before it: the earlier runs' logs read in order,
each continuing the last, with each continuation's ``decisions`` applied
first as ``lifecycle.store.apply_answers`` applied them. That is the message
the browser held, so the reader checks the run as the browser read it,
and the page shows the whole message.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from ..models import Run, StoredJSONEncoder
from ..protocol.ui.chunks import TERMINAL_CHUNKS
from ..protocol.ui.reader import UIMessageReader, UIMessageStreamError
from ..protocol.ui.verify import BaseVerifier, Check, FramingVerifier, ReaderVerifier, SchemaVerifier, Verdict
from ..recording import iter_log, last_offset_ms
from .timeline import Timeline, TimelineBuilder

__all__ = ["RunReport", "analyze_run", "apply_decisions", "message_before"]

PAGE: Final = 1000

_ENDS: Final[dict[str, tuple[str | None, str | None]]] = {
    # status: (terminal chunk type, abort reason)
    Run.Status.COMPLETED: ("finish", None),
    Run.Status.FAILED: ("error", None),
    Run.Status.STOPPED: ("abort", "stopped"),
    Run.Status.CANCELLED: ("abort", None),
    Run.Status.RUNNING: (None, None),
}


@dataclass
class RunReport:
    """What ``analyze_run`` found: the verdict, the timeline, the message the log builds and the chunk counts."""

    verdict: Verdict
    timeline: Timeline
    #: The message the log builds (onto the message it continues): what
    #: the user saw.
    message: dict[str, Any]
    types: Counter[str]
    rows: int
    #: Earlier runs of the same message this run continues.
    continues: int = 0


def apply_decisions(message: dict[str, Any], decisions: Any) -> dict[str, Any]:
    """``message`` with a continuation's approval decisions applied to its
    pending tool parts (the parts ``lifecycle.store.apply_answers`` makes, which the
    store saves before the continuation runs, edited arguments included;
    client tool results arrive as chunks)."""
    answers = {
        d.get("toolCallId"): d
        for d in (decisions if isinstance(decisions, list) else [])
        # A policy's decisions were made in the run itself, on its own chunks.
        if isinstance(d, dict) and "approvalId" in d and d.get("decider") != "policy"
    }
    if not answers:
        return message
    parts = []
    for part in message.get("parts", []):
        answer = answers.get(part.get("toolCallId")) if isinstance(part, dict) else None
        if answer is not None and part.get("state") == "approval-requested":
            pending = part.get("approval") if isinstance(part.get("approval"), dict) else {}
            approval = {**pending, "approved": answer.get("approved")}
            if answer.get("reason"):
                approval["reason"] = answer["reason"]
            part = {**part, "state": "approval-responded", "approval": approval}
            if "input" in answer:  # the person edited the arguments
                part["input"] = answer["input"]
        parts.append(part)
    return {**message, "parts": parts}


def message_before(run: Run, batch: int = PAGE) -> tuple[dict[str, Any] | None, int]:
    """The message as it stood when ``run`` started (None: a new one), and
    how many earlier runs built it."""
    if run.message_id is None:
        return None, 0
    earlier = list(
        Run.objects.filter(message_id=run.message_id, started_at__lt=run.started_at)
        .order_by("started_at")
        .only("pk", "decisions")
    )
    message: dict[str, Any] | None = None
    for previous in earlier:
        if message is not None:
            message = apply_decisions(message, previous.decisions)
        reader = UIMessageReader(message=message, message_id=run.message_id)
        for entry in iter_log(previous, batch):
            try:
                reader.feed(entry.chunk)
            except UIMessageStreamError:
                break  # that run's own page says so; what was built stands
        message = reader.message
    if message is not None:
        message = apply_decisions(message, run.decisions)
    return message, len(earlier)


def _as_stored(value: Any) -> Any:
    """``value`` as a JSON column gives it back (NUL → U+FFFD)."""
    return json.loads(StoredJSONEncoder().encode(value))


class StoredRunChecks:
    """Rules 4–6 of the module docstring, given the pass's findings."""

    def __init__(self, run: Run, rows: int, terminal: tuple[str, Any] | None, message: dict[str, Any]) -> None:
        self.run = run
        self.rows = rows
        self.terminal = terminal
        self.message = message

    def bookkeeping(self) -> Check:
        """Check 4: the run's counters and timestamps agree with its log."""
        run = self.run
        problems = []
        if run.chunk_count != self.rows:
            problems.append(f"chunk_count says {run.chunk_count}, the log holds {self.rows}")
        if self.rows and run.first_chunk_at is None and run.status != Run.Status.RUNNING:
            problems.append("the log has chunks but first_chunk_at is not set")
        if run.status != Run.Status.RUNNING and run.finished_at is None:
            problems.append(f"status {run.status} but finished_at is not set")
        return Check("bookkeeping", "the run's counters agree with its log", not problems, problems, len(problems))

    def ending(self) -> Check:
        """Check 5: the run's status agrees with its log's terminal chunk."""
        run = self.run
        expected, reason = _ENDS.get(run.status, (None, None))
        got, got_reason = self.terminal if self.terminal is not None else (None, None)
        label = "the status agrees with how the log ends"
        ok = got == expected and (expected != "abort" or (got_reason or None) == reason)
        problems = []
        if not ok:
            said = f"{got} (reason {got_reason!r})" if got == "abort" else (got or "no end at all")
            problems.append(f"status {run.status} but the log ends with {said}")
        return Check("ending", label, ok, problems, len(problems))

    def stored_message(self, last_run: bool) -> Check:
        """Check 6: the stored message is the one the log builds (compared only for ``last_run``)."""
        label = "the stored message is the one the log builds"
        run = self.run
        if run.message is None:
            return Check("message", label, True, skipped=True, note="the run's message was deleted")
        if run.status == Run.Status.RUNNING:
            return Check("message", label, True, skipped=True, note="stored when the run ends")
        if not last_run:
            return Check("message", label, True, skipped=True, note="a later run continued the message")
        stored = run.message.as_ui_message()
        built = _as_stored(self.message)
        problems = []
        if built.get("id") != stored["id"]:
            problems.append(f"the stream's messageId is {built.get('id')!r}, the stored id {stored['id']!r}")
        if built.get("parts") != stored["parts"]:
            first = next(
                (i for i, (a, b) in enumerate(zip(built.get("parts", []), stored["parts"], strict=False)) if a != b),
                min(len(built.get("parts", [])), len(stored["parts"])),
            )
            problems.append(f"the parts differ from part {first} on")
        if built.get("metadata") != stored.get("metadata"):
            problems.append("the metadata differs")
        return Check("message", label, not problems, problems, len(problems))


class _Ends(BaseVerifier):
    """Remembers the terminal chunk (for rule 5)."""

    def __init__(self) -> None:
        super().__init__()
        self.terminal: tuple[str, Any] | None = None

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None:
        t = chunk.get("type") if isinstance(chunk, dict) else None
        if t in TERMINAL_CHUNKS and self.terminal is None:
            self.terminal = (t, chunk.get("reason"))


def _ms(delta: Any) -> int | None:
    return None if delta is None else max(int(delta.total_seconds() * 1000), 0)


def analyze_run(run: Run, *, batch: int = PAGE) -> RunReport:
    """Read ``run``'s log once and report on it (see the module docstring)."""
    last_offset = last_offset_ms(run)
    span = max(last_offset, _ms(run.duration) or 0)
    timeline = TimelineBuilder(span, first_chunk_ms=_ms(run.time_to_first_chunk))
    before, continues = message_before(run, batch)
    reader = ReaderVerifier(message_id=run.message_id or "", message=before)
    ends = _Ends()
    verifiers: list[BaseVerifier] = [
        SchemaVerifier(7),
        reader,
        FramingVerifier(allow_open=run.status == Run.Status.RUNNING),
        ends,
    ]
    types: Counter[str] = Counter()
    rows = 0
    for seq, offset_ms, chunk in iter_log(run, batch):
        rows += 1
        types[str(chunk.get("type")) if isinstance(chunk, dict) else "?"] += 1
        timeline.feed(seq, offset_ms, chunk)
        for verifier in verifiers:
            verifier.feed(chunk, seq, offset_ms)
    message = reader.message
    stored = StoredRunChecks(run, rows, ends.terminal, message)
    last_run = (
        run.message_id is not None
        and not Run.objects.filter(message_id=run.message_id, started_at__gt=run.started_at).exists()
    )
    checks = [v.close() for v in verifiers[:-1]]
    checks += [stored.bookkeeping(), stored.ending(), stored.stored_message(last_run)]
    return RunReport(Verdict(checks), timeline.build(), message, types, rows, continues)
