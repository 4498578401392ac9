"""``RunRecorder``: one run's canonical chunks → the chunk log (batched) and
the stored assistant message; ``LogWriter``: the one writer that stores
every recorder's batches.

The chunks handed to ``add`` are the ones the client was sent. The recorder
numbers them (``seq`` from 0), stamps each with its offset from the run's
``started_at``, and feeds them to a ``UIMessageReader``, the Python twin of
the SDK's ``processUIMessageStream``; ``finish`` stores the message that
reader built, so the stored message is the one the browser built.

Invariants:

1. ``add`` never waits: it appends to the recorder's pending chunks and
   tells the event loop's ``LogWriter``. The run task publishes the chunks
   right after, so a slow or locked database never delays what the client
   is sent.
2. Batches, not one write per delta. A recorder's pending chunks are
   written as one ``ChunkBatch`` row (split at ``MAX_ROW_CHUNKS``) at the
   latest ``FLUSH_EVERY_MS`` after the first of them was added, at once
   when they hold a step or message end (``finish-step``, ``finish``,
   ``error``, ``abort``: the points a reader of the log cares about), on
   ``flush()`` and on ``finish()``.
3. Group commit. The writer stores everything every recorder of its event
   loop has pending in one transaction, in one worker thread: the rows in
   one ``executemany``, the runs' ``chunk_count`` in another, the finished
   runs' messages and runs. Two hundred live runs cost a few transactions
   a second, not a few hundred, and never contend with each other for
   SQLite's write lock. A transaction that fails is retried run by run, so
   one run's failure (a deleted run row, say) is that run's alone.
4. Nothing that was handed to ``add`` is lost. Writes run to completion
   whatever happens to the tasks waiting for them; a failed write puts the
   run's rows back in front of its pending ones, and the next write takes
   them again. ``flush`` raises that failure; ``finish`` (meant for a
   ``finally`` block) completes even if its caller is cancelled again
   meanwhile, raises a failed write, and may be called again to retry.
5. Offsets are monotonic: every time the recorder stores is read from one
   monotonic ``clock``, anchored once at the run's ``started_at``
   (``first_chunk_at`` and ``finished_at`` too, so they agree with the
   offsets). All chunks of one ``add`` call share an offset.
6. A chunk the reader refuses (an ordering error, which the SDK would throw
   on too) is still logged; the message stays as built up to that chunk,
   which is what the browser shows, and ``reader_error`` keeps the error.

The writer thread is a database client like a request's: it closes its
connection after each write unless ``CONN_MAX_AGE`` keeps it.
``UISTREAM["LOG_WRITER"]`` chooses it (``"thread"``) or the thread-sensitive
executor of the code that started the run (``"inline"``, where the ORM's
own async calls go: inside a ``TestCase`` that is the test's transaction,
which another connection can't see); ``"auto"``, the default, is inline
under Django's test environment and the thread everywhere else.

``iter_log``, ``read_log`` and ``load_log`` read a stored log back, one
``LogEntry`` per chunk in ``seq`` order; ``iter_log`` pages through it by
key, so a 20,000-chunk log is never in memory at once. ``write_log`` stores
a whole log at once (imports, fixtures, tests).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Final, NamedTuple

import orjson
from asgiref.sync import sync_to_async
from django.core import mail
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from .conf import settings as uistream_settings
from .models import ChunkBatch, Conversation, Message, Run, StoredJSONEncoder
from .protocol.ui.chunks import Chunk
from .protocol.ui.reader import UIMessageReader, UIMessageStreamError

__all__ = ["LogEntry", "LogWriter", "RunRecorder", "iter_log", "last_offset_ms", "load_log", "read_log", "write_log"]

logger = logging.getLogger("uistream_app.recording")

#: Chunk types after which the log is written at once.
FLUSH_AT: Final = frozenset(("finish-step", "finish", "error", "abort"))

#: The statuses ``finish`` accepts (every one but ``running``).
FINAL_STATUSES: Final = frozenset(s.value for s in Run.Status if s != Run.Status.RUNNING)

#: The most chunks one ``ChunkBatch`` row holds (a longer batch is split),
#: so that reading one page of a log never loads much more than the page.
MAX_ROW_CHUNKS: Final = 1000


class LogEntry(NamedTuple):
    """One stored chunk: its number, its offset from the run's start, and
    the chunk itself."""

    seq: int
    offset_ms: int
    chunk: Chunk


def _clip(value: str | None, field: str) -> str:
    """``value`` cut to the column's length: a too-long error code must not
    fail the write that stores the whole run."""
    max_length: int | None = getattr(Run._meta.get_field(field), "max_length", None)
    text = value or ""
    return text[:max_length] if max_length is not None else text


async def _outcome(future: asyncio.Future[Any]) -> Any:
    """Wait for ``future`` (a write the ``LogWriter`` owns) to its end even
    if the caller is cancelled meanwhile, then let the cancellation through:
    a database write can't be stopped halfway, and its caller must know how
    it ended before it goes."""
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if future.cancelled():  # the writer itself was cancelled (loop shutdown)
                raise
            cancelled = True
        except BaseException:  # noqa: BLE001 - the write's own failure, read below
            break
    if cancelled:
        if not future.cancelled() and future.exception() is not None:
            logger.error("a write failed after its caller was cancelled", exc_info=future.exception())
        raise asyncio.CancelledError
    return future.result()


@dataclass(slots=True)
class _Final:
    """What ``finish`` stores besides the last rows."""

    parts: list[Any]
    metadata: Any
    fields: dict[str, Any]


@dataclass(slots=True)
class _Job:
    """One recorder's share of a write: its rows, its new ``chunk_count``,
    ``first_chunk_at`` when not stored yet, and its final when finishing."""

    recorder: RunRecorder
    first_seq: int
    offsets: list[int]
    chunks: list[Chunk]
    first_chunk_at: datetime | None
    final: _Final | None = None
    error: BaseException | None = field(default=None)

    @property
    def stored(self) -> int:
        return self.first_seq + len(self.chunks)


class RunRecorder:
    """Records one run's canonical chunks; see the module docstring.

    ``run`` and ``message`` are saved rows: the run being streamed and the
    assistant message it builds (a message that already has parts is
    continued, as the SDK continues a last assistant message). One recorder
    per run, from its first chunk. ``flush_every_ms`` defaults to
    ``UISTREAM["FLUSH_EVERY_MS"]``; ``clock`` is a monotonic clock in
    seconds, the one offsets are read from (the writer's timer runs on the
    event loop's own monotonic clock).
    """

    def __init__(
        self,
        run: Run,
        message: Message,
        *,
        flush_every_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        inline: bool | None = None,
    ) -> None:
        self.inline = inline
        self.run = run
        self.message = message
        every_ms = uistream_settings.FLUSH_EVERY_MS if flush_every_ms is None else flush_every_ms
        self.interval = max(0.0, float(every_ms)) / 1000
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
        self._stored = 0
        self._last_offset = 0
        self._first_chunk_at: datetime | None = None
        self._first_chunk_stored = False
        self._finished = False
        self._finishing: asyncio.Future[None] | None = None
        self._writer: LogWriter | None = None

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
        or message end (rule 2)."""
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
            if chunk.get("type") in FLUSH_AT:
                urgent = True
            if self.reader_error is None:
                self._read(chunk)
        if urgent or was_idle:
            self._writer_here().schedule(self, urgent=urgent)

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
            message = self._reader.message
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
            }
            final = _Final(message["parts"], message.get("metadata"), fields)
            finishing = self._writer_here().finish(self, final)
            self._finishing = finishing
        await _outcome(finishing)

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

    def _read(self, chunk: Chunk) -> None:
        try:
            self._reader.feed(chunk)
        except UIMessageStreamError as exc:
            self.reader_error = exc
            logger.warning("run %s: the log holds a chunk the SDK would refuse: %s", self.run.pk, exc)

    @property
    def _has_pending(self) -> bool:
        return bool(self._chunks)

    def _take(self, final: _Final | None) -> _Job:
        chunks, self._chunks = self._chunks, []
        offsets, self._offsets = self._offsets, []
        first = None if self._first_chunk_stored else self._first_chunk_at
        return _Job(self, self._stored, offsets, chunks, first, final)

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
        if job.final is not None:
            self._finished = False


