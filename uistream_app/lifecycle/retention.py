"""Retention: what ``manage.py uistream_prune`` deletes, and what it keeps
(docs/operations.md, "Feedback, attempts and retention").

Every attempt is kept (``lifecycle.branches``) and every run's chunk log
too, so without limits the tables only grow. ``UISTREAM["RETENTION"]``
sets two, in days (None: forever):

* ``CHUNK_LOGS_DAYS``: the chunk log (``ChunkBatch`` rows) of a run that
  ended longer ago. The run and its message stay: a run whose log is gone
  is read from its stored message (the inspector says the log was pruned;
  a stored answer asked for as a stream replays its parts).
* ``OLD_BRANCHES_DAYS``: the messages off the current branch that left it
  longer ago, with their runs (and those runs' logs) and files.

Whatever the limits, the owners' days before yesterday (``OwnerDay``: the
storage cap's count, which only reads today's) go too; an owner's own go
at their first turn of a day, these are the owners who did not come back.

The rules ``Pruner`` keeps:

1. A ``running`` run is never touched: not its log, not its message, and
   so not the branch above that message.
2. Feedback marks what stays. A run with feedback (``Feedback.run``), or
   whose answer has feedback, keeps its log; an old-branch message with
   feedback stays, with its ancestors, so its branch still reads as the
   conversation did when it was rated.
3. Old branches are found by their ``parent_key`` links, never by
   position alone: a row off the current branch whose parent is on it (or
   which has none) roots a subtree of rows off it, its own descendants.
   Such a subtree is old when everything bounding the time it left the
   branch is older than the limit: the time its current sibling (the
   version that took its place) was last selected, and the time each of
   its rows was last selected. So a branch is never pruned sooner than
   ``OLD_BRANCHES_DAYS`` after it left, whatever switches happened since.
4. A file is deleted with its message (``StoredFile.message`` cascades),
   so one that a doomed message holds but a kept message's parts point at
   moves to that message first. An edit moves the files it resends to the
   new version itself (``ConversationStore._submit``); switching back to
   the older version (``branches.switch_to``) moves nothing, and then the
   file sits on the newer version, which may be the one pruned.
5. Rows are deleted ``batch`` a query (500 by default). A conversation's
   branches are pruned in one transaction that holds its row, as every
   writer of branches does, so a switch to a branch being pruned waits for
   it, then finds it gone.

``dry_run`` counts what would go and changes nothing. Synchronous: run it
from a management command or a worker, never on an event loop.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from ..conf import Retention
from ..models import ChunkBatch, Conversation, Feedback, Message, OwnerDay, Run, StoredFile

# Its post_delete receiver deletes a pruned file's bytes from storage.
from . import attachments  # noqa: F401

__all__ = ["BATCH", "BranchRow", "PruneReport", "Pruner", "old_branch_rows"]

#: Rows deleted (or counted) a query.
BATCH: Final = 500


@dataclass
class PruneReport:
    """What a prune deleted, or with ``dry_run`` would delete, by count."""

    dry_run: bool = False
    #: ``CHUNK_LOGS_DAYS``: the log rows deleted and the runs they were of.
    chunk_log_rows: int = 0
    chunk_log_runs: int = 0
    #: ``OLD_BRANCHES_DAYS``: the messages, their runs and those runs' log rows.
    messages: int = 0
    runs: int = 0
    run_log_rows: int = 0
    conversations: int = 0
    #: Files deleted with their message, and files moved to a kept message first (rule 4).
    files: int = 0
    files_moved: int = 0
    #: The owners' days before yesterday (whatever the limits).
    owner_days: int = 0

    def lines(self, retention: Retention) -> list[str]:
        """The report as the command prints it, one line per limit set."""
        verb = "would delete" if self.dry_run else "deleted"
        out = []
        if retention.old_branches_days is not None:
            moved = self.files_moved
            out.append(
                f"old branches (off the current branch for over {_days(retention.old_branches_days)}): {verb} "
                f"{_n(self.messages, 'message')} in {_n(self.conversations, 'conversation')}, "
                f"{_n(self.runs, 'run')} ({_n(self.run_log_rows, 'chunk log row')}), {_n(self.files, 'file')}"
                + (
                    f"; {'would move' if self.dry_run else 'moved'} {_n(moved, 'file')} to a kept message"
                    if moved
                    else ""
                )
            )
        if retention.chunk_logs_days is not None:
            out.append(
                f"chunk logs (of runs ended over {_days(retention.chunk_logs_days)} ago): {verb} "
                f"{_n(self.chunk_log_rows, 'row')} of {_n(self.chunk_log_runs, 'run')}"
            )
        if self.owner_days:
            out.append(f"owners' days before yesterday (the storage cap's count): {verb} {_n(self.owner_days, 'row')}")
        return out


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _days(days: float) -> str:
    return f"{days:g} day{'' if days == 1 else 's'}"


class BranchRow(NamedTuple):
    """What the tree of a conversation's messages needs of a row."""

    key: str
    parent_key: str
    position: int
    current: bool
    selected_at: dt.datetime
    created_at: dt.datetime


