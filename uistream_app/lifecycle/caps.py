"""Owner caps: how many runs one owner may have running at once, and how
many bytes their turns may store per day (docs/operations.md, "Owner
caps"). On by default, for every transport: ``ConversationStore.prepare``
applies them, which every turn passes (the useChat POST, WebSocket sends,
AG-UI runs), whatever the endpoint's throttle classes are.

Both are counted from the database, in one query (``check_turn``) in the
transaction that creates the new run's row, after it, so the counts hold
the new run and a refusal rolls the row back and writes nothing. Running
runs: the ``Run`` rows still ``running`` of the owner's conversations (an
indexed status, and few rows). Stored bytes: the ``Run.stored_bytes`` of
the owner's runs started today (the calendar day in ``TIME_ZONE``), the
new run's included. A turn with files is also checked before its files
are written (``check_stored_bytes``), so a refused one writes no file.

Two turns of one owner whose transactions overlap (two processes, or two
lanes of one) can each miss the other's row, not yet committed: the
running cap is then passed by at most the turns that commit together. A session is shed by dropping its
cookie, so the session caps bound a visitor who keeps it; a throttle by
address (``policies.ChatRateThrottle``) bounds one who doesn't (check W041).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from django.db.models import Count, Q, Sum
from django.utils import timezone

from ..conf import settings as uistream_settings
from ..errors import Codes, Throttled
from ..models import Run
from ..owners import Owner
from .spend import period_bounds

__all__ = ["OwnerCaps", "stored_bytes_of"]


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
        day resets. Sync (one aggregate query); call before writing what
        ``check_turn`` would only find afterwards (a turn's files)."""
        limit = self.stored_bytes_per_day
        if limit is None or adding <= 0 or not self.owner.is_known:
            return
        start, end = period_bounds("day", timezone.now())
        today = Run.objects.owned_by(self.owner).filter(started_at__gte=start, started_at__lt=end)
        self._refuse_stored(today.aggregate(total=Sum("stored_bytes"))["total"] or 0, adding, end)

    def check_turn(self, adding: int) -> None:
        """Both caps for a turn whose ``Run`` row was just created (in this
        transaction) storing ``adding`` bytes: refuse one run too many at
        once (429 ``throttled``) or a day's storage past its cap (429
        ``budget_exceeded``). One query, whose counts hold the new row; call
        it in the transaction that created the row, so a refusal rolls it
        back."""
        if not self.owner.is_known:
            return
        counts: dict[str, Any] = {}
        rows = Q()
        if self.active_runs is not None:
            running = Q(status=Run.Status.RUNNING)
            counts["running"] = Count("pk", filter=running)
            rows |= running
        end = None
        if self.stored_bytes_per_day is not None and adding > 0:
            start, end = period_bounds("day", timezone.now())
            today = Q(started_at__gte=start, started_at__lt=end)
            counts["stored"] = Sum("stored_bytes", filter=today)
            rows |= today
        if not counts:
            return
        found = Run.objects.owned_by(self.owner).filter(rows).aggregate(**counts)
        if self.active_runs is not None and (found["running"] or 0) > self.active_runs:
            self._refuse_running()
        if end is not None:
            # The total holds the new row's ``adding``.
            self._refuse_stored((found["stored"] or 0) - adding, adding, end)

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
