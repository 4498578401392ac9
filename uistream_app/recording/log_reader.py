"""Reading a stored chunk log back: one ``LogEntry`` per chunk, in ``seq``
order. ``iter_log`` pages through a log by key, so a 20,000-chunk log is
never in memory at once; ``read_log`` takes a range, ``load_log`` the whole
log from an async caller. What the log holds and how it got there: see
docs/recording.md, "The chunk log".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async

from ..models import ChunkBatch, Run
from ..protocol.ui.chunks import Chunk

__all__ = ["LogEntry", "iter_log", "last_offset_ms", "load_log", "read_log"]


class LogEntry(NamedTuple):
    """One stored chunk: its number, its offset from the run's start, and
    the chunk itself."""

    seq: int
    offset_ms: int
    chunk: Chunk


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