_ROW_FIELDS: Final = ("pk", "parent_key", "position", "current", "selected_at", "created_at")


def old_branch_rows(rows: Iterable[BranchRow], keep: set[str], cutoff: dt.datetime) -> list[str]:
    """The keys of ``rows`` (one conversation's messages) to prune: the
    rows of old branches (rule 3) but those in ``keep`` and their
    ancestors (rules 1 and 2). Whatever it returns is closed under
    descendants: a pruned row's children are pruned too. No database."""
    by_key = {row.key: row for row in rows}
    children: dict[str, list[BranchRow]] = defaultdict(list)
    current_at: dict[int, BranchRow] = {}
    for row in by_key.values():
        children[row.parent_key].append(row)
        if row.current:
            current_at[row.position] = row
    doomed: list[str] = []
    for root in by_key.values():
        parent = by_key.get(root.parent_key)
        if root.current or (parent is not None and not parent.current):
            continue  # on the branch, or inside another root's subtree
        subtree, hangs_current = _subtree(root, children)
        left_by = max(max(r.selected_at, r.created_at) for r in subtree)
        sibling = current_at.get(root.position)
        if sibling is not None:
            left_by = max(left_by, sibling.selected_at)
        if left_by >= cutoff:
            continue
        inside = {r.key for r in subtree}
        kept: set[str] = set()
        for row in subtree:
            if row.key in keep or row.key in hangs_current:
                key = row.key
                while key in inside and key not in kept:
                    kept.add(key)
                    key = by_key[key].parent_key
        doomed.extend(r.key for r in subtree if r.key not in kept)
    return doomed


def _subtree(root: BranchRow, children: dict[str, list[BranchRow]]) -> tuple[list[BranchRow], set[str]]:
    """``root`` and its descendants off the current branch, and the keys
    among them with a current child (none, as ``switch_to`` keeps the
    branch: a current row's ancestors are current; kept all the same)."""
    found: list[BranchRow] = []
    hangs_current: set[str] = set()
    seen = {root.key}
    stack = [root]
    while stack:
        row = stack.pop()
        found.append(row)
        for child in children.get(row.key, ()):
            if child.current:
                hangs_current.add(row.key)
            elif child.key not in seen:
                seen.add(child.key)
                stack.append(child)
    return found, hangs_current


def _chunks(keys: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(keys), size):
        yield keys[start : start + size]


