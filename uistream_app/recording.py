"""``RunRecorder``: one run's canonical chunks → the chunk log (batched) and
the stored assistant message.

The chunks handed to ``add`` are the ones the client was sent. The recorder
numbers them (``seq`` from 0), stamps each with its offset from the run's
``started_at``, and feeds them to a ``UIMessageReader``, the Python twin of
the SDK's ``processUIMessageStream``; ``finish`` stores the message that
reader built, so the stored message is the one the browser built.

Invariants:

1. Nothing that was handed to ``add`` is lost. Writes run to completion even
   when the task awaiting them is cancelled (the thread doing the write can't
   be interrupted, so the recorder waits for its outcome before letting the
   cancellation through); a write that fails puts its rows back in front of
   the pending ones, and the next flush or ``finish`` writes them. ``finish``
   is meant for a ``finally`` block: it completes even if its caller is
   cancelled again meanwhile.
2. Batches, not one write per delta. ``add`` flushes when a batch holds a
   step or message end (``finish-step``, ``finish``, ``error``, ``abort``:
   the points a reader of the log cares about) or when ``flush_every_ms``
   has passed since the last flush. A fast producer therefore writes about
   once per step; a slow one about once per interval; a stalled one not at
   all until the run task calls ``flush()`` at ``pending_flush_deadline()``.
   A flush is one thread hop: one ``bulk_create`` and one ``UPDATE`` of the
   run's ``chunk_count``, in one transaction (a backend that caps the
   parameters of a statement, such as SQLite before Django 6.0, may split
   the insert). ``finish`` is one more hop and one more transaction.
3. Offsets are monotonic: every time the recorder stores is read from one
   monotonic ``clock``, anchored once at the run's ``started_at``
   (``first_chunk_at`` and ``finished_at`` too, so they agree with the
   offsets). All chunks of one ``add`` call share an offset.
4. A chunk the reader refuses (an ordering error, which the SDK would throw
   on too) is still logged; the message stays as built up to that chunk,
   which is what the browser shows, and ``reader_error`` keeps the error.

``load_log`` and ``iter_log`` read a stored log back, in ``seq`` order;
``iter_log`` pages through it by key, so a 20,000-chunk log is never in
memory at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, NamedTuple, TypeVar

import orjson
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.utils import timezone

from .conf import settings as uistream_settings
from .models import Conversation, Message, Run, RunChunk, StoredJSONEncoder
from .protocol.ui.chunks import Chunk
from .protocol.ui.reader import UIMessageReader, UIMessageStreamError

__all__ = ["LogEntry", "RunRecorder", "iter_log", "load_log"]

logger = logging.getLogger("uistream_app.recording")

T = TypeVar("T")

#: Chunk types after which the log is flushed at once.
FLUSH_AT: Final = frozenset(("finish-step", "finish", "error", "abort"))

#: The statuses ``finish`` accepts (every one but ``running``).
FINAL_STATUSES: Final = frozenset(s.value for s in Run.Status if s != Run.Status.RUNNING)


class LogEntry(NamedTuple):
    """One stored chunk: its number, its offset from the run's start, and
    the chunk itself."""

    seq: int
    offset_ms: int
    chunk: Chunk


async def _complete(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile,
    then let the cancellation through. A database write running in a thread
    can't be stopped; abandoning it would leave its outcome unknown (and a
    retry could write the same rows twice)."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled():  # the work itself was cancelled (loop shutdown)
                raise
            cancelled = True
        except BaseException:  # noqa: BLE001 - the task's own failure, read below
            break
    if cancelled:
        if not task.cancelled() and task.exception() is not None:
            logger.error("a write finished with an error after its caller was cancelled", exc_info=task.exception())
        raise asyncio.CancelledError
    return task.result()


def _clip(value: str | None, field: str) -> str:
    """``value`` cut to the column's length: a too-long error code must not
    fail the write that stores the whole run."""
    max_length: int | None = getattr(Run._meta.get_field(field), "max_length", None)
    text = value or ""
    return text[:max_length] if max_length is not None else text


class RunRecorder:
    """Records one run's canonical chunks; see the module docstring.

    ``run`` and ``message`` are saved rows: the run being streamed and the
    assistant message it builds (a message that already has parts is
    continued, as the SDK continues a last assistant message). One recorder
    per run, from its first chunk. ``flush_every_ms`` defaults to
    ``UISTREAM["FLUSH_EVERY_MS"]``; ``clock`` is a monotonic clock in
    seconds (``loop.time()`` uses the same one by default, so
    ``pending_flush_deadline()`` can go straight to ``loop.call_at``).
    """

    def __init__(
        self,
        run: Run,
        message: Message,
        *,
        flush_every_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = run
        self.message = message
        every_ms = uistream_settings.FLUSH_EVERY_MS if flush_every_ms is None else flush_every_ms
        self._interval = max(0.0, float(every_ms)) / 1000
        self._clock = clock
        self._t0 = clock()
        # The clock's zero is ``started_at`` plus however long ago the run
        # row was made; read the wall clock once, then only the monotonic one.
        self._base_ms = max(0.0, (timezone.now() - run.started_at) / timedelta(milliseconds=1))
        continued = message.as_ui_message() if message.parts and message.role == Message.Role.ASSISTANT else None
        self._reader = UIMessageReader(message=continued, message_id=message.pk)
        self.reader_error: UIMessageStreamError | None = None
        self._pending: list[tuple[int, int, Chunk]] = []
        self._next_seq = 0
        self._stored = 0
        self._last_offset = 0
        self._last_flush = self._t0
        self._first_chunk_at: datetime | None = None
        self._first_chunk_stored = False
        self._write_failed = False
        self._lock = asyncio.Lock()
        self._finished = False
        self._finishing: asyncio.Future[None] | None = None

    # -- reading ------------------------------------------------------------------

    @property
    def message_snapshot(self) -> dict[str, Any]:
        """The message the chunks so far build (a new dict on every read)."""
        return self._reader.message

    @property
    def chunk_count(self) -> int:
        """How many chunks were added (stored or pending)."""
        return self._next_seq

    @property
    def finished(self) -> bool:
        """True once ``finish()`` was called (unless it failed)."""
        return self._finished

    def pending_flush_deadline(self) -> float | None:
        """When, on ``clock``, the pending chunks are due to be flushed;
        ``None`` when nothing is pending. ``add`` flushes only when called,
        so a run task whose source stalls should call ``flush()`` then."""
        if not self._pending:
            return None
        return self._last_flush + self._interval

    # -- writing ------------------------------------------------------------------

    async def add(self, chunks: Sequence[Chunk]) -> None:
        """Log ``chunks`` (the ones just sent, in order) and flush when due.

        A failed flush here is logged, not raised: its rows stay pending and
        the next flush or ``finish`` writes them, so a database hiccup does
        not end a run the client is still reading.
        """
        if self._finished:
            raise RuntimeError(f"run {self.run.pk} is finished; its log takes no more chunks")
        if not chunks:
            return
        now = self._clock()
        offset = self._offset_ms(now)
        if self._first_chunk_at is None:
            self._first_chunk_at = self._at(offset)
        seq = self._next_seq
        append = self._pending.append
        due = False
        for chunk in chunks:
            append((seq, offset, chunk))
            seq += 1
            if chunk.get("type") in FLUSH_AT:
                due = True
            if self.reader_error is None:
                self._read(chunk)
        self._next_seq = seq
        if due or now - self._last_flush >= self._interval:
            try:
                await self.flush()
            except Exception:
                logger.exception("could not store chunks of run %s; they stay pending", self.run.pk)

    async def flush(self) -> None:
        """Write the pending chunks: one ``bulk_create`` and one update of the
        run's ``chunk_count``, in one transaction; nothing when nothing is
        pending. Raises what the write raised (the rows stay pending)."""
        await _complete(self._flush_under_lock())

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
        ``usage`` (when given) replaces the run's. Completes even if the
        caller is cancelled meanwhile (call it from ``finally``). The first
        call wins: a later one waits for it and returns (its arguments are
        ignored). A call that failed raises, and the next call retries.
        """
        if status not in FINAL_STATUSES:
            raise ValueError(f"finish() takes one of {sorted(FINAL_STATUSES)}, not {status!r}")
        finishing = self._finishing
        if finishing is None or (finishing.done() and (finishing.cancelled() or finishing.exception() is not None)):
            self._finished = True  # add() refuses from here on
            finishing = asyncio.ensure_future(
                self._finish_under_lock(status, finish_reason, usage, error_code, error_detail)
            )
            self._finishing = finishing
        await _complete(finishing)

    # -- internals ----------------------------------------------------------------

    def _offset_ms(self, now: float) -> int:
        offset = int(self._base_ms + (now - self._t0) * 1000)
        if offset < self._last_offset:  # an injected clock that goes back
            offset = self._last_offset
        self._last_offset = offset
        return offset

    def _at(self, offset_ms: int) -> datetime:
        return self.run.started_at + timedelta(milliseconds=offset_ms)

    def _read(self, chunk: Chunk) -> None:
        try:
            self._reader.feed(chunk)
        except UIMessageStreamError as exc:
            self.reader_error = exc
            logger.warning("run %s: the log holds a chunk the SDK would refuse: %s", self.run.pk, exc)

    def _take_pending(self) -> list[tuple[int, int, Chunk]]:
        rows, self._pending = self._pending, []
        return rows

    def _give_back(self, rows: list[tuple[int, int, Chunk]]) -> None:
        self._pending[:0] = rows
        self._write_failed = True

    async def _flush_under_lock(self) -> None:
        async with self._lock:
            if not self._pending:
                return
            rows = self._take_pending()
            stored = self._stored + len(rows)
            first = None if self._first_chunk_stored else self._first_chunk_at
            try:
                await sync_to_async(self._write_chunks)(rows, stored, first)
            except BaseException:
                self._give_back(rows)
                self._last_flush = self._clock()  # retry after an interval, not on every add
                raise
            self._stored = stored
            self.run.chunk_count = stored
            if first is not None:
                self.run.first_chunk_at = first
                self._first_chunk_stored = True
            self._last_flush = self._clock()

    async def _finish_under_lock(
        self,
        status: str,
        finish_reason: str | None,
        usage: dict[str, Any] | None,
        error_code: str,
        error_detail: str,
    ) -> None:
        async with self._lock:
            rows = self._take_pending()
            message = self._reader.message
            metadata = message.get("metadata")
            fields: dict[str, Any] = {
                "status": status,
                "finish_reason": _clip(
                    finish_reason if finish_reason is not None else self._reader.finish_reason, "finish_reason"
                ),
                "usage": usage if usage is not None else self.run.usage,
                "error_code": _clip(error_code, "error_code"),
                "error_detail": error_detail,
                "finished_at": self._at(self._offset_ms(self._clock())),
                "first_chunk_at": self._first_chunk_at,
                "chunk_count": self._stored + len(rows),
            }
            try:
                await sync_to_async(self._write_final)(rows, message["parts"], metadata, fields)
            except BaseException:
                self._give_back(rows)
                self._finished = False
                raise
            self._stored = fields["chunk_count"]
            self._first_chunk_stored = self._first_chunk_at is not None
            for name, value in fields.items():
                setattr(self.run, name, value)
            self.message.parts = message["parts"]
            self.message.metadata = metadata

    # Sync, in a worker thread.

    def _recover_connection(self) -> None:
        # After a failed write the connection may be broken for good; Django
        # only replaces such connections between requests, and a run can
        # outlive its request.
        if not self._write_failed:
            return
        self._write_failed = False
        connection = transaction.get_connection()
        if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
            connection.close()

    def _chunk_rows(self, rows: list[tuple[int, int, Chunk]]) -> list[RunChunk]:
        run_id = self.run.pk
        return [RunChunk(run_id=run_id, seq=seq, offset_ms=offset, chunk=chunk) for seq, offset, chunk in rows]

    def _insert_chunks(self, rows: list[tuple[int, int, Chunk]]) -> None:
        """Append ``rows`` to the log: one ``executemany`` of JSON that
        orjson wrote, on SQLite and PostgreSQL. The ORM's ``bulk_create``
        builds a model instance per row and costs about four times as much,
        which on the streaming path was most of a run's CPU (bench/http_bench.py).
        Other backends, and a chunk holding NUL (stored as U+FFFD, see
        ``StoredJSONEncoder``), take the ORM path."""
        vendor = connection.vendor
        if vendor not in _RAW_JSON_CAST:
            RunChunk.objects.bulk_create(self._chunk_rows(rows))
            return
        dumps = orjson.dumps
        run_id = _RUN_PK.get_db_prep_value(self.run.pk, connection)
        params = []
        for seq, offset, chunk in rows:
            data = dumps(chunk)
            if b"\\u0000" in data:
                data = StoredJSONEncoder().encode(chunk).encode()
            params.append((run_id, seq, offset, data.decode()))
        table = connection.ops.quote_name(RunChunk._meta.db_table)
        sql = f"INSERT INTO {table} (run_id, seq, offset_ms, chunk) VALUES (%s, %s, %s, {_RAW_JSON_CAST[vendor]})"
        with connection.cursor() as cursor:
            cursor.executemany(sql, params)

    def _write_chunks(self, rows: list[tuple[int, int, Chunk]], stored: int, first: datetime | None) -> None:
        self._recover_connection()
        update: dict[str, Any] = {"chunk_count": stored}
        if first is not None:
            update["first_chunk_at"] = first
        with transaction.atomic():
            self._insert_chunks(rows)
            Run.objects.filter(pk=self.run.pk).update(**update)

    def _write_final(
        self, rows: list[tuple[int, int, Chunk]], parts: list[Any], metadata: Any, fields: dict[str, Any]
    ) -> None:
        self._recover_connection()
        with transaction.atomic():
            if rows:
                self._insert_chunks(rows)
            Message.objects.filter(pk=self.message.pk).update(parts=parts, metadata=metadata)
            Run.objects.filter(pk=self.run.pk).update(**fields)
            # The conversation list sorts by activity; a reply landing is some.
            Conversation.objects.filter(pk=self.run.conversation_id).update(updated_at=fields["finished_at"])


