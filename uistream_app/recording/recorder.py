"""``RunRecorder``: one run's canonical chunks → pending batches for the
``LogWriter``, numbered and stamped with their offsets, and the stored
assistant message, built by a ``UIMessageReader`` as the browser builds it.

The rules it keeps are in docs/recording.md, "The chunk log"; the code
cites them by number.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, Final

from django.utils import timezone

from ..conf import settings as uistream_settings
from ..models import Message, Run
from ..protocol.agui.renderer import CARRIER_TYPE
from ..protocol.agui.state import fold_chunk
from ..protocol.redact import redact
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from ..protocol.ui.reader import UIMessageReader, UIMessageStreamError
from .log_writer import LeaseLost, LogWriter, _Final, _Job, _outcome

__all__ = ["CURRENT_RECORDER", "FINAL_STATUSES", "FLUSH_AT", "STARTED_CALLS", "RunRecorder"]

logger = logging.getLogger(__name__)

#: Chunk types after which the log is written at once.
FLUSH_AT: Final = frozenset(("finish-step", "finish", "error", "abort"))

#: ``Run.turn``'s key for the calls of tools that are not idempotent the
#: run began to run (``RunRecorder.record_call``).
STARTED_CALLS: Final = "started"

#: The statuses ``finish`` accepts (every one but ``running``).
FINAL_STATUSES: Final = frozenset(s.value for s in Run.Status if s != Run.Status.RUNNING)


def _clip(value: str | None, field: str) -> str:
    """``value`` cut to the column's length: a too-long error code must not
    fail the write that stores the whole run."""
    max_length: int | None = getattr(Run._meta.get_field(field), "max_length", None)
    text = value or ""
    return text[:max_length] if max_length is not None else text


#: The recorder of the run whose task this is (``execute_run`` sets it), for
#: the code a run's source calls; None outside a run.
CURRENT_RECORDER: ContextVar[RunRecorder | None] = ContextVar("uistream_run_recorder", default=None)


class RunRecorder:
    """Records one run's canonical chunks (docs/recording.md, "The chunk
    log").

    ``run`` and ``message`` are saved rows: the run being streamed and the
    assistant message it builds (a message that already has parts is
    continued, as the SDK continues a last assistant message). One recorder
    per run, from its first chunk. ``flush_every_ms`` defaults to
    ``UISTREAM["FLUSH_EVERY_MS"]``; ``clock`` is a monotonic clock in
    seconds, the one offsets are read from (the writer's timer runs on the
    event loop's own monotonic clock). ``inline`` is where the log is
    written: what ``log_writes_inline()`` answered on the thread that
    created the run's rows (invariant 7); left out, ``LOG_WRITER``
    decides, and ``"auto"`` means the writer thread.
    """

    def __init__(
        self,
        run: Run,
        message: Message,
        *,
        flush_every_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        inline: bool | None = None,
        first_seq: int = 0,
    ) -> None:
        self.run = run
        self.message = message
        #: The lease epoch this recorder writes under (invariant 9): the
        #: run's when the recorder is made, by the process that claimed it.
        self.epoch: int = run.lease_epoch
        #: Set when a write found the epoch gone (or the renewer did): the
        #: run is another process's now, and this recorder writes nothing more.
        self.lease_lost: LeaseLost | None = None
        #: Called once when the lease is lost (the runner cancels the run).
        self.on_lease_lost: Callable[[], object] | None = None
        #: True: the log is written on the thread-sensitive executor of the
        #: code that runs the recorder, not on the writer thread.
        self.inline = uistream_settings.LOG_WRITER == "inline" if inline is None else inline
        every_ms = uistream_settings.FLUSH_EVERY_MS if flush_every_ms is None else flush_every_ms
        self.interval = self._every = max(0.0, float(every_ms)) / 1000
        self._clock = clock
        self._t0 = clock()
        # The clock's zero is ``started_at`` plus however long ago the run
        # row was made; read the wall clock once, then only the monotonic one.
        self._base_ms = int(max(0.0, (timezone.now() - run.started_at) / timedelta(milliseconds=1)))
        continued = message.as_ui_message() if message.parts and message.role == Message.Role.ASSISTANT else None
        self._reader = UIMessageReader(message=continued, message_id=message.pk)
        self.reader_error: UIMessageStreamError | None = None
        self._chunks: list[Chunk] = []  # pending, from seq self._stored on
        self._offsets: list[int] = []
        # A continued run's log goes on after the ``first_seq`` chunks that
        # another process stored (its first chunk's time is theirs).
        self._stored = first_seq
        self._last_offset = 0
        self._first_chunk_at: datetime | None = None
        self._first_chunk_stored = first_seq > 0
        self._finished = False
        #: The stream's last chunk (``finish``, ``error``, ``abort``) was
        #: added: ``finish()`` follows, and the writer waits for it
        #: (``LogWriter._write_round``).
        self._ended = False
        self._finishing: asyncio.Future[None] | None = None
        self._writer: LogWriter | None = None
        # Approval ids this run requested → their tool call ids; and the
        # decisions an approval policy made in the run (docs/operations.md,
        # "Approval policies"), added to ``Run.decisions`` when it ends.
        self._requested: dict[str, str] = {
            str(p["approval"]["id"]): str(p.get("toolCallId", ""))
            for p in (message.parts or [])
            if isinstance(p, dict) and isinstance(p.get("approval"), dict) and "id" in p["approval"]
        }
        self._policy_decisions: list[dict[str, Any]] = []
        # The AG-UI shared state the carried state events set (Run.state).
        self._state: Any = None
        self._state_set = False
        # Fields of the run row that go with the log's next write.
        self._run_fields: dict[str, Any] = {}
        # The tool calls this recorder logged (``record_call``).
        self._said_calls: set[Any] = set()

    # -- reading ------------------------------------------------------------------

    @property
    def message_snapshot(self) -> dict[str, Any]:
        """The message the chunks so far build (a new dict on every read)."""
        return self._reader.message

    @property
    def chunk_count(self) -> int:
        """How many chunks were added (stored or pending)."""
        return self._stored + len(self._chunks)

    @property
    def stored_count(self) -> int:
        """How many chunks are in the database."""
        return self._stored

    @property
    def finished(self) -> bool:
        """True once ``finish()`` was called (unless it failed)."""
        return self._finished

    # -- writing ------------------------------------------------------------------

    def add(self, chunks: Sequence[Chunk]) -> None:
        """Log ``chunks`` (the ones just sent, in order). Never waits: the
        writer stores them within ``flush_every_ms``, at once after a step
        or message end (docs/recording.md, invariant 2)."""
        if self.lease_lost is not None:
            raise self.lease_lost  # refused, so never published either
        if self._finished:
            raise RuntimeError(f"run {self.run.pk} is finished; its log takes no more chunks")
        if not chunks:
            return
        offset = self._offset_ms(self._clock())
        if self._first_chunk_at is None:
            self._first_chunk_at = self._at(offset)
        was_idle = not self._chunks
        self._chunks.extend(chunks)
        self._offsets.extend([offset] * len(chunks))
        urgent = False
        for chunk in chunks:
            kind = chunk.get("type")
            if kind in FLUSH_AT:
                urgent = True
                self._ended = kind in TERMINAL_CHUNKS
            elif kind == "tool-input-available":
                self._said_calls.add(chunk.get("toolCallId"))
            elif kind == "tool-approval-request" or kind == "tool-approval-response":
                self._note_approval(chunk)
            elif kind == CARRIER_TYPE:
                changed, self._state = fold_chunk(chunk, self._state)
                self._state_set = self._state_set or changed
            if self.reader_error is None:
                self._read(chunk)
        if urgent or was_idle:
            self._writer_here().schedule(self, urgent=urgent)

    def followed(self) -> None:
        """A subscriber on another process reads this run from the log
        (``RunChannel.when_followed``): write at half the interval from
        now on, so that what it reads lags by less than ``FLUSH_EVERY_MS``
        with the write and its ``NOTIFY`` included."""
        self.interval = self._every / 2

    def store_with_run(self, **fields: Any) -> None:
        """Store ``fields`` of the run row with the log's next write (its
        first chunks, or its end) instead of in a write of their own: a run
        that records what it is about to do (``Run.history``) does not wait
        for the database before its model starts."""
        for name, value in fields.items():
            setattr(self.run, name, value)
        self._run_fields.update(fields)

    async def record_call(self, call_id: str) -> None:
        """Before a call of a tool that is not idempotent runs: store
        everything added so far (the call's chunks among it; nothing to
        write when they are stored already, as the second call of a step's
        finds them) and wait for the write. A call this recorder did not log
        (one answered first thing in a run, after an approval: its chunks
        are an earlier run's) is stored among the run's started calls
        instead (``Run.turn["started"]``). Raises ``LeaseLost`` when the run
        is another process's, and what made the write fail: the tool does
        not run then."""
        if self.lease_lost is not None:
            raise self.lease_lost
        turn = self.run.turn
        if call_id not in self._said_calls and isinstance(turn, dict):
            started = list(turn.get(STARTED_CALLS) or ())
            if call_id not in started:
                self.store_with_run(turn={**turn, STARTED_CALLS: [*started, call_id]})
        await self.flush()

    async def flush(self) -> None:
        """Wait until every chunk added so far is stored; raise what made
        the write fail (the chunks stay pending for the next one)."""
        await _outcome(self._writer_here().flush(self))

    async def finish(
        self,
        status: str,
        *,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
        error_code: str = "",
        error_detail: str = "",
    ) -> None:
        """Store the rest of the log, the message the reader built, and how
        the run ended, in one transaction.

        ``status`` is one of ``Run.Status`` but ``running``;
        ``finish_reason`` defaults to the log's own ``finish`` chunk's;
        ``usage`` (when given) replaces the run's; ``error_detail`` is
        stored redacted (``protocol.redact``). Completes even if the
        caller is cancelled meanwhile (call it from ``finally``). The first
        call wins: a later one waits for it and returns (its arguments are
        ignored). A call that failed raises, and the next call retries.
        """
        if status not in FINAL_STATUSES:
            raise ValueError(f"finish() takes one of {sorted(FINAL_STATUSES)}, not {status!r}")
        if self.lease_lost is not None:
            raise self.lease_lost
        finishing = self._finishing
        if finishing is None or (finishing.done() and (finishing.cancelled() or finishing.exception() is not None)):
            self._finished = True  # add() refuses from here on
            message = self._reader.message
            fields: dict[str, Any] = {
                "status": status,
                "finish_reason": _clip(
                    finish_reason if finish_reason is not None else self._reader.finish_reason, "finish_reason"
                ),
                "usage": usage if usage is not None else self.run.usage,
                "error_code": _clip(error_code, "error_code"),
                # Whoever wrote the detail, no credential is stored with it.
                "error_detail": redact(error_detail),
                "finished_at": self._at(self._offset_ms(self._clock())),
                "first_chunk_at": self._first_chunk_at,
                "trace_id": self.run.trace_id,
                "span_id": self.run.span_id,
            }
            if self._policy_decisions:
                fields["decisions"] = [*(self.run.decisions or []), *self._policy_decisions]
            if self._state_set:
                fields["state"] = self._state
            final = _Final(message["parts"], message.get("metadata"), fields)
            finishing = self._writer_here().finish(self, final)
            self._finishing = finishing
        await _outcome(finishing)

    def lose_lease(self, error: LeaseLost) -> None:
        """The run's lease is another process's (invariant 9): drop what is
        pending, refuse every later ``add`` and ``finish``, say so once (a
        WARNING) and call ``on_lease_lost``. Idempotent."""
        if self.lease_lost is not None:
            return
        self.lease_lost = error
        self._finished = True
        dropped = len(self._chunks)
        self._chunks, self._offsets, self._run_fields = [], [], {}
        logger.warning(
            "run %s: this process lost its lease (epoch %d is gone: another process took the run over, was this "
            "one paused for longer than LEASE_SECONDS?); it stops the run and writes nothing more into it "
            "(%d unstored chunks dropped)",
            self.run.pk,
            self.epoch,
            dropped,
        )
        if self.on_lease_lost is not None:
            self.on_lease_lost()

    # -- internals ----------------------------------------------------------------

    def _writer_here(self) -> LogWriter:
        writer = self._writer
        if writer is None or writer._loop() is not asyncio.get_running_loop():
            writer = self._writer = LogWriter.for_running_loop()
        return writer

    def _offset_ms(self, now: float) -> int:
        # Whole milliseconds of the clock, read so that a float sum a hair
        # under a whole number (0.15 s as 149.99999999 ms) is not one less.
        offset = self._base_ms + int((now - self._t0) * 1000 + 1e-6)
        if offset < self._last_offset:  # an injected clock that goes back
            offset = self._last_offset
        self._last_offset = offset
        return offset

    def _at(self, offset_ms: int) -> datetime:
        return self.run.started_at + timedelta(milliseconds=offset_ms)

    def _note_approval(self, chunk: Chunk) -> None:
        """A ``tool-approval-response`` in a run's own stream is always an
        approval policy's decision (a person's comes in the next request):
        it is recorded as the policy's, beside the person's decisions."""
        approval_id = chunk.get("approvalId")
        if not isinstance(approval_id, str):
            return
        if chunk["type"] == "tool-approval-request":
            self._requested[approval_id] = str(chunk.get("toolCallId", ""))
            return
        decision: dict[str, Any] = {
            "toolCallId": self._requested.get(approval_id, ""),
            "decidedAt": self._at(self._offset_ms(self._clock())).isoformat(),
            "decidedBy": "approval policy",
            "decider": "policy",
            "approvalId": approval_id,
            "approved": chunk.get("approved") is True,
            "reason": chunk.get("reason") if isinstance(chunk.get("reason"), str) else None,
        }
        self._policy_decisions.append(decision)

    def _read(self, chunk: Chunk) -> None:
        try:
            self._reader.feed(chunk)
        except UIMessageStreamError as exc:
            self.reader_error = exc
            logger.warning("run %s: the log holds a chunk the SDK would refuse: %s", self.run.pk, exc)

    @property
    def _has_pending(self) -> bool:
        return bool(self._chunks or self._run_fields)

    def _take(self, final: _Final | None) -> _Job:
        chunks, self._chunks = self._chunks, []
        offsets, self._offsets = self._offsets, []
        first = None if self._first_chunk_stored else self._first_chunk_at
        run_fields, self._run_fields = self._run_fields, {}
        return _Job(self, self._stored, offsets, chunks, first, final, run_fields=run_fields)

    def _written(self, job: _Job) -> None:
        self._stored = job.stored
        self.run.chunk_count = job.stored
        if job.first_chunk_at is not None:
            self.run.first_chunk_at = job.first_chunk_at
            self._first_chunk_stored = True
        if job.final is not None:
            for name, value in job.final.fields.items():
                setattr(self.run, name, value)
            self.run.chunk_count = job.stored
            self.message.parts = job.final.parts
            self.message.metadata = job.final.metadata

    def _give_back(self, job: _Job) -> None:
        self._chunks[:0] = job.chunks
        self._offsets[:0] = job.offsets
        self._run_fields = {**job.run_fields, **self._run_fields}
        if job.final is not None:
            self._finished = False