# -- the writer ---------------------------------------------------------------------

#: One thread writes every log of the process, as one database client.
WRITER_EXECUTOR: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uistream-log-writer")


class LogWriter:
    """Stores the batches of every ``RunRecorder`` of one event loop (rules
    2–4 of the module docstring). Get it with ``for_running_loop``; the
    recorders find it themselves.

    Its task runs while there is something to write and ends when there is
    not; each round takes everything pending (the rows of every recorder
    that has some, the finals asked for) and stores it in one transaction
    in the writer thread. ``schedule`` wakes it at once (``urgent``) or sets
    its timer to the recorder's interval; ``flush`` and ``finish`` return
    a future of the round that will store what is pending now.
    """

    _by_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LogWriter]] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: the registry is keyed weakly by the loop, and a strong
        # reference from its value would keep a closed loop alive forever.
        self._loop = weakref.ref(loop)
        self._waiting: dict[RunRecorder, None] = {}  # recorders with rows, in order
        self._finals: dict[RunRecorder, _Final] = {}
        self._round: asyncio.Future[dict[RunRecorder, BaseException]] | None = None  # the next round's outcome
        self._writing: dict[RunRecorder, asyncio.Future[dict[RunRecorder, BaseException]]] = {}
        self._wake = asyncio.Event()
        self._deadline: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        #: Rounds written so far (for tests and benchmarks).
        self.rounds = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        if loop is None:
            raise RuntimeError("this LogWriter's event loop is gone")
        return loop

    @classmethod
    def for_running_loop(cls) -> LogWriter:
        loop = asyncio.get_running_loop()
        writer = cls._by_loop.get(loop)
        if writer is None:
            writer = cls._by_loop[loop] = cls(loop)
        return writer

    def schedule(self, recorder: RunRecorder, *, urgent: bool = False) -> None:
        """``recorder`` has rows to store: now (``urgent``), or within its
        interval."""
        self._waiting[recorder] = None
        if urgent or recorder.interval <= 0:
            self._wake.set()
        else:
            self._set_timer(self.loop.time() + recorder.interval)
        self._ensure_running()

    def flush(self, recorder: RunRecorder) -> asyncio.Future[None]:
        """A future that is done when everything ``recorder`` added so far
        is stored (with the write's error when it failed)."""
        if recorder._has_pending:
            self._waiting[recorder] = None
            return self._member_of(self._next_round(), recorder)
        writing = self._writing.get(recorder)
        if writing is not None:
            return self._member_of(writing, recorder)
        done = self.loop.create_future()
        done.set_result(None)
        return done

    def finish(self, recorder: RunRecorder, final: _Final) -> asyncio.Future[None]:
        """A future of the round that stores ``recorder``'s last rows and
        ``final``."""
        self._finals[recorder] = final
        return self._member_of(self._next_round(), recorder)

    async def drain(self) -> None:
        """Wait until everything scheduled so far is written (or given up on
        for now: a failed write is retried on a timer, and waited for too).
        Rows pending for their interval are waited for, not hurried."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    # -- the task -------------------------------------------------------------------

    def _next_round(self) -> asyncio.Future[dict[RunRecorder, BaseException]]:
        if self._round is None:
            self._round = self.loop.create_future()
        self._wake.set()
        self._ensure_running()
        return self._round

    def _member_of(
        self, round_: asyncio.Future[dict[RunRecorder, BaseException]], recorder: RunRecorder
    ) -> asyncio.Future[None]:
        mine: asyncio.Future[None] = self.loop.create_future()

        def settle(outcome: asyncio.Future[dict[RunRecorder, BaseException]]) -> None:
            if mine.done():
                return
            if outcome.cancelled():
                mine.cancel()
            elif outcome.exception() is not None:
                mine.set_exception(outcome.exception())  # type: ignore[arg-type]
            elif recorder in outcome.result():
                mine.set_exception(outcome.result()[recorder])
            else:
                mine.set_result(None)

        round_.add_done_callback(settle)
        return mine

    def _set_timer(self, when: float) -> None:
        if self._deadline is not None and self._deadline <= when:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._deadline = when
        self._timer = self.loop.call_at(when, self._wake.set)

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = self.loop.create_task(self._run(), name="uistream-log-writer")

    async def _run(self) -> None:
        while self._waiting or self._finals:
            await self._wake.wait()
            self._wake.clear()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = self._deadline = None
            await self._write_round()

    async def _write_round(self) -> None:
        waiting, self._waiting = self._waiting, {}
        finals, self._finals = self._finals, {}
        round_, self._round = self._round, None
        jobs = [r._take(finals.get(r)) for r in waiting if r._has_pending or r in finals]
        jobs += [r._take(final) for r, final in finals.items() if r not in waiting]
        outcome: asyncio.Future[dict[RunRecorder, BaseException]] = round_ or self.loop.create_future()
        for job in jobs:
            self._writing[job.recorder] = outcome
        errors: dict[RunRecorder, BaseException] = {}
        try:
            if jobs:
                # Even when this task is cancelled (loop shutdown), the write
                # in the thread goes on: wait for it, so that each job's
                # outcome is known and no row is given back that was stored.
                if _inline():
                    write = sync_to_async(_write_jobs, thread_sensitive=True)(jobs, own_connection=False)
                    await _outcome(asyncio.ensure_future(write))
                else:
                    await _outcome(self.loop.run_in_executor(WRITER_EXECUTOR, _write_jobs, jobs))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the thread could not be asked (interpreter shutdown)
            for job in jobs:
                job.error = job.error or exc
        finally:
            for job in jobs:
                self._writing.pop(job.recorder, None)
                if job.error is None:
                    job.recorder._written(job)
                else:
                    job.recorder._give_back(job)
                    errors[job.recorder] = job.error
                    # Try again after an interval, not in a tight loop.
                    if job.recorder._has_pending:
                        self._waiting.setdefault(job.recorder, None)
                        self._set_timer(self.loop.time() + max(job.recorder.interval, 0.05))
            self.rounds += 1
            if not outcome.done():
                outcome.set_result(errors)
        for recorder, error in errors.items():
            logger.error("could not store chunks of run %s; they stay pending", recorder.run.pk, exc_info=error)


# Sync, in the writer thread.


def _inline() -> bool:
    """``LOG_WRITER`` as it stands: write on the code's own thread-sensitive
    executor (``inline``) rather than the writer thread. ``auto`` is inline
    under Django's test environment (``setup_test_environment``, which the
    test runner and pytest-django call, is what gives ``mail`` its
    ``outbox``): a ``TestCase`` wraps each test in a transaction that only
    its own connection sees."""
    mode = uistream_settings.LOG_WRITER
    if mode == "auto":
        return hasattr(mail, "outbox")
    return bool(mode == "inline")


def _write_jobs(jobs: list[_Job], own_connection: bool = True) -> None:
    """Store ``jobs`` in one transaction; when that fails, each job in a
    transaction of its own, so only the failing ones fail (their ``error``
    is set). ``own_connection``: this thread's connection is the writer's
    own, to be treated as a request's (closed when obsolete); inline, it is
    the caller's, and left alone."""
    if own_connection:
        close_old_connections()
    try:
        try:
            with transaction.atomic():
                _store(jobs)
            return
        except Exception as exc:  # noqa: BLE001 - kept on the job; retried one by one below
            if len(jobs) == 1:
                jobs[0].error = exc
                return
        for job in jobs:
            _recover_connection()
            try:
                with transaction.atomic():
                    _store([job])
            except Exception as exc:  # noqa: BLE001 - kept on the job, raised to its waiters
                job.error = exc
    finally:
        if own_connection:
            close_old_connections()


