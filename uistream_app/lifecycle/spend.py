"""What owners spent: ``Run.usage`` totalled per owner and period, and
turned into cost by the price table (``UISTREAM["PRICES"]``).

The budgets (``policies.DailyBudget``, ``MonthlyBudget``), the admin's
usage report and the API's ``usage/`` read it (docs/operations.md, "Usage
limits and budgets"). Periods are calendar days and months in the
project's time zone (``TIME_ZONE``); a run counts in the period it started
in. Sums are done by the database, one row per model.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import BigIntegerField, Count, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from ..conf import settings as uistream_settings
from ..models import Run
from ..owners import Owner

__all__ = ["PERIODS", "Spend", "cost_of", "owner_label", "period_bounds", "spend_of", "usage_report"]

PERIODS = ("day", "month")


def period_bounds(period: str, at: datetime.datetime | None = None) -> tuple[datetime.datetime, datetime.datetime]:
    """The calendar ``period`` (``day`` or ``month``) holding ``at`` (now):
    its start, and its end (when it resets), in the current time zone."""
    if period not in PERIODS:
        raise ValueError(f"a budget period is one of {PERIODS}, not {period!r}")
    local = timezone.localtime(at or timezone.now()).replace(tzinfo=None)
    if period == "day":
        start = local.replace(hour=0, minute=0, second=0, microsecond=0)
        end = start + datetime.timedelta(days=1)
    else:
        start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = (start + datetime.timedelta(days=32)).replace(day=1)
    # Wall-clock bounds: a period across a daylight-saving change keeps them.
    tz = timezone.get_current_timezone()
    return timezone.make_aware(start, tz), timezone.make_aware(end, tz)


def cost_of(model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Any] | None = None) -> float:
    """What ``input_tokens`` and ``output_tokens`` of ``model`` cost by the
    price table (per million tokens). A model the table does not name costs
    nothing."""
    table = uistream_settings.PRICES if prices is None else prices
    price = table.get(model)
    if not price:
        return 0.0
    return (input_tokens * float(price.get("input", 0)) + output_tokens * float(price.get("output", 0))) / 1_000_000


@dataclass
class Spend:
    """What some runs used: their tokens, their cost, and how many of them
    still run (whose usage is not stored yet)."""

    runs: int = 0
    running: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    models: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, model: str, runs: int, running: int, input_tokens: int, output_tokens: int) -> None:
        cost = cost_of(model, input_tokens, output_tokens)
        self.runs += runs
        self.running += running
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost += cost
        self.models[model] = {
            "runs": runs,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost": cost,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "running": self.running,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "tokens": self.tokens,
            "cost": round(self.cost, 6),
        }


def _totals(runs: QuerySet[Run], group: Iterable[str]) -> QuerySet[Run, dict[str, Any]]:
    def tokens(name: str) -> Any:
        return Coalesce(Sum(Cast(KT(f"usage__{name}"), BigIntegerField())), 0)

    totals: QuerySet[Run, dict[str, Any]] = (
        runs.values(*group)
        .annotate(
            n=Count("pk"),
            running=Count("pk", filter=Q(status=Run.Status.RUNNING)),
            input_tokens=tokens("input_tokens"),
            output_tokens=tokens("output_tokens"),
        )
        .order_by(*group)
    )
    return totals


def in_period(runs: QuerySet[Run], start: datetime.datetime, end: datetime.datetime) -> QuerySet[Run]:
    return runs.filter(started_at__gte=start, started_at__lt=end)


def spend_of(runs: QuerySet[Run]) -> Spend:
    """The total of ``runs`` (already narrowed to an owner and a period)."""
    spend = Spend()
    for row in _totals(runs, ("model",)):
        spend.add(row["model"], row["n"], row["running"], row["input_tokens"], row["output_tokens"])
    return spend


def owner_label(user: Any, session_key: str) -> str:
    """Who spent, as ``Owner.describe`` says it: a visitor by the
    fingerprint of the session key, never the key (a credential)."""
    if user is None and not session_key:
        return "visitor (no session)"
    return (Owner.of_user(user) if user is not None else Owner.of_session(session_key)).describe()


def usage_report(start: datetime.datetime, end: datetime.datetime) -> list[dict[str, Any]]:
    """Every owner's spend in [start, end), most expensive first: what the
    admin's usage report shows."""
    owners: dict[tuple[Any, str], Spend] = {}
    rows = _totals(
        in_period(Run.objects.all(), start, end), ("conversation__owner", "conversation__session_key", "model")
    )
    for row in rows:
        key = (row["conversation__owner"], row["conversation__session_key"] or "")
        owners.setdefault(key, Spend()).add(
            row["model"], row["n"], row["running"], row["input_tokens"], row["output_tokens"]
        )
    users = get_user_model()._default_manager.in_bulk([k[0] for k in owners if k[0] is not None])
    report = []
    for (user_id, session_key), spend in owners.items():
        user = users.get(user_id) if user_id is not None else None
        report.append({"owner": owner_label(user, session_key), "user_id": user_id, "spend": spend})
    report.sort(key=lambda r: (-r["spend"].cost, -r["spend"].tokens))
    return report