_RUN_PK: Final = RunChunk._meta.get_field("run").target_field
#: The placeholder of the JSON column, by backend, for the raw insert.
_RAW_JSON_CAST: Final = {"sqlite": "%s", "postgresql": "%s::jsonb"}


# -- reading a stored log ------------------------------------------------------------


def _run_id(run: Run | uuid.UUID | str) -> Any:
    return run.pk if isinstance(run, Run) else run


def iter_log(run: Run | uuid.UUID | str, batch: int = 1000, *, start: int = 0) -> Iterator[LogEntry]:
    """The stored chunks of ``run`` from ``seq`` ``start`` on, in order, read
    ``batch`` rows at a time by key (no server-side cursor, no offset scan).
    Synchronous; for a sync view or the admin."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    return _iter_log(_run_id(run), batch, start)


def _iter_log(run_id: Any, batch: int, start: int) -> Iterator[LogEntry]:
    next_seq = start
    while True:
        page = list(
            RunChunk.objects.filter(run_id=run_id, seq__gte=next_seq)
            .order_by("seq")
            .values_list("seq", "offset_ms", "chunk")[:batch]
        )
        for seq, offset_ms, chunk in page:
            yield LogEntry(seq, offset_ms, chunk)
        if len(page) < batch:
            return
        next_seq = page[-1][0] + 1


def _load_log(run_id: Any, start: int) -> list[Chunk]:
    return list(RunChunk.objects.filter(run_id=run_id, seq__gte=start).order_by("seq").values_list("chunk", flat=True))


async def load_log(run: Run | uuid.UUID | str, *, start: int = 0) -> list[Chunk]:
    """The stored chunks of ``run`` from ``seq`` ``start`` on, in order (one
    query, one thread hop). What is stored is what ``finish`` or the last
    flush wrote; chunks still pending in a live recorder are not there."""
    return await sync_to_async(_load_log)(_run_id(run), start)