def _recover_connection() -> None:
    # After a failed write the connection may be broken for good (Django
    # only replaces such connections between requests).
    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        connection.close()


def _store(jobs: list[_Job]) -> None:
    rows = [row for job in jobs for row in _rows(job.recorder.run.pk, job.first_seq, job.offsets, job.chunks)]
    if rows:
        _insert_rows(rows)
    counts = [
        (job.stored, job.recorder.run.pk)
        for job in jobs
        if job.chunks and job.final is None and job.first_chunk_at is None
    ]
    if counts:
        _update_counts(counts)
    for job in jobs:
        if job.first_chunk_at is not None and job.final is None:  # once a run
            Run.objects.filter(pk=job.recorder.run.pk).update(chunk_count=job.stored, first_chunk_at=job.first_chunk_at)
        final = job.final
        if final is not None:
            recorder = job.recorder
            Message.objects.filter(pk=recorder.message.pk).update(parts=final.parts, metadata=final.metadata)
            Run.objects.filter(pk=recorder.run.pk).update(**final.fields, chunk_count=job.stored)
            # The conversation list sorts by activity; a reply landing is some.
            Conversation.objects.filter(pk=recorder.run.conversation_id).update(updated_at=final.fields["finished_at"])


def _rows(run_id: Any, first_seq: int, offsets: list[int], chunks: list[Chunk]) -> Iterator[tuple[Any, ...]]:
    for start in range(0, len(chunks), MAX_ROW_CHUNKS):
        part = chunks[start : start + MAX_ROW_CHUNKS]
        first = first_seq + start
        yield run_id, first, first + len(part) - 1, offsets[start : start + MAX_ROW_CHUNKS], part


