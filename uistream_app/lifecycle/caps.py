"""Owner caps: how many runs one owner may have running at once, and how
many bytes their turns may store per day (docs/operations.md, "Owner
caps"). On by default, for every transport: ``ConversationStore.prepare``
applies them, which every turn passes (the useChat POST, WebSocket sends,
AG-UI runs), whatever the endpoint's throttle classes are.

Both are counted from the database. Running runs: the ``Run`` rows still
``running`` of the owner's conversations (an indexed status, and few
rows), counted in the transaction that creates the new run's row, after
it, so a refusal rolls the row back and writes nothing. Stored bytes: the
``Run.stored_bytes`` of the owner's runs started today (the calendar day
in ``TIME_ZONE``), plus what this turn would store, checked before its
files are written.

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
from typing import Any

import orjson
from django.db.models import Sum
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
        day resets. Sync (one aggregate query); call before writing."""
        limit = self.stored_bytes_per_day
        if limit is None or adding <= 0 or not self.owner.is_known:
            return
        now = timezone.now()
        start, end = period_bounds("day", now)
        stored = (
            Run.objects.owned_by(self.owner)
            .filter(started_at__gte=start, started_at__lt=end)
            .aggregate(total=Sum("stored_bytes"))["total"]
            or 0
        )
        if stored + adding <= limit:
            return
        seconds = max(1, math.ceil((end - now).total_seconds()))
        setting = f"MAX_STORED_BYTES_PER_{self._kind.upper()}_PER_DAY"
        raise Throttled(
            f"storage cap reached: this turn would store {adding} bytes, and {stored} of the day's {limit} "
            f"are stored (UISTREAM[{setting!r}]); it resets at {end.isoformat()}",
            code=Codes.BUDGET_EXCEEDED,
            headers={"Retry-After": str(seconds)},
            details={"budget": "day:stored_bytes", "resets_at": end.isoformat()},
        )

    def check_active_runs(self) -> None:
        """Refuse a turn whose run would be one too many running at once:
        429 ``throttled``. Sync; call in the transaction that created the
        run's row, after it (the count includes it), so the refusal rolls
        it back."""
        limit = self.active_runs
        if limit is None or not self.owner.is_known:
            return
        running = Run.objects.owned_by(self.owner).filter(status=Run.Status.RUNNING).count()
        if running <= limit:
            return
        setting = f"MAX_ACTIVE_RUNS_PER_{self._kind.upper()}"
        raise Throttled(
            f"too many runs at once: at most {limit} of yours may run at the same time (UISTREAM[{setting!r}]); "
            "try again when one has ended",
            details={"limit": "active_runs", "allowed": limit},
        )
