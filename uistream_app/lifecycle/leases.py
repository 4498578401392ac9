"""Leases and the sweeper: runs whose process died are settled, not left
``running`` (docs/operations.md, "Leases and the sweeper").

The process that executes a run renews its lease: one renewer thread per
process sets ``Run.heartbeat_at`` for all of ``registry.live_runs()`` in one
UPDATE every ``HEARTBEAT_SECONDS``. A ``running`` run whose heartbeat is
older than ``LEASE_SECONDS`` is an *orphan*, and ``settle`` ends it:

1. a conditional UPDATE (still ``running``, heartbeat still what made it an
   orphan) takes its lease, so of two sweepers racing one settles it and
   the other skips it; a sweeper that dies halfway leaves a lease that
   runs out again, and the next one finishes the job;
2. the stored log is completed from the broker's stream (the Redis
   broker holds what the client was sent but the log writer never
   stored; the in-process broker of a dead process holds nothing);
3. a terminal ``error`` chunk (``ERROR_TEXT``) is appended to the log,
   unless the log ends with one already;
4. the assistant message is rebuilt from the whole log
   (``UIMessageReader``, as ``RunRecorder`` builds it) and the run is
   stored ``interrupted`` with ``finished_at``, in one transaction with
   the log's new rows;
5. the broker's stream gets what it lacked and the terminal chunk and is
   closed there, and the chat's slot freed if the orphan still holds it
   (``Broker.end_orphan``), so every resumer ends with a visible error.

The renewer sweeps once when it starts (lazily, on a process's first
request or run) and every ``LEASE_SECONDS`` after, one indexed query each
time; ``python manage.py uistream_sweep`` sweeps by hand.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from ..conf import settings as uistream_settings
from ..live import get_broker
from ..models import Conversation, Message, Run
from ..protocol.ui.chunks import Chunk
from ..protocol.ui.reader import UIMessageReader, UIMessageStreamError
from ..recording import iter_log, last_offset_ms, write_log
from .registry import live_runs

__all__ = [
    "INTERRUPTED_CODE",
    "INTERRUPTED_FINISH_REASON",
    "Settled",
    "ensure_renewer",
    "orphan_ids",
    "renew_leases",
    "settle",
    "settle_chat_orphans",
    "stop_dead_run",
    "sweep",
]

logger = logging.getLogger("uistream_app.sweeper")

#: ``Run.error_code`` of a settled orphan.
INTERRUPTED_CODE = "Interrupted"
#: ``Run.finish_reason`` of a run settled ``interrupted`` before its answer
#: finished: ai@7's own word for an answer whose stream ended without its
#: end (``FinishReason``: "output may be incomplete").
INTERRUPTED_FINISH_REASON = "interrupted"
_TERMINAL_TYPES = frozenset(("finish", "error", "abort"))


@dataclass(frozen=True)
class Settled:
    """One orphan settled: its run, the chunks its log gained from the
    broker's stream, and its log's length now (terminal chunk included)."""

    run_id: str
    conversation_id: str
    recovered: int
    chunk_count: int


def _lease() -> timedelta:
    return timedelta(seconds=uistream_settings.LEASE_SECONDS)


# -- heartbeats -------------------------------------------------------------------


def renew_leases(run_ids: list[str]) -> int:
    """Set ``heartbeat_at`` to now for the running ones of ``run_ids``;
    returns how many rows it renewed. Synchronous.

    One UPDATE of the rows nobody holds, then one per row that was held.
    The log writer updates several of these rows in one transaction, in
    its own order; a multi-row UPDATE that waited for one of them while
    holding others could close a cycle with it (PostgreSQL's "deadlock
    detected"). Skipping the held rows, the first UPDATE never waits; a
    single-row UPDATE holds nothing else while it waits."""
    if not run_ids:
        return 0
    now = timezone.now()
    running = Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING).order_by()
    if not connection.features.has_select_for_update_skip_locked:
        return running.update(heartbeat_at=now)
    free = running.select_for_update(skip_locked=True, no_key=connection.features.has_select_for_no_key_update)
    with transaction.atomic():  # one statement; Django wants a transaction around FOR UPDATE
        renewed = Run.objects.filter(pk__in=free.values("pk")).update(heartbeat_at=now)
    if renewed == len(run_ids):
        return renewed
    done = {str(pk) for pk in running.filter(heartbeat_at__gte=now).values_list("pk", flat=True)}
    for run_id in run_ids:
        if str(run_id) not in done:
            renewed += running.filter(pk=run_id).update(heartbeat_at=now)
    return renewed


# -- finding and settling orphans -------------------------------------------------------


def orphan_ids(*, conversation_id: str | None = None, now: datetime | None = None) -> list[str]:
    """The running runs whose lease ran out (one query on the
    ``(status, heartbeat_at)`` index). Synchronous."""
    cutoff = (now or timezone.now()) - _lease()
    runs = Run.objects.filter(status=Run.Status.RUNNING, heartbeat_at__lt=cutoff)
    if conversation_id is not None:
        runs = runs.filter(conversation_id=conversation_id)
    return [str(pk) for pk in runs.values_list("pk", flat=True)]


def _claim(run_id: str, heartbeat_at: datetime | None) -> Run | None:
    """Take the lease of an orphan (rule 1): ``heartbeat_at`` is the stale
    heartbeat the caller saw, or None for "older than LEASE_SECONDS"."""
    now = timezone.now()
    runs = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING)
    runs = (
        runs.filter(heartbeat_at=heartbeat_at)
        if heartbeat_at is not None
        else runs.filter(heartbeat_at__lt=now - _lease())
    )
    if not runs.update(heartbeat_at=now):
        return None
    return Run.objects.select_related("message").get(pk=run_id)


def _store_settled(run: Run, published: list[Chunk] | None, error_text: str) -> tuple[list[Chunk], int]:
    """Steps 2-4, in one transaction: complete the log from ``published``
    (the broker's stream), close it with a terminal chunk, rebuild the
    message, store the run ``interrupted``. Returns everything the log
    holds now and how many chunks came from the stream. Synchronous."""
    with transaction.atomic():
        if not Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.RUNNING).exists():
            return [], 0  # its own process ended it meanwhile, after all
        log = [entry.chunk for entry in iter_log(run)]
        recovered = published[len(log) :] if published is not None and len(published) > len(log) else []
        complete = log + recovered
        terminal: list[Chunk] = []
        if not complete or complete[-1].get("type") not in _TERMINAL_TYPES:
            terminal = [{"type": "error", "errorText": error_text}]
        added = recovered + terminal
        if added:
            # The stream keeps no times: recovered chunks get the last
            # stored offset, the terminal chunk the time it was written.
            now_ms = int((timezone.now() - run.started_at) / timedelta(milliseconds=1))
            offsets = [last_offset_ms(run)] * len(recovered) + [max(now_ms, 0)] * len(terminal)
            write_log(run, added, offsets)
        complete += terminal
        now = timezone.now()
        ended: dict[str, Any] = {}
        if terminal:
            # The answer did not finish: say so in ai@7's words (a log that
            # ends with a ``finish`` keeps that finish's reason).
            ended["finish_reason"] = INTERRUPTED_FINISH_REASON
        Run.objects.filter(pk=run.pk).update(
            **ended,
            status=Run.Status.INTERRUPTED,
            finished_at=now,
            chunk_count=len(complete),
            error_code=INTERRUPTED_CODE,
            error_detail="The process that ran it stopped renewing its lease before the run ended.",
        )
        message = run.message
        if message is not None:
            built = _rebuild(message, complete, run.pk)
            Message.objects.filter(pk=message.pk).update(parts=built["parts"], metadata=built.get("metadata"))
        Conversation.objects.filter(pk=run.conversation_id).update(updated_at=now)
    return complete, len(recovered)


def _rebuild(message: Message, chunks: list[Chunk], run_id: Any) -> dict[str, Any]:
    """The message ``chunks`` build, from the parts it had before the run
    (a continuation goes on from them), as ``RunRecorder`` builds it."""
    continued = message.as_ui_message() if message.parts and message.role == Message.Role.ASSISTANT else None
    reader = UIMessageReader(message=continued, message_id=message.pk)
    for chunk in chunks:
        try:
            reader.feed(chunk)
        except UIMessageStreamError as exc:
            logger.warning("run %s: the log holds a chunk the SDK would refuse: %s", run_id, exc)
            break
    return reader.message


async def settle(run_id: str, *, heartbeat_at: datetime | None = None) -> Settled | None:
    """Settle one orphan (the module docstring's steps); None when it is no
    orphan (any more): alive, settled already, or taken by another
    sweeper. ``heartbeat_at``: settle it if its heartbeat is still this
    one (a stop that saw it overdue), instead of older than the lease."""
    if any(handle.run_id == run_id for handle in live_runs()):
        return None  # it runs here: late renewals, not a dead process
    run = await sync_to_async(_claim)(run_id, heartbeat_at)
    if run is None:
        return None
    broker = get_broker()
    published = await broker.published(run_id)
    error_text = uistream_settings.ERROR_TEXT
    complete, recovered = await sync_to_async(_store_settled)(run, published, error_text)
    if not complete:
        return None
    first_seq = len(published) if published is not None else len(complete)
    await broker.end_orphan(str(run.conversation_id), run_id, complete[first_seq:], first_seq)
    logger.warning("run %s was orphaned; settled as interrupted (%d chunks recovered)", run_id, recovered)
    return Settled(run_id, str(run.conversation_id), recovered, len(complete))


async def sweep() -> list[Settled]:
    """Settle every orphan there is now."""
    ids = await sync_to_async(orphan_ids)()
    settled = []
    for run_id in ids:
        try:
            done = await settle(run_id)
        except Exception:  # one run's trouble must not keep the others running
            logger.exception("could not settle orphaned run %s", run_id)
            continue
        if done is not None:
            settled.append(done)
    return settled


async def settle_chat_orphans(conversation_id: str) -> int:
    """Settle the orphans of one chat (before a new turn in it); how many."""
    ids = await sync_to_async(orphan_ids)(conversation_id=conversation_id)
    return sum([await settle(run_id) is not None for run_id in ids])


# -- stop for a dead run -----------------------------------------------------------------


async def stop_dead_run(run: Run, *, poll: float = 0.1) -> bool:
    """After a stop request for ``run``, which no process of ours executes:
    wait until it ends (True), or until its heartbeat is overdue (a live
    process renews it every ``HEARTBEAT_SECONDS``) and settle it (True);
    False when its process renewed it but it has not ended (it lives, and
    the stop request did not reach it)."""
    heartbeat = uistream_settings.HEARTBEAT_SECONDS
    seen = run.heartbeat_at
    deadline = (seen or timezone.now()) + timedelta(seconds=2 * heartbeat)
    while True:
        row = await Run.objects.filter(pk=run.pk).values("status", "heartbeat_at").afirst()
        if row is None or row["status"] != Run.Status.RUNNING:
            return True
        if row["heartbeat_at"] != seen:
            return False
        if timezone.now() >= deadline:
            await settle(str(run.pk), heartbeat_at=seen)
            return True
        await asyncio.sleep(poll)


# -- the renewer thread ------------------------------------------------------------------

_renewer: threading.Thread | None = None
_renewer_lock = threading.Lock()


def ensure_renewer(**_signal: Any) -> None:
    """Start this process's renewer thread unless it runs (cheap: a
    ``request_started`` receiver and ``Runner.start`` call it)."""
    global _renewer
    if _renewer is not None:
        return
    with _renewer_lock:
        if _renewer is None:
            _renewer = threading.Thread(target=_renew_forever, name="uistream-lease-renewer", daemon=True)
            _renewer.start()


def _renew_forever() -> None:
    next_sweep = 0.0
    while True:
        try:
            renew_leases([handle.run_id for handle in live_runs()])
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + uistream_settings.LEASE_SECONDS
                if orphan_ids():
                    async_to_sync(sweep)()
        except Exception:  # the renewer must outlive a database hiccup
            logger.exception("could not renew the leases of this process's runs")
        finally:
            close_old_connections()
        time.sleep(uistream_settings.HEARTBEAT_SECONDS)