class Pruner:
    """Deletes what ``retention`` no longer keeps, ``batch`` rows a query
    (the module docstring's rules). ``now`` is for tests."""

    def __init__(
        self,
        retention: Retention,
        *,
        dry_run: bool = False,
        batch: int = BATCH,
        now: dt.datetime | None = None,
    ) -> None:
        self.retention = retention
        self.dry_run = dry_run
        self.batch = batch
        self.now = now or timezone.now()

    def prune(self) -> PruneReport:
        """Old branches first (their runs' logs go with them), then the logs of old runs."""
        report = PruneReport(dry_run=self.dry_run)
        doomed_runs: set[Any] = set()
        if self.retention.old_branches_days is not None:
            cutoff = self.now - dt.timedelta(days=self.retention.old_branches_days)
            doomed_runs = self.prune_branches(cutoff, report)
        if self.retention.chunk_logs_days is not None:
            cutoff = self.now - dt.timedelta(days=self.retention.chunk_logs_days)
            # In a dry run the doomed branches' runs are still there: not counted twice.
            self.prune_chunk_logs(cutoff, report, skip=doomed_runs)
        self.prune_owner_days(report)
        return report

    def prune_owner_days(self, report: PruneReport) -> None:
        """The ``OwnerDay`` rows of days before yesterday (in the current time zone)."""
        today = timezone.localtime(self.now).date()
        old = OwnerDay.objects.filter(day__lt=today - dt.timedelta(days=1))
        report.owner_days = old.count() if self.dry_run else old.delete()[0]

    # -- chunk logs --------------------------------------------------------------

    def runs_with_old_logs(self, cutoff: dt.datetime) -> QuerySet[Run]:
        """Runs that ended before ``cutoff``, have a log, and that nothing
        marks (rules 1 and 2)."""
        ended_before = Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, started_at__lt=cutoff)
        rated = Exists(Feedback.objects.filter(run=OuterRef("pk"))) | Exists(
            Feedback.objects.filter(message_id=OuterRef("message_id"))
        )
        return (
            Run.objects.exclude(status=Run.Status.RUNNING)
            .filter(ended_before)
            .filter(~rated)
            .filter(Exists(ChunkBatch.objects.filter(run=OuterRef("pk"))))
        )

    def prune_chunk_logs(
        self, cutoff: dt.datetime, report: PruneReport, *, skip: AbstractSet[Any] = frozenset()
    ) -> None:
        """The logs of ``runs_with_old_logs``, a page of runs at a time (by key)."""
        eligible = self.runs_with_old_logs(cutoff).order_by("pk").values_list("pk", flat=True)
        last = None
        while True:
            page = eligible if last is None else eligible.filter(pk__gt=last)
            ids = list(page[: self.batch])
            if not ids:
                return
            last = ids[-1]
            ids = [pk for pk in ids if pk not in skip]
            report.chunk_log_rows += self._delete_logs(ids)
            report.chunk_log_runs += len(ids)

    def _delete_logs(self, run_ids: Sequence[Any]) -> int:
        """The log rows of ``run_ids``, deleted ``batch`` a query; how many."""
        if not run_ids:
            return 0
        rows = ChunkBatch.objects.filter(run_id__in=run_ids)
        if self.dry_run:
            return rows.count()
        deleted = 0
        while True:
            keys = list(rows.order_by().values_list("pk", flat=True)[: self.batch])
            if not keys:
                return deleted
            deleted += ChunkBatch.objects.filter(pk__in=keys).delete()[0]

    # -- old branches ------------------------------------------------------------

    def prune_branches(self, cutoff: dt.datetime, report: PruneReport) -> set[Any]:
        """Every conversation with a row off its branch selected before
        ``cutoff``, pruned in turn; returns the runs deleted (or to be)."""
        candidates = (
            Message.objects.filter(current=False, selected_at__lt=cutoff)
            .order_by("conversation_id")
            .values_list("conversation_id", flat=True)
            .distinct()
        )
        doomed_runs: set[Any] = set()
        last = None
        while True:
            page = candidates if last is None else candidates.filter(conversation_id__gt=last)
            keys = list(page[: self.batch])
            if not keys:
                return doomed_runs
            last = keys[-1]
            for key in keys:
                doomed_runs |= self.prune_conversation(key, cutoff, report)

    def prune_conversation(self, conversation_id: str, cutoff: dt.datetime, report: PruneReport) -> set[Any]:
        """One conversation's old branches (rules 1–5); returns their runs."""
        with transaction.atomic():
            locked = Conversation.objects.filter(pk=conversation_id)
            if not self.dry_run:
                locked = locked.select_for_update()
            if not locked.values_list("pk", flat=True).first():
                return set()
            rows = [
                BranchRow(*values)
                for values in Message.objects.filter(conversation_id=conversation_id).values_list(*_ROW_FIELDS)
            ]
            keep = set(
                Feedback.objects.filter(message__conversation_id=conversation_id).values_list("message_id", flat=True)
            )
            keep.update(
                Run.objects.filter(conversation_id=conversation_id, status=Run.Status.RUNNING)
                .exclude(message_id=None)
                .values_list("message_id", flat=True)
            )
            doomed = old_branch_rows(rows, keep, cutoff)
            if not doomed:
                return set()
            run_ids = [
                pk
                for chunk in _chunks(doomed, self.batch)
                for pk in Run.objects.filter(message_id__in=chunk).values_list("pk", flat=True)
            ]
            report.conversations += 1
            report.messages += len(doomed)
            report.runs += len(run_ids)
            self._keep_referenced_files(conversation_id, doomed, report)
            for chunk in _chunks(run_ids, self.batch):
                report.run_log_rows += self._delete_logs(chunk)
                if not self.dry_run:
                    Run.objects.filter(pk__in=chunk).delete()
            if not self.dry_run:
                for chunk in _chunks(doomed, self.batch):
                    Message.objects.filter(pk__in=chunk).delete()
            return set(run_ids)

    def _keep_referenced_files(self, conversation_id: str, doomed: Sequence[str], report: PruneReport) -> None:
        """Rule 4: each file of a doomed message that a kept message's parts
        name moves to that message (the current branch's first); the rest
        go with their message."""
        doomed_keys = set(doomed)
        for chunk in _chunks(doomed, self.batch):
            for file_id in StoredFile.objects.filter(message_id__in=chunk).values_list("pk", flat=True):
                # A stored part names its file by URL, which ends in the id.
                naming = (
                    Message.objects.filter(conversation_id=conversation_id, parts__icontains=str(file_id))
                    .order_by("-current", "-selected_at")
                    .values_list("pk", flat=True)
                )
                target = next((key for key in list(naming) if key not in doomed_keys), None)
                if target is None:
                    report.files += 1
                    continue
                report.files_moved += 1
                if not self.dry_run:
                    StoredFile.objects.filter(pk=file_id).update(message_id=target)