def _insert_rows(rows: list[tuple[Any, ...]]) -> None:
    """Append ``(run_id, first_seq, last_seq, offsets, chunks)`` rows: one
    ``executemany`` of JSON that orjson wrote, on SQLite and PostgreSQL.
    Other backends, and a batch holding NUL (stored as U+FFFD, see
    ``StoredJSONEncoder``), take the ORM's way."""
    vendor = connection.vendor
    cast = _RAW_JSON_CAST.get(vendor)
    if cast is None:
        ChunkBatch.objects.bulk_create(
            ChunkBatch(run_id=run_id, first_seq=first, last_seq=last, offsets=offsets, chunks=chunks)
            for run_id, first, last, offsets, chunks in rows
        )
        return
    dumps = orjson.dumps
    params = []
    for run_id, first, last, offsets, chunks in rows:
        data = dumps(chunks)
        if b"\\u0000" in data:
            data = StoredJSONEncoder().encode(chunks).encode()
        run_key = _RUN_PK.get_db_prep_value(run_id, connection)
        params.append((run_key, first, last, dumps(offsets).decode(), data.decode()))
    table = connection.ops.quote_name(ChunkBatch._meta.db_table)
    sql = f"INSERT INTO {table} (run_id, first_seq, last_seq, offsets, chunks) VALUES (%s, %s, %s, {cast}, {cast})"
    with connection.cursor() as cursor:
        cursor.executemany(sql, params)


