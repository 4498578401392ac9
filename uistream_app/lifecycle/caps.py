"""Owner caps: how many runs one owner may have running at once, and how
many bytes their turns may store per day (docs/operations.md, "Owner
caps"). On by default, for every transport: ``ConversationStore.prepare``
applies them, which every turn passes (the useChat POST, WebSocket sends,
AG-UI runs), whatever the endpoint's throttle classes are.

Both are counted in the transaction that creates the new run's row, after
it, so the counts hold the new run and a refusal rolls the row back and
writes nothing (``check_turn``). Running runs: the ``Run`` rows still
``running`` of the owner's conversations (an indexed status, and few
rows). Stored bytes: the owner's ``OwnerDay`` row of the day the new run
started (the calendar day in ``TIME_ZONE``), which the same statement adds
the run's ``stored_bytes`` to and reads back. It holds what the sum of the
``stored_bytes`` of the owner's runs started that day would (as it was
counted before, run by run), at one row's cost however many runs the day
had: every run's bytes are added to it as the run's row is created, and a
run's row deleted on its own day takes them back out (``_give_back``).
A turn with files is also checked before its files are written
(``check_stored_bytes``), so a refused one writes no file.

Two turns of one owner whose transactions overlap (two processes, or two
lanes of one) can each miss the other's row, not yet committed: the
running cap is then passed by at most the turns that commit together (the
day's row is locked by the first to add to it, so the storage cap is not).
A session is shed by dropping its cookie, so the session caps bound a
visitor who keeps it; a throttle by address (``policies.ChatRateThrottle``)
bounds one who doesn't (check W041).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Final

import orjson
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.db.models.signals import pre_delete
from django.dispatch import receiver
from django.utils import timezone

from ..conf import settings as uistream_settings
from ..errors import Codes, Throttled
from ..models import Conversation, OwnerDay, Run, owned_sql
from ..owners import Owner
from .spend import period_bounds

__all__ = ["OwnerCaps", "add_stored_bytes", "stored_bytes_of"]


def stored_bytes_of(message: Mapping[str, Any], file_bytes: int = 0) -> int:
    """What storing ``message`` (its parts and metadata, as JSON) and its
    files (``file_bytes``, decoded) takes, in bytes. A file part's
    ``data:`` URL counts as nothing: its bytes are the file's, and the part
    is stored pointing at the file's URL instead; so the count is the same
    before the files are written and after."""
    parts = [_without_data_url(part) for part in message.get("parts") or []]
    size = len(orjson.dumps(parts))
    metadata = message.get("metadata")
    if metadata is not None:
        size += len(orjson.dumps(metadata))
    return size + file_bytes


def _without_data_url(part: Any) -> Any:
    if isinstance(part, dict) and isinstance(part.get("url"), str) and part["url"].startswith("data:"):
        return {key: value for key, value in part.items() if key != "url"}
    return part


@dataclass(frozen=True)
class OwnerCaps:
    """One owner's caps (None: no cap), from ``UISTREAM``: a user's
    (``MAX_ACTIVE_RUNS_PER_USER``, ``MAX_STORED_BYTES_PER_USER_PER_DAY``) or
    an anonymous session's (``…_PER_SESSION…``)."""

    owner: Owner
    active_runs: int | None
    stored_bytes_per_day: int | None

    @classmethod
    def of(cls, owner: Owner) -> OwnerCaps:
        if owner.is_user:
            return cls(
                owner,
                uistream_settings.MAX_ACTIVE_RUNS_PER_USER,
                uistream_settings.MAX_STORED_BYTES_PER_USER_PER_DAY,
            )
        return cls(
            owner,
            uistream_settings.MAX_ACTIVE_RUNS_PER_SESSION,
            uistream_settings.MAX_STORED_BYTES_PER_SESSION_PER_DAY,
        )

    @property
    def _kind(self) -> str:
        return "user" if self.owner.is_user else "session"

    def check_stored_bytes(self, adding: int) -> None:
        """Refuse a turn that would store ``adding`` bytes past the day's
        cap: 429 ``budget_exceeded``, ``Retry-After`` the seconds until the
        day resets. Sync (one query: the owner's row of the day); call
        before writing what ``check_turn`` would only find afterwards (a
        turn's files)."""
        limit = self.stored_bytes_per_day
        if limit is None or adding <= 0 or not self.owner.is_known:
            return
        day, end = _day_of(timezone.now())
        stored = (
            OwnerDay.objects.filter(owner_key=self.owner.row_key, day=day)
            .values_list("stored_bytes", flat=True)
            .first()
        )
        self._refuse_stored(stored or 0, adding, end)

    def check_turn(self, run: Run) -> None:
        """Both caps for ``run``, whose row was just created (in this
        transaction) for a turn that stores ``run.stored_bytes``: refuse one
        run too many at once (429 ``throttled``) or a day's storage past its
        cap (429 ``budget_exceeded``). Adds the run's bytes to its owner's
        day (whether a cap is set or not, so that one set later counts the
        day from its start) and counts the owner's running runs (if that cap
        is set), on SQLite and PostgreSQL in one statement
        (``add_stored_bytes``); call it in the transaction that created the
        row, so a refusal rolls both back."""
        if not self.owner.is_known:
            return
        adding = run.stored_bytes
        limit = self.active_runs
        running: int | None = None
        if adding > 0:
            day, end = _day_of(run.started_at)
            stored, running = add_stored_bytes(self.owner, day, adding, count_running=limit is not None)
        elif limit is not None:
            running = _running_of(self.owner)
        if limit is not None and running is not None and running > limit:
            self._refuse_running()
        if adding > 0:
            if stored == adding:
                # The owner's first turn of the day (or of a day emptied by
                # deletions): the rows of their days before yesterday go.
                _forget_days_before(self.owner.row_key, day - timedelta(days=1))
            # The total holds the new run's ``adding``.
            self._refuse_stored(stored - adding, adding, end)

    def _refuse_running(self) -> None:
        limit = self.active_runs
        setting = f"MAX_ACTIVE_RUNS_PER_{self._kind.upper()}"
        raise Throttled(
            f"too many runs at once: at most {limit} of yours may run at the same time (UISTREAM[{setting!r}]); "
            "try again when one has ended",
            details={"limit": "active_runs", "allowed": limit},
        )

    def _refuse_stored(self, stored: int, adding: int, end: datetime) -> None:
        """Refuse unless ``stored`` (today's, before this turn) and ``adding`` fit the day's cap."""
        limit = self.stored_bytes_per_day
        if limit is None or stored + adding <= limit:
            return
        seconds = max(1, math.ceil((end - timezone.now()).total_seconds()))
        setting = f"MAX_STORED_BYTES_PER_{self._kind.upper()}_PER_DAY"
        raise Throttled(
            f"storage cap reached: this turn would store {adding} bytes, and {stored} of the day's {limit} "
            f"are stored (UISTREAM[{setting!r}]); it resets at {end.isoformat()}",
            code=Codes.BUDGET_EXCEEDED,
            headers={"Retry-After": str(seconds)},
            details={"budget": "day:stored_bytes", "resets_at": end.isoformat()},
        )


