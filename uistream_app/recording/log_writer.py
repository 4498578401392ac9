"""The chunk log's store: ``LogWriter``, which writes the batches of every
``RunRecorder`` of one event loop (group commit, on a thread of its own or
inline), the SQL it runs, and ``write_log``, which stores a whole log at
once. ``log_writes_inline`` says where a run's log is written.

The rules it keeps are in docs/recording.md, "The chunk log" (invariants
2-4 and 7 are this module's).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Final

import orjson
from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection, transaction

from ..conf import settings as uistream_settings
from ..models import ChunkBatch, Conversation, Message, Run, StoredJSONEncoder
from ..protocol.ui.chunks import Chunk
from .one_writer import one_writer

if TYPE_CHECKING:
    from .recorder import RunRecorder

__all__ = ["MAX_ROW_CHUNKS", "WRITER_EXECUTOR", "LeaseLost", "LogWriter", "log_writes_inline", "write_log"]

logger = logging.getLogger(__name__)

#: The most chunks one ``ChunkBatch`` row holds (a longer batch is split),
#: so that reading one page of a log never loads much more than the page.
MAX_ROW_CHUNKS: Final = 1000


class LeaseLost(Exception):
    """A write of a run whose lease another process took: its epoch
    (``Run.lease_epoch``) is no longer the one the writer holds
    (docs/recording.md, invariant 9). Nothing of the write was stored."""

    def __init__(self, run_id: Any, epoch: int) -> None:
        self.run_id = str(run_id)
        self.epoch = epoch
        super().__init__(f"run {run_id} is no longer leased under epoch {epoch}: another process took it over")


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
    #: Fields of the run row stored with this write (``store_with_run``).
    run_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def stored(self) -> int:
        return self.first_seq + len(self.chunks)


# -- where a run's log is written --------------------------------------------------


def log_writes_inline() -> bool:
    """Whether the log of a run whose rows this thread is about to create
    must be written inline, on this thread's connection, rather than by the
    writer thread (docs/recording.md, invariant 7). ``UISTREAM["LOG_WRITER"]``
    ``"inline"`` and ``"thread"`` say so; ``"auto"`` is inline when this
    thread's connection is inside an atomic block, whose rows no other
    connection sees until it commits (a ``TestCase``'s transaction).

    Call it in the sync code that creates the run's rows (the
    thread-sensitive executor a view's ORM calls run on), before it opens
    a transaction of its own, and give the answer to ``RunRecorder``."""
    mode = uistream_settings.LOG_WRITER
    if mode == "auto":
        return bool(connection.in_atomic_block)
    return mode == "inline"


# -- the writer ---------------------------------------------------------------------

#: One thread writes every log of the process, as one database client.
WRITER_EXECUTOR: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uistream-log-writer")


class LogWriter:
    """Stores the batches of every ``RunRecorder`` of one event loop
    (docs/recording.md, invariants 2-4). Get it with ``for_running_loop``; the
    recorders find it themselves.

    Its task runs while there is something to write and ends when there is
    not. A round that a recorder's interval made due takes everything
    pending (the rows of every recorder that has some, the finals asked
    for); a round asked for before that (an urgent chunk, ``flush``,
    ``finish``) takes only what was asked for, and the others' rows wait
    for their own interval. Each round is one transaction in the writer
    thread, and one more for the share of the recorders that write inline,
    on the thread-sensitive executor (invariant 7).
    ``schedule`` wakes it at once (``urgent``) or sets its timer to the
    recorder's interval; ``flush`` and ``finish`` return a future of the
    round that will store what is pending now.
    """

    _by_loop: ClassVar[weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LogWriter]] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weakly: the registry is keyed weakly by the loop, and a strong
        # reference from its value would keep a closed loop alive forever.
        self._loop = weakref.ref(loop)
        # Recorders with rows, in order, and when their rows are due (loop time).
        self._waiting: dict[RunRecorder, float] = {}
        self._asked: set[RunRecorder] = set()  # due now: an urgent chunk, flush()
        self._finals: dict[RunRecorder, _Final] = {}
        self._flushes: set[RunRecorder] = set()  # asked for by flush(): not held back
        self._held: dict[RunRecorder, float] = {}  # held for their finish(), until (loop time)
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
        now = self.loop.time()
        if urgent or recorder.interval <= 0:
            self._waiting[recorder] = now
            self._asked.add(recorder)
            self._wake.set()
        else:
            due = self._waiting.setdefault(recorder, now + recorder.interval)
            self._set_timer(due)
        self._ensure_running()

    def flush(self, recorder: RunRecorder) -> asyncio.Future[None]:
        """A future that is done when everything ``recorder`` added so far
        is stored (with the write's error when it failed)."""
        if recorder._has_pending:
            self._waiting[recorder] = self.loop.time()
            self._asked.add(recorder)
            self._flushes.add(recorder)
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
        wrote = False
        try:
            while self._waiting or self._finals:
                await self._wake.wait()
                self._wake.clear()
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = self._deadline = None
                wrote = await self._write_round() or wrote
        finally:
            if wrote:
                # Idle: the writer thread's connection is treated as a
                # request's that ended (closed unless CONN_MAX_AGE keeps it).
                # Not awaited: the next round queues behind it anyway.
                self.loop.run_in_executor(WRITER_EXECUTOR, close_old_connections)

    async def _write_round(self) -> bool:
        """One round; True when it wrote on the writer thread."""
        now = self.loop.time()
        asked, self._asked = self._asked, set()
        finals, self._finals = self._finals, {}
        flushes, self._flushes = self._flushes, set()
        round_, self._round = self._round, None
        if any(due <= now for recorder, due in self._waiting.items() if recorder not in asked):
            # An interval is up: everything pending goes (group commit,
            # invariant 3), and the recorders' next rows are due together.
            waiting, self._waiting = self._waiting, {}
        else:
            # Only what was asked for: at the end of a burst, each run's
            # end would otherwise take every other run's few rows, and the
            # writer would go round every few milliseconds with all of them.
            waiting = {r: self._waiting.pop(r) for r in [*self._waiting] if r in asked or r in finals}
        for recorder in [r for r in waiting if r._ended and r not in finals and r not in flushes and r.interval > 0]:
            # Its stream has ended: its ``finish`` follows within a few
            # turns of the loop, and its last chunks go with it, one
            # transaction instead of two (a short answer's whole log and
            # outcome in one). The recorder's interval bounds the wait.
            until = self._held.setdefault(recorder, now + recorder.interval)
            if now < until:
                del waiting[recorder]
                self._waiting[recorder] = until
        for recorder in waiting:
            self._held.pop(recorder, None)
        for recorder in finals:
            self._held.pop(recorder, None)
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
                # Each recorder's rows go where its run's rows can be seen
                # (invariant 7): the writer thread's connection, or inline.
                threaded = [job for job in jobs if not job.recorder.inline]
                inline = [job for job in jobs if job.recorder.inline]
                if threaded:
                    await _outcome(self.loop.run_in_executor(WRITER_EXECUTOR, _write_jobs, threaded))
                if inline:
                    write = sync_to_async(_write_jobs, thread_sensitive=True)(inline, own_connection=False)
                    await _outcome(asyncio.ensure_future(write))
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
                elif isinstance(job.error, LeaseLost):
                    # Fenced off (invariant 9): nothing to retry, the run is
                    # its new owner's; the recorder stops its run.
                    job.recorder.lose_lease(job.error)
                    errors[job.recorder] = job.error
                else:
                    job.recorder._give_back(job)
                    errors[job.recorder] = job.error
                    # Try again after an interval, not in a tight loop.
                    if job.recorder._has_pending:
                        self._waiting.setdefault(job.recorder, self.loop.time() + max(job.recorder.interval, 0.05))
            self.rounds += 1
            if self._waiting:
                # The rows left wait for the first of their intervals.
                self._set_timer(min(self._waiting.values()))
            if not outcome.done():
                outcome.set_result(errors)
        for recorder, error in errors.items():
            if isinstance(error, LeaseLost):
                continue  # said once, as a warning, by the recorder
            if _ended_idle(error):
                logger.warning(
                    "the database ended a write of run %s that stood still for half a lease (was the process "
                    "paused?); it is tried again on a new connection",
                    recorder.run.pk,
                )
                continue
            logger.error("could not store chunks of run %s; they stay pending", recorder.run.pk, exc_info=error)
        return any(not job.recorder.inline for job in jobs)


# Sync: in the writer thread, or inline (invariant 7).


def _write_jobs(jobs: list[_Job], own_connection: bool = True) -> None:
    """Store ``jobs`` in one transaction; when that fails, each job in a
    transaction of its own, so only the failing ones fail (their ``error``
    is set). ``own_connection``: this thread's connection is the writer's
    own, kept from round to round while the writer is busy (a connect per
    round would cost more than the round) and replaced when it failed or
    outlived a ``CONN_MAX_AGE`` set; the writer closes it as a request's
    once it is idle (``LogWriter._run``). Inline, it is the caller's, and
    left alone."""
    if own_connection:
        _refresh_connection()
        _bound_idle_transactions()
    try:
        with one_writer(background=True), transaction.atomic():
            _store(jobs)
        return
    except Exception as exc:  # noqa: BLE001 - kept on the job; retried one by one below
        if len(jobs) == 1:
            jobs[0].error = exc
            return
    for job in jobs:
        _recover_connection()
        try:
            with one_writer(background=True), transaction.atomic():
                _store([job])
        except Exception as exc:  # noqa: BLE001 - kept on the job, raised to its waiters
            job.error = exc


def _refresh_connection() -> None:
    if connection.connection is None:
        return
    aged = bool(connection.settings_dict["CONN_MAX_AGE"]) and connection.close_at is not None
    if connection.errors_occurred or (aged and time.monotonic() >= connection.close_at):  # type: ignore[operator]
        connection.close_if_unusable_or_obsolete()


#: The connection ``_bound_idle_transactions`` last bounded (the writer's,
#: on its one thread): it is done once a connection.
_bounded: list[Any] = [None]


def _bound_idle_transactions() -> None:
    """On PostgreSQL, have the server end the writer's transaction when it
    stands idle for half a lease (``idle_in_transaction_session_timeout``):
    a process frozen in the middle of a write (``SIGSTOP``, a VM stall)
    would otherwise hold its runs' rows locked until it thawed, and a
    sweep, which skips locked rows, could not take them over. A write is
    never idle that long while its process runs; thawed, the writer finds
    its connection ended, and its next write, on a new one, finds its lease
    gone."""
    if connection.vendor != "postgresql":
        return
    connection.ensure_connection()
    if _bounded[0] is connection.connection:
        return
    milliseconds = max(100, int(uistream_settings.LEASE_SECONDS * 500))
    with connection.cursor() as cursor:
        cursor.execute(f"SET idle_in_transaction_session_timeout = {milliseconds:d}")
    _bounded[0] = connection.connection


def _ended_idle(error: BaseException) -> bool:
    """``error`` is the server ending a write that stood idle
    (``_bound_idle_transactions``; SQLSTATE 25P03)."""
    cause = error.__cause__ or error.__context__
    return getattr(cause, "sqlstate", None) == "25P03" or "idle-in-transaction" in str(error)


def _recover_connection() -> None:
    # After a failed write the connection may be broken for good (Django
    # only replaces such connections between requests).
    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        connection.close()


#: The PostgreSQL broker's ``NOTIFY`` channel of the chunk log
#: (``uistream_app.live.postgres.LOG_CHANNEL``; a test holds the two together).
LOG_CHANNEL: Final = "uistream_log"
#: ``BROKER["BACKEND"]`` values that follow runs of other processes through the log.
_LOG_FOLLOWERS: Final = frozenset({"postgres", "uistream_app.live.postgres.PostgresBroker"})
#: Most run ids in one ``NOTIFY`` payload (PostgreSQL takes 8000 bytes).
_NOTIFY_IDS: Final = 200


def _follows_log(config: Any) -> bool:
    return isinstance(config, dict) and config.get("BACKEND") in _LOG_FOLLOWERS


def _notify(run_ids: list[str]) -> None:
    """Wake the PostgreSQL broker's followers of ``run_ids`` (other
    processes that read these runs from the log) when this transaction
    commits: a ``NOTIFY`` is delivered at commit, so a follower it wakes
    finds the rows. Only with that broker, on PostgreSQL."""
    if not run_ids or connection.vendor != "postgresql" or not uistream_settings.derived("BROKER", _follows_log):
        return
    with connection.cursor() as cursor:
        for start in range(0, len(run_ids), _NOTIFY_IDS):
            cursor.execute("SELECT pg_notify(%s, %s)", [LOG_CHANNEL, ",".join(run_ids[start : start + _NOTIFY_IDS])])


def _store(jobs: list[_Job]) -> None:
    # The run rows first, each under its writer's epoch (invariant 9): a
    # conditional UPDATE that locks the row until this transaction ends, so
    # a claimant waits for it and then reads the whole log; a job whose
    # epoch is gone raises ``LeaseLost`` before any of its rows is written.
    _fence(jobs)
    rows = [row for job in jobs for row in _rows(job.recorder.run.pk, job.first_seq, job.offsets, job.chunks)]
    if rows:
        _insert_rows(rows)
        _notify(list(dict.fromkeys(str(job.recorder.run.pk) for job in jobs if job.chunks)))
    for job in jobs:
        final = job.final
        if final is not None:
            recorder = job.recorder
            Message.objects.filter(pk=recorder.message.pk).update(parts=final.parts, metadata=final.metadata)
            # The conversation list sorts by activity; a reply landing is some.
            Conversation.objects.filter(pk=recorder.run.conversation_id).update(updated_at=final.fields["finished_at"])


def _fence(jobs: list[_Job]) -> None:
    """Update each job's run row (its ``chunk_count``, its fields, its
    outcome) only where the run's ``lease_epoch`` is the recorder's; raise
    ``LeaseLost`` when a row did not match. The plain jobs (rows only) in one
    ``executemany`` (one statement on PostgreSQL), as before fencing; the
    others one UPDATE each."""
    plain: list[_Job] = []
    for job in jobs:
        final = job.final
        run = job.recorder.run
        epoch = job.recorder.epoch
        if final is None and job.first_chunk_at is None and not job.run_fields:
            if job.chunks:
                plain.append(job)
            continue
        fields: dict[str, Any] = {**job.run_fields, "chunk_count": job.stored}
        if final is not None:
            fields.update(final.fields)
        elif job.first_chunk_at is not None:  # once a run
            fields["first_chunk_at"] = job.first_chunk_at
        if not Run.objects.filter(pk=run.pk, lease_epoch=epoch).update(**fields):
            raise LeaseLost(run.pk, epoch)
    if plain and _update_counts([(job.stored, job.recorder.run.pk, job.recorder.epoch) for job in plain]) != len(plain):
        # Which one: the round is retried job by job (``_write_jobs``).
        job = plain[0]
        raise LeaseLost(job.recorder.run.pk, job.recorder.epoch)


def _rows(run_id: Any, first_seq: int, offsets: list[int], chunks: list[Chunk]) -> Iterator[tuple[Any, ...]]:
    for start in range(0, len(chunks), MAX_ROW_CHUNKS):
        part = chunks[start : start + MAX_ROW_CHUNKS]
        first = first_seq + start
        yield run_id, first, first + len(part) - 1, offsets[start : start + MAX_ROW_CHUNKS], part


def _insert_rows(rows: list[tuple[Any, ...]]) -> None:
    """Append ``(run_id, first_seq, last_seq, offsets, chunks)`` rows: one
    ``executemany`` of JSON that orjson wrote on SQLite, one statement of
    many rows on PostgreSQL.
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
    row = f"(%s, %s, %s, {cast}, {cast})"
    sql = f"INSERT INTO {table} (run_id, first_seq, last_seq, offsets, chunks) VALUES "
    with connection.cursor() as cursor:
        if vendor != "postgresql":
            cursor.executemany(sql + row, params)
            return
        # One statement of many rows: psycopg's executemany is a pipeline,
        # after which the server does not time the transaction's idleness
        # (``_bound_idle_transactions``).
        for start in range(0, len(params), _ROWS_PER_STATEMENT):
            part = params[start : start + _ROWS_PER_STATEMENT]
            cursor.execute(sql + ", ".join([row] * len(part)), [value for values in part for value in values])


def _update_counts(counts: list[tuple[int, Any, int]]) -> int:
    """Set ``chunk_count`` of each ``(count, run_id, epoch)`` where the run
    is still leased under ``epoch``; returns how many rows matched."""
    if connection.vendor not in _RAW_JSON_CAST:
        return sum(
            Run.objects.filter(pk=run_id, lease_epoch=epoch).update(chunk_count=count)
            for count, run_id, epoch in counts
        )
    table = connection.ops.quote_name(Run._meta.db_table)
    pk = connection.ops.quote_name(str(_RUN_PK.column))
    rows = [(count, _RUN_PK.get_db_prep_value(run_id, connection), epoch) for count, run_id, epoch in counts]
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql":
            cursor.executemany(f"UPDATE {table} SET chunk_count = %s WHERE {pk} = %s AND lease_epoch = %s", rows)
            # The rows matched, summed over the statements (sqlite3).
            return int(cursor.rowcount)
        # One statement, not a pipeline (``_insert_rows``).
        matched = 0
        for start in range(0, len(rows), _ROWS_PER_STATEMENT):
            part = rows[start : start + _ROWS_PER_STATEMENT]
            values = ", ".join(["(%s::bigint, %s::uuid, %s::bigint)"] * len(part))
            cursor.execute(
                f"UPDATE {table} AS r SET chunk_count = v.count FROM (VALUES {values}) AS v(count, id, epoch) "
                f"WHERE r.{pk} = v.id AND r.lease_epoch = v.epoch",
                [value for row in part for value in row],
            )
            matched += int(cursor.rowcount)
        return matched


_RUN_PK: Final = ChunkBatch._meta.get_field("run").target_field
#: Rows per statement of the writer's inserts and updates on PostgreSQL
#: (at most 65,535 parameters a statement; five a row).
_ROWS_PER_STATEMENT: Final = 1000
#: The placeholder of a JSON column, by backend, for the raw insert.
_RAW_JSON_CAST: Final = {"sqlite": "%s", "postgresql": "%s::jsonb"}


# -- a whole log at once ---------------------------------------------------------------


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
            _notify([str(run.pk)])
        count = first + len(chunk_list)
        Run.objects.filter(pk=run.pk).update(chunk_count=count)
    run.chunk_count = count
    return count