def _update_counts(counts: list[tuple[int, Any]]) -> None:
    if connection.vendor not in _RAW_JSON_CAST:
        for count, run_id in counts:
            Run.objects.filter(pk=run_id).update(chunk_count=count)
        return
    table = connection.ops.quote_name(Run._meta.db_table)
    pk = connection.ops.quote_name(str(_RUN_PK.column))
    with connection.cursor() as cursor:
        cursor.executemany(
            f"UPDATE {table} SET chunk_count = %s WHERE {pk} = %s",
            [(count, _RUN_PK.get_db_prep_value(run_id, connection)) for count, run_id in counts],
        )


_RUN_PK: Final = ChunkBatch._meta.get_field("run").target_field
#: The placeholder of a JSON column, by backend, for the raw insert.
_RAW_JSON_CAST: Final = {"sqlite": "%s", "postgresql": "%s::jsonb"}


# -- reading and writing a stored log -------------------------------------------------


def _run_id(run: Run | uuid.UUID | str) -> Any:
    return run.pk if isinstance(run, Run) else run


def iter_log(run: Run | uuid.UUID | str, batch: int = 1000, *, start: int = 0) -> Iterator[LogEntry]:
    """The stored chunks of ``run`` from ``seq`` ``start`` on, in order,
    about ``batch`` chunks a query, by key (no server-side cursor, no
    offset scan). Synchronous; for a sync view or the admin."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    return _iter_log(_run_id(run), batch, start, None)


def read_log(run: Run | uuid.UUID | str, start: int = 0, stop: int | None = None) -> list[LogEntry]:
    """The stored chunks of ``run`` with ``start <= seq < stop`` (to the
    end when ``stop`` is ``None``), in order. Synchronous."""
    run_id = _run_id(run)
    if stop is not None and stop <= start:
        return []
    return list(_iter_log(run_id, max(stop - start, 1) if stop is not None else 1000, start, stop))


def _iter_log(run_id: Any, batch: int, start: int, stop: int | None) -> Iterator[LogEntry]:
    next_seq = start
    while stop is None or next_seq < stop:
        window = next_seq + batch if stop is None else min(next_seq + batch, stop)
        rows = list(
            ChunkBatch.objects.filter(run_id=run_id, last_seq__gte=next_seq, first_seq__lt=window)
            .order_by("first_seq")
            .values_list("first_seq", "offsets", "chunks")
        )
        if not rows:
            return
        for first, offsets, chunks in rows:
            for i in range(max(next_seq - first, 0), len(chunks)):
                seq = first + i
                if stop is not None and seq >= stop:
                    return
                yield LogEntry(seq, offsets[i], chunks[i])
            next_seq = first + len(chunks)


def last_offset_ms(run: Run | uuid.UUID | str) -> int:
    """The offset of ``run``'s last stored chunk (0 for an empty log)."""
    offsets = (
        ChunkBatch.objects.filter(run_id=_run_id(run)).order_by("-first_seq").values_list("offsets", flat=True).first()
    )
    return int(offsets[-1]) if offsets else 0