def _day_of(at: datetime) -> tuple[date, datetime]:
    """The calendar day (in the current time zone) holding ``at``, and when it ends."""
    start, end = period_bounds("day", at)
    return start.date(), end


#: Backends whose upsert adds to a row and returns it in one statement.
_UPSERT_RETURNING: Final = frozenset({"sqlite", "postgresql"})


def add_stored_bytes(owner: Owner, day: date, adding: int, *, count_running: bool = False) -> tuple[int, int | None]:
    """Add ``adding`` to ``owner``'s ``OwnerDay`` row of ``day``, made if
    there is none, and return its total (``adding`` included) and, with
    ``count_running``, how many of the owner's runs are ``running`` (else
    None). On SQLite and PostgreSQL one statement: an ``INSERT … ON
    CONFLICT DO UPDATE … RETURNING``, which the ORM does not write (its
    upsert sets a value, it does not add to one), whose row stays locked
    until the transaction ends, returning the count beside the total.
    Elsewhere the ORM's update, insert, read and count."""
    key = owner.row_key
    # SQLite returns rows from 3.35 on (Django supports older ones).
    if connection.vendor not in _UPSERT_RETURNING or not connection.features.can_return_columns_from_insert:
        return _add_stored_bytes_orm(key, day, adding), (_running_of(owner) if count_running else None)
    quote = connection.ops.quote_name
    table = quote(OwnerDay._meta.db_table)
    params = [key, OwnerDay._meta.get_field("day").get_db_prep_value(day, connection), adding, adding]
    running = ""
    if count_running:
        count, count_params = _running_sql(owner)
        running = f", ({count})"
        params += count_params
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (owner_key, day, stored_bytes) VALUES (%s, %s, %s) "
            f"ON CONFLICT (owner_key, day) DO UPDATE SET stored_bytes = {table}.stored_bytes + %s "
            f"RETURNING stored_bytes{running}",
            params,
        )
        row = cursor.fetchone()
    return int(row[0]), (int(row[1]) if count_running else None)


