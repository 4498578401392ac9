"""Leases and the sweeper: runs whose process died are settled, not left
``running`` (docs/operations.md, "Leases and the sweeper").

The process that executes a run renews its lease: one renewer thread per
process sets ``Run.heartbeat_at`` for all of ``registry.live_runs()`` in one
UPDATE every ``HEARTBEAT_SECONDS``, each run only under the lease epoch its
process holds (``Run.lease_epoch``, the fencing token). A ``running`` run
whose heartbeat is older than ``LEASE_SECONDS`` (one that has none, from
before migration 0006: started longer ago than that) is an *orphan*, and
``settle`` ends it:

1. a conditional UPDATE (still ``running``, heartbeat still what made it an
   orphan) takes its lease and raises its epoch, so of two sweepers racing
   one settles it and the other skips it, and the process that held it
   writes nothing more into it (its writes are fenced by the epoch:
   ``recording.LeaseLost``); a sweeper that dies halfway leaves a lease
   that runs out again, and the next one finishes the job;
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
request or run) and with every renewal after (every ``HEARTBEAT_SECONDS``),
one indexed query each time, so an orphan is found at most a heartbeat
after its lease ran out; ``python manage.py uistream_sweep`` sweeps by hand.
A renewal that finds one of its runs under another epoch tells that run it
lost its lease (``registry.lose_lease``): it stops, and writes nothing.
The renewer's sweeps run in an event loop of its own, kept for the
process's life (one broker client, not one per sweep).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from ..conf import settings as uistream_settings
from ..live import get_broker
from ..models import Conversation, Message, Run
from ..protocol.ui.chunks import TERMINAL_CHUNKS, Chunk
from ..protocol.ui.reader import UIMessageReader, UIMessageStreamError
from ..recording import LeaseLost, iter_log, last_offset_ms, one_writer, write_log
from .registry import RunHandle, live_runs, lose_lease

__all__ = [
    "INTERRUPTED_CODE",
    "INTERRUPTED_FINISH_REASON",
    "MESSAGE_FROM",
    "Settled",
    "ensure_renewer",
    "orphan_ids",
    "renew_leases",
    "renew_live_runs",
    "set_continuer",
    "settle",
    "settle_chat_orphans",
    "stop_dead_run",
    "stored_message",
    "sweep",
]

logger = logging.getLogger("uistream_app.sweeper")

#: ``Run.error_code`` of a settled orphan.
INTERRUPTED_CODE = "Interrupted"
#: ``Run.finish_reason`` of a run settled ``interrupted`` before its answer
#: finished: ai@7's own word for an answer whose stream ended without its
#: end (``FinishReason``: "output may be incomplete").
INTERRUPTED_FINISH_REASON = "interrupted"


@dataclass(frozen=True)
class Settled:
    """One orphan settled: its run, the chunks its log gained from the
    broker's stream, and its log's length now (terminal chunk included);
    ``continued``: it was not ended but goes on in this process
    (``ON_OWNER_LOST = "continue"``), its log that long so far."""

    run_id: str
    conversation_id: str
    recovered: int
    chunk_count: int
    continued: bool = False


#: Goes on with a claimed orphan in this process, or answers False
#: (``continuation.continue_orphan``, set when that module is imported:
#: the sweeper is below the turn path it takes).
_continuer: Callable[[Run, list[Chunk] | None], Awaitable[bool]] | None = None


def set_continuer(continuer: Callable[[Run, list[Chunk] | None], Awaitable[bool]] | None) -> None:
    """What a sweep does first with an orphan when ``ON_OWNER_LOST`` is
    ``"continue"`` (``continuation`` sets it)."""
    global _continuer
    _continuer = continuer


def _lease() -> timedelta:
    return timedelta(seconds=uistream_settings.LEASE_SECONDS)


# -- heartbeats -------------------------------------------------------------------


def renew_leases(held: Mapping[str, int]) -> set[str]:
    """Set ``heartbeat_at`` to now for the running ones of ``held`` (run id →
    the lease epoch this process holds) still leased under that epoch;
    returns the ids whose epoch is gone (another process took them over).
    Synchronous.

    One UPDATE of the rows nobody holds, then one per row that was held.
    The log writer updates several of these rows in one transaction, in
    its own order; a multi-row UPDATE that waited for one of them while
    holding others could close a cycle with it (PostgreSQL's "deadlock
    detected"). Skipping the held rows, the first UPDATE never waits; a
    single-row UPDATE holds nothing else while it waits."""
    if not held:
        return set()
    by_epoch: dict[int, list[str]] = defaultdict(list)
    for run_id, epoch in held.items():
        by_epoch[epoch].append(run_id)
    mine = Q()
    for epoch, ids in by_epoch.items():
        mine |= Q(lease_epoch=epoch, pk__in=ids)
    now = timezone.now()
    running = Run.objects.filter(mine, status=Run.Status.RUNNING).order_by()
    if connection.features.has_select_for_update_skip_locked:
        free = running.select_for_update(skip_locked=True, no_key=connection.features.has_select_for_no_key_update)
        with transaction.atomic():  # one statement; Django wants a transaction around FOR UPDATE
            renewed = Run.objects.filter(pk__in=free.values("pk")).update(heartbeat_at=now)
        if renewed != len(held):
            done = {str(pk) for pk in running.filter(heartbeat_at__gte=now).values_list("pk", flat=True)}
            for run_id in held:
                if run_id not in done:
                    renewed += running.filter(pk=run_id).update(heartbeat_at=now)
    else:
        with one_writer(background=True):  # SQLite: in line with the turns' and the log writer's writes
            renewed = running.update(heartbeat_at=now)
    if renewed == len(held):
        return set()
    # Some were not renewed: ended (by this process, just now) or taken.
    rows = Run.objects.filter(pk__in=list(held)).values_list("pk", "lease_epoch")
    return {str(pk) for pk, epoch in rows if epoch != held[str(pk)]}


def renew_live_runs(handles: Iterable[RunHandle] | None = None) -> set[str]:
    """Renew the leases of this process's runs (``live_runs()``), and tell
    each one whose epoch is gone that it lost its lease; returns their ids.
    Synchronous."""
    runs = {handle.run_id: handle for handle in (live_runs() if handles is None else handles)}
    lost = renew_leases({run_id: handle.run.lease_epoch for run_id, handle in runs.items()})
    for run_id in lost:
        handle = runs[run_id]
        lose_lease(handle, LeaseLost(run_id, handle.run.lease_epoch))
    return lost


# -- finding and settling orphans -------------------------------------------------------


def _expired(cutoff: datetime) -> Q:
    """A lease that ran out before ``cutoff``: its heartbeat is older, or it
    has none (a run from before migration 0006) and started before it."""
    return Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)


def orphan_ids(*, conversation_id: str | None = None, now: datetime | None = None) -> list[str]:
    """The running runs whose lease ran out (one query on the
    ``(status, heartbeat_at)`` index). Synchronous."""
    cutoff = (now or timezone.now()) - _lease()
    runs = Run.objects.filter(_expired(cutoff), status=Run.Status.RUNNING)
    if conversation_id is not None:
        runs = runs.filter(conversation_id=conversation_id)
    return [str(pk) for pk in runs.values_list("pk", flat=True)]


def _claim(run_id: str, heartbeat_at: datetime | None, skip_locked: bool = False) -> Run | None:
    """Take the lease of an orphan (rule 1) under a new epoch: ``heartbeat_at``
    is the stale heartbeat the caller saw, or None for "older than
    LEASE_SECONDS". The returned run holds the epoch taken. ``skip_locked``
    (a sweep's): a row another transaction holds is skipped, not waited
    for."""
    now = timezone.now()
    runs = Run.objects.filter(pk=run_id, status=Run.Status.RUNNING)
    runs = runs.filter(heartbeat_at=heartbeat_at) if heartbeat_at is not None else runs.filter(_expired(now - _lease()))
    with transaction.atomic():
        # A sweep skips a row another transaction holds (a writer of a
        # process paused in the middle of its write) rather than wait: the
        # renewer must not hang on a frozen process, nor the renewals of
        # its own runs behind it. A stop or a new turn waits for it.
        if skip_locked and not runs.select_for_update(skip_locked=True).values_list("pk", flat=True):
            return None
        if not runs.update(heartbeat_at=now, lease_epoch=F("lease_epoch") + 1):
            return None
    return Run.objects.select_related("message").get(pk=run_id)


def _store_settled(run: Run, published: list[Chunk] | None, error_text: str) -> tuple[list[Chunk], int]:
    """Steps 2-4, in one transaction: complete the log from ``published``
    (the broker's stream), close it with a terminal chunk, rebuild the
    message, store the run ``interrupted``. Returns everything the log
    holds now and how many chunks came from the stream. Synchronous."""
    with transaction.atomic():
        held = Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.RUNNING, lease_epoch=run.lease_epoch)
        if not held.exists():
            return [], 0  # its own process ended it meanwhile, after all, or another claimant took it
        log = [entry.chunk for entry in iter_log(run)]
        recovered = published[len(log) :] if published is not None and len(published) > len(log) else []
        complete = log + recovered
        terminal: list[Chunk] = []
        if not complete or complete[-1].get("type") not in TERMINAL_CHUNKS:
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
        ended: dict[str, Any] = {
            "status": Run.Status.INTERRUPTED,
            "error_code": INTERRUPTED_CODE,
            "error_detail": "The process that ran it stopped renewing its lease before the run ended.",
        }
        if terminal:
            # The answer did not finish: say so in ai@7's words (a log that
            # ends with a ``finish`` keeps that finish's reason).
            ended["finish_reason"] = INTERRUPTED_FINISH_REASON
        elif complete[-1].get("type") == "finish":
            # Its process stored the answer's end, then died before its
            # outcome: the answer is whole (what its clients and ai@7 read),
            # so the run completed; only what the outcome held (usage) is lost.
            reason = complete[-1].get("finishReason")
            ended = {"status": Run.Status.COMPLETED, "error_code": "", "error_detail": ""}
            if isinstance(reason, str):
                ended["finish_reason"] = reason[: Run._meta.get_field("finish_reason").max_length or None]
        Run.objects.filter(pk=run.pk).update(**ended, finished_at=now, chunk_count=len(complete))
        stored = stored_message(run)
        if stored is not None:
            message, held_from = stored
            built = _rebuild(message, complete[held_from:], run.pk)
            Message.objects.filter(pk=message.pk).update(parts=built["parts"], metadata=built.get("metadata"))
        Conversation.objects.filter(pk=run.conversation_id).update(updated_at=now)
    return complete, len(recovered)


#: ``Run.turn``'s key for how many of the run's log chunks its stored
#: message holds already: a continuation stores the message built from the
#: log so far, mid-run (``continuation``); a rebuild reads only the rest.
MESSAGE_FROM = "message_from"


def stored_message(run: Run) -> tuple[Message, int] | None:
    """``run``'s message as stored now, and how many of its log's chunks it
    holds already (``MESSAGE_FROM``; 0: none, it is the message as it was
    before the run). Read afresh: a continuation may have stored both
    since ``run`` was read. Synchronous, in the caller's transaction."""
    message = Message.objects.filter(pk=run.message_id).first() if run.message_id is not None else None
    if message is None:
        return None
    turn = Run.objects.filter(pk=run.pk).values_list("turn", flat=True).first()
    held = turn.get(MESSAGE_FROM, 0) if isinstance(turn, dict) else 0
    return message, held if isinstance(held, int) else 0


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


async def settle(
    run_id: str, *, heartbeat_at: datetime | None = None, may_continue: bool = False, skip_locked: bool = False
) -> Settled | None:
    """Settle one orphan (the module docstring's steps); None when it is no
    orphan (any more): alive, settled already, or taken by another
    sweeper. ``heartbeat_at``: settle it if its heartbeat is still this
    one (a stop that saw it overdue), instead of older than the lease.
    ``may_continue`` (a sweep's): with ``ON_OWNER_LOST = "continue"`` the
    run goes on here instead, when it can (``continuation``).
    ``skip_locked``: skip a run whose row another transaction holds."""
    if any(handle.run_id == run_id for handle in live_runs()):
        return None  # it runs here: late renewals, not a dead process
    run = await sync_to_async(_claim)(run_id, heartbeat_at, skip_locked)
    if run is None:
        return None
    broker = get_broker()
    fence = getattr(broker, "fence_orphan", None)
    if fence is not None:
        # Chunks its lost process still publishes are refused from here on:
        # what is read next is all the clients can ever get of it.
        await fence(run_id)
    published = await broker.published(run_id)
    if may_continue and _continuer is not None and uistream_settings.ON_OWNER_LOST == "continue":
        try:
            if await _continuer(run, published):
                logger.warning("run %s was orphaned; it goes on in this process", run_id)
                count = await Run.objects.filter(pk=run_id).values_list("chunk_count", flat=True).afirst()
                return Settled(run_id, str(run.conversation_id), 0, count or 0, continued=True)
        except Exception:  # it is settled instead: never left running
            logger.exception("could not continue orphaned run %s; settling it as interrupted", run_id)
            # The turn path may have taken the run under a newer epoch of
            # this process's (``ConversationStore.load``): settle under it.
            epoch = await Run.objects.filter(pk=run_id).values_list("lease_epoch", flat=True).afirst()
            run.lease_epoch = epoch if epoch is not None else run.lease_epoch
        published = await broker.published(run_id)  # the continuer may have added to it
    error_text = uistream_settings.ERROR_TEXT
    complete, recovered = await sync_to_async(_store_settled)(run, published, error_text)
    if not complete:
        return None
    first_seq = len(published) if published is not None else len(complete)
    await broker.end_orphan(str(run.conversation_id), run_id, complete[first_seq:], first_seq)
    ended = "completed: its log ends with its finish" if complete[-1].get("type") == "finish" else "interrupted"
    logger.warning("run %s was orphaned; settled as %s (%d chunks recovered)", run_id, ended, recovered)
    return Settled(run_id, str(run.conversation_id), recovered, len(complete))


async def sweep(ids: list[str] | None = None, *, may_continue: bool = False) -> list[Settled]:
    """Settle every orphan there is now (or those of ``ids`` that are).
    ``may_continue``: the sweep of a serving process's renewer, whose event
    loop lives as long as the process: with ``ON_OWNER_LOST = "continue"``
    an orphan goes on there (a command's sweep only settles)."""
    if ids is None:
        ids = await sync_to_async(orphan_ids)()
    settled = []
    for run_id in ids:
        try:
            done = await settle(run_id, may_continue=may_continue, skip_locked=True)
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
            if await settle(str(run.pk), heartbeat_at=seen) is not None:
                return True
            # Another claimant took it meanwhile (a sweep): it settles the
            # run, or goes on with it, where the stop request reaches it.
            return await _ends_within(run.pk, 2 * heartbeat, poll)
        await asyncio.sleep(poll)


async def _ends_within(run_id: Any, seconds: float, poll: float) -> bool:
    """Whether the run is no longer ``running`` within ``seconds``."""
    deadline = timezone.now() + timedelta(seconds=seconds)
    while timezone.now() < deadline:
        status = await Run.objects.filter(pk=run_id).values_list("status", flat=True).afirst()
        if status != Run.Status.RUNNING:
            return True
        await asyncio.sleep(poll)
    return False


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


#: The renewer's database thread: its connection is the renewer's alone.
_LEASE_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uistream-lease")


def _renew_forever() -> None:
    # One event loop for the process's life: a sweep's broker client (the
    # Redis broker keeps one per loop) is made once, not once per sweep.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(_tend())


async def _tend() -> None:
    """Renew, then sweep, every ``HEARTBEAT_SECONDS``, for ever."""
    async with ThreadSensitiveContext(executor=_LEASE_EXECUTOR):
        while True:
            try:
                await sync_to_async(renew_live_runs)()
                orphans = await sync_to_async(orphan_ids)()
                if orphans:
                    await sweep(orphans, may_continue=True)
            except Exception:  # the renewer must outlive a database hiccup
                logger.exception("could not renew the leases of this process's runs")
            finally:
                await sync_to_async(close_old_connections)()
            await asyncio.sleep(uistream_settings.HEARTBEAT_SECONDS)
