"""Verifiers: what a stream of UI message chunks is checked against.

A verifier is fed one chunk at a time (with its ``seq`` and offset when it
comes from a stored log) and gives one ``Check`` at the end; a ``Verdict``
is the list of them. Verifiers keep only what their rule needs (open part
ids, the tool calls seen, the first few problems), so a log of any length
is checked in one pass in bounded memory. No Django here: the same
verifiers check a stored run (``analysis``) and a captured file
(``uistream_validate``).

The verifiers and their rules:

1. ``SchemaVerifier``: every chunk passes the target client's schema. For
   ai@7 that is ``chunks.validate_chunk``; for ai@6 and ai@5 the chunk must
   also be one the renderer's ``downgrade`` leaves unchanged (only types and
   keys that client lists, one of its finish reasons).
2. ``ReaderVerifier``: ``UIMessageReader``, the twin of the SDK's
   ``processUIMessageStream``, accepts every chunk (no text delta for a part
   never started, no output for an unknown tool call…). It also keeps the
   message the chunks build: what the user saw.
3. ``FramingVerifier``: the encoder's guarantees (encoder rules 1-9 in docs/protocols.md): ``start``
   first; content only inside a step; text and reasoning never open at once;
   every part closed before ``finish-step``, ``error`` and ``finish``; a
   tool call's input completed only after its ``tool-input-start``; exactly
   one terminal chunk (``finish``, ``error`` or ``abort``) and nothing after
   it; for a stored log, ``seq`` counting from 0 without gaps and offsets
   that never go back.

``VERIFIERS`` lists the factories ``default_verifiers`` builds from; a
protocol with its own rules (the AG-UI verifier, in time) adds its factory
there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .chunks import TERMINAL_CHUNKS, ChunkFormatError, validate_chunk
from .reader import UIMessageReader, UIMessageStreamError
from .render import downgrade

__all__ = [
    "VERIFIERS",
    "BaseVerifier",
    "Check",
    "FramingVerifier",
    "ReaderVerifier",
    "SchemaVerifier",
    "Verdict",
    "Verifier",
    "default_verifiers",
    "verify_chunks",
]

#: Problems kept per check (the count goes on).
MAX_PROBLEMS: Final = 20
#: Chunks between two compactions of the reader's pending text.
COMPACT_EVERY: Final = 1000

#: Chunks the encoder only sends inside a step (rule 5).
_CONTENT: Final = frozenset(
    (
        "text-start",
        "text-delta",
        "text-end",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-input-error",
        "source-url",
        "source-document",
        "file",
        "reasoning-file",
    )
)
_AI7_REASONS: Final = frozenset(("stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"))
_OLDER_REASONS: Final[dict[int, frozenset[str]]] = {
    6: _AI7_REASONS - {"interrupted"},
    5: (_AI7_REASONS - {"interrupted"}) | {"unknown"},
}


@dataclass
class Check:
    """One verifier's finding. ``skipped`` checks (nothing to compare) are
    neither passed nor failed."""

    name: str
    label: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    total: int = 0
    note: str = ""
    skipped: bool = False

    @property
    def more(self) -> int:
        """Problems found but not kept."""
        return self.total - len(self.problems)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "label": self.label,
            "ok": self.ok,
            "skipped": self.skipped,
            "problems": self.problems,
            "total": self.total,
            "note": self.note,
        }


@dataclass
class Verdict:
    """All the checks of one stream; ``ok`` when none failed."""

    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok or check.skipped for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        """The checks that neither passed nor were skipped."""
        return [check for check in self.checks if not (check.ok or check.skipped)]

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [check.as_dict() for check in self.checks]}

    def lines(self) -> list[str]:
        """The verdict as text, one line a check plus its problems."""
        out = []
        for check in self.checks:
            mark = "skip" if check.skipped else ("ok" if check.ok else "FAIL")
            out.append(f"[{mark}] {check.label}" + (f" ({check.note})" if check.note else ""))
            out.extend(f"    {problem}" for problem in check.problems)
            if check.more:
                out.append(f"    … and {check.more} more")
        out.append("verdict: " + ("ok" if self.ok else f"{len(self.failed)} check(s) failed"))
        return out


class Verifier(Protocol):
    """What a verdict needs of a verifier: one ``feed`` per chunk, one ``close``."""

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None: ...

    def close(self) -> Check: ...


class BaseVerifier:
    """Collects problems; subclasses implement ``feed`` and may extend
    ``close``."""

    name = "base"
    label = "base"

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.total = 0
        self.count = 0

    def problem(self, text: str, seq: int | None = None) -> None:
        """Count a problem; keep its text, placed by ``seq`` or by chunk count,
        while fewer than ``MAX_PROBLEMS`` are kept."""
        self.total += 1
        if len(self.problems) < MAX_PROBLEMS:
            where = f"#{seq}" if seq is not None else f"chunk {self.count}"
            self.problems.append(f"{where}: {text}")

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None:
        raise NotImplementedError

    def close(self) -> Check:
        return Check(self.name, self.label, ok=self.total == 0, problems=self.problems, total=self.total)


class SchemaVerifier(BaseVerifier):
    """Rule 1."""

    name = "schema"

    def __init__(self, sdk_version: int = 7) -> None:
        super().__init__()
        if sdk_version not in (5, 6, 7):
            raise ValueError(f"unsupported AI SDK version {sdk_version!r}")
        self.sdk_version = sdk_version
        self.label = f"every chunk fits the ai@{sdk_version} chunk schema"

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None:
        try:
            self._check(chunk)
        except ChunkFormatError as exc:
            self.problem(str(exc), seq)
        self.count += 1

    def _check(self, chunk: Any) -> None:
        version = self.sdk_version
        if version == 7:
            validate_chunk(chunk)
            return
        reason = chunk.get("finishReason") if isinstance(chunk, dict) and chunk.get("type") == "finish" else None
        if reason is not None and reason not in _OLDER_REASONS[version]:
            raise ChunkFormatError(f"finish: ai@{version} has no finishReason {reason!r}")
        if reason is not None:
            # Checked above; validate_chunk knows only ai@7's enum.
            chunk = {k: v for k, v in chunk.items() if k != "finishReason"}
        validate_chunk(chunk)
        # Ids of dynamic calls only matter for rule 12's additions, which
        # never make a received chunk invalid.
        expected = downgrade(chunk, version, dynamic_tool_calls=())
        if expected is None:
            raise ChunkFormatError(f"ai@{version} has no chunk type {chunk['type']!r}")
        extra = sorted(set(chunk) - set(expected))
        if extra:
            raise ChunkFormatError(f"{chunk['type']}: ai@{version} does not list {', '.join(map(repr, extra))}")


class ReaderVerifier(BaseVerifier):
    """Rule 2. ``message`` is what the chunks built, up to any error;
    given a ``message`` to continue (a run that continues an assistant
    message after an approval), the chunks are read onto it, as the
    client reads them onto the message it holds."""

    name = "reader"
    label = "the SDK's reader (UIMessageReader) accepts every chunk"

    def __init__(self, *, message_id: str = "", message: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.reader = UIMessageReader(message=message, message_id=message_id)

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None:
        if not self.reader.failed:
            try:
                self.reader.feed(chunk)
            except UIMessageStreamError as exc:
                self.problem(f"{exc} (the client stops reading here)", seq)
        self.count += 1
        if self.count % COMPACT_EVERY == 0 and not self.reader.failed:
            # Reading the message joins the text pieces the reader keeps
            # per delta (~50 bytes each): memory follows the message's
            # size, not its chunk count.
            _ = self.reader.message

    @property
    def message(self) -> dict[str, Any]:
        return self.reader.message


class FramingVerifier(BaseVerifier):
    """Rule 3. ``allow_open``: a stream still being written (a running run)
    may lack its terminal chunk."""

    name = "framing"
    label = "the encoder's framing rules hold"

    def __init__(self, *, allow_open: bool = False) -> None:
        super().__init__()
        self.allow_open = allow_open
        self.in_step = False
        self.open_text: set[str] = set()
        self.open_reasoning: set[str] = set()
        self.started_calls: set[str] = set()
        self.terminal: str | None = None
        self.after_terminal = 0
        self.next_seq = 0
        self.last_offset = 0

    def feed(self, chunk: Any, seq: int | None = None, offset_ms: int | None = None) -> None:
        if seq is not None:
            if seq != self.next_seq:
                self.problem(f"seq {seq} where {self.next_seq} was due", seq)
            self.next_seq = seq + 1
        if offset_ms is not None:
            if offset_ms < self.last_offset:
                self.problem(f"offset {offset_ms} ms goes back from {self.last_offset} ms", seq)
            self.last_offset = max(self.last_offset, offset_ms)
        chunk_type = chunk.get("type") if isinstance(chunk, dict) else None
        if isinstance(chunk_type, str):
            self._framing(chunk_type, chunk, seq)
        self.count += 1

    def _open_parts(self) -> str:
        return ", ".join(sorted(self.open_text | self.open_reasoning))

    def _framing(self, t: str, chunk: dict[str, Any], seq: int | None) -> None:
        if self.terminal is not None:
            self.after_terminal += 1
            if self.after_terminal == 1:
                self.problem(f"{t} after {self.terminal}: nothing may follow the end", seq)
            return
        if self.count == 0 and t != "start":
            self.problem(f"the stream opens with {t}, not start", seq)
        if t == "start" and self.count:
            self.problem("a second start", seq)
        if t in _CONTENT and not self.in_step:
            self.problem(f"{t} outside a step", seq)
        part_id = chunk.get("id")
        if t == "start-step":
            if self.in_step:
                self.problem("start-step while a step is open", seq)
            self.in_step = True
        elif t in ("text-start", "reasoning-start"):
            other = self.open_reasoning if t == "text-start" else self.open_text
            if other:
                self.problem(f"{t} {part_id} while {', '.join(sorted(other))} is open", seq)
            (self.open_text if t == "text-start" else self.open_reasoning).add(str(part_id))
        elif t in ("text-end", "reasoning-end"):
            (self.open_text if t == "text-end" else self.open_reasoning).discard(str(part_id))
        elif t == "tool-input-start":
            self.started_calls.add(str(chunk.get("toolCallId")))
        elif t in ("tool-input-available", "tool-input-error"):
            if str(chunk.get("toolCallId")) not in self.started_calls:
                self.problem(f"{t} for {chunk.get('toolCallId')} without its tool-input-start", seq)
        elif t == "finish-step":
            if self._open_parts():
                self.problem(f"finish-step with {self._open_parts()} still open", seq)
            if not self.in_step:
                self.problem("finish-step with no step open", seq)
            self.in_step = False
        if t in TERMINAL_CHUNKS:
            if self._open_parts():
                self.problem(f"{t} with {self._open_parts()} still open", seq)
            if t == "finish" and self.in_step:
                self.problem("finish with a step still open", seq)
            self.terminal = t

    def close(self) -> Check:
        if self.terminal is None and not self.allow_open and self.count:
            self.problem("the stream ends without finish, error or abort")
        if self.count == 0:
            self.problem("no chunks at all")
        check = super().close()
        if self.after_terminal > 1:
            check.note = f"{self.after_terminal} chunks after {self.terminal}"
        return check


#: The verifiers every verdict runs, in order. Each factory takes the
#: target SDK version.
VERIFIERS: list[Callable[[int], BaseVerifier]] = [
    SchemaVerifier,
    lambda sdk_version: ReaderVerifier(),
    lambda sdk_version: FramingVerifier(),
]


def default_verifiers(sdk_version: int = 7) -> list[BaseVerifier]:
    """A fresh verifier from each factory in ``VERIFIERS``."""
    return [factory(sdk_version) for factory in VERIFIERS]


def verify_chunks(chunks: Iterable[Any], sdk_version: int = 7) -> Verdict:
    """Run the default verifiers over ``chunks``."""
    verifiers = default_verifiers(sdk_version)
    for chunk in chunks:
        for verifier in verifiers:
            verifier.feed(chunk)
    return Verdict([verifier.close() for verifier in verifiers])