def _load_log(run_id: Any, start: int) -> list[Chunk]:
    return [entry.chunk for entry in _iter_log(run_id, 1 << 30, start, None)]


async def load_log(run: Run | uuid.UUID | str, *, start: int = 0) -> list[Chunk]:
    """The stored chunks of ``run`` from ``seq`` ``start`` on, in order (one
    query, one thread hop). What is stored is what ``finish`` or the last
    write stored; chunks still pending in a live recorder are not there."""
    return await sync_to_async(_load_log)(_run_id(run), start)


def write_log(run: Run, chunks: Iterable[Chunk], offsets: Iterable[int] | None = None) -> int:
    """Append ``chunks`` to ``run``'s stored log (after what it holds) with
    ``offsets`` (default: all 0), and set the run's ``chunk_count``; returns
    the new count. Synchronous, one transaction; for imports, fixtures and
    tests (a live run's log is the recorder's business)."""
    chunk_list = list(chunks)
    offset_list = list(offsets) if offsets is not None else [0] * len(chunk_list)
    if len(offset_list) != len(chunk_list):
        raise ValueError(f"{len(chunk_list)} chunks but {len(offset_list)} offsets")
    with transaction.atomic():
        stored = ChunkBatch.objects.filter(run_id=run.pk).order_by("-first_seq")
        last = stored.values_list("last_seq", flat=True).first()
        first = 0 if last is None else last + 1
        if chunk_list:
            _insert_rows(list(_rows(run.pk, first, offset_list, chunk_list)))
        count = first + len(chunk_list)
        Run.objects.filter(pk=run.pk).update(chunk_count=count)
    run.chunk_count = count
    return count