def _forget_days_before(owner_key: str, day: date) -> None:
    """Delete ``owner_key``'s ``OwnerDay`` rows of the days before ``day``.
    One ``DELETE`` written out: a new owner's first turn has none to delete,
    and the ORM's ``delete()`` (its collector, the query's building) cost
    several times the statement on that path (docs/benchmarks.md, "Issue
    29's targets, one by one")."""
    quote = connection.ops.quote_name
    fields = OwnerDay._meta
    day_field = fields.get_field("day")
    owner_column, day_column = quote(str(fields.get_field("owner_key").column)), quote(str(day_field.column))
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {quote(fields.db_table)} WHERE {owner_column} = %s AND {day_column} < %s",
            [owner_key, day_field.get_db_prep_value(day, connection)],
        )


def _add_stored_bytes_orm(owner_key: str, day: date, adding: int) -> int:
    rows = OwnerDay.objects.filter(owner_key=owner_key, day=day)
    if not rows.update(stored_bytes=F("stored_bytes") + adding):
        try:
            with transaction.atomic():
                OwnerDay.objects.create(owner_key=owner_key, day=day, stored_bytes=adding)
            return adding
        except IntegrityError:  # another turn of the owner's made it meanwhile
            rows.update(stored_bytes=F("stored_bytes") + adding)
    return int(rows.values_list("stored_bytes", flat=True).get())


def _running_of(owner: Owner) -> int:
    return Run.objects.owned_by(owner).filter(status=Run.Status.RUNNING).count()


def _running_sql(owner: Owner) -> tuple[str, list[Any]]:
    """``_running_of`` as SQL to nest in the upsert: the rows
    ``Run.objects.owned_by(owner)`` selects (``Owner.filter_kwargs``) that
    are ``running``. Written out because the ORM's own building of that
    query cost more than the statement (bench/request_floor.py)."""
    quote = connection.ops.quote_name

    def column(model: Any, name: str) -> str:
        return quote(str(model._meta.get_field(name).column))

    whose, params = owned_sql(owner, "c", connection)
    sql = (
        f"SELECT COUNT(*) FROM {quote(Run._meta.db_table)} r INNER JOIN {quote(Conversation._meta.db_table)} c "
        f"ON r.{column(Run, 'conversation')} = c.{column(Conversation, 'id')} "
        f"WHERE {whose} AND r.{column(Run, 'status')} = %s"
    )
    return sql, [*params, Run.Status.RUNNING.value]


@receiver(pre_delete, sender=Run, dispatch_uid="uistream_run_stored_bytes")
def _give_back(sender: Any, instance: Run, **kwargs: Any) -> None:
    """A run deleted on the day it started (its conversation deleted, the
    admin, retention) gives its stored bytes back to its owner's day, as
    the sum of the day's runs lost them when the cap summed runs. A run of
    an earlier day changes nothing: the cap only reads today's row."""
    if not instance.stored_bytes:
        return
    day, _ = _day_of(instance.started_at)
    if day < _day_of(timezone.now())[0]:
        return
    origin = kwargs.get("origin")
    if isinstance(origin, Conversation) and origin.pk == instance.conversation_id:
        owner: tuple[Any, str] | None = (origin.owner_id, origin.session_key)  # its conversation's deletion
    else:
        owner = Conversation.objects.filter(pk=instance.conversation_id).values_list("owner_id", "session_key").first()
    if owner is None:
        return
    OwnerDay.objects.filter(owner_key=Owner.row_key_of(*owner), day=day).update(
        stored_bytes=Greatest(F("stored_bytes") - instance.stored_bytes, Value(0))
    )
