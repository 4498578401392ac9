"""``GET usage/``: what the requesting owner spent in the current day and
month, with their budgets (``UISTREAM["BUDGETS"]``) and when each resets.
Owner-scoped like every API view: nobody reads another owner's usage."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from ..conf import settings as uistream_settings
from ..lifecycle.spend import PERIODS, in_period, period_bounds, spend_of
from ..models import Run
from .permissions import ChatOwner, OwnedMixin

__all__ = ["UsageView"]


# On the class, not on ``get``: on a method, ``@extend_schema`` builds on
# the project's ``DEFAULT_SCHEMA_CLASS`` (``base_views``).
@extend_schema(
    responses={
        200: OpenApiResponse(
            OpenApiTypes.OBJECT,
            description=(
                "{periods: {day|month: {start, end (when it resets), runs, running, input_tokens, "
                "output_tokens, tokens, cost, budget: {tokens?, cost?}, remaining: {tokens?, cost?}}}}"
            ),
        )
    }
)
class UsageView(OwnedMixin, generics.GenericAPIView[Run]):
    """The owner's usage and cost per period (``day``, ``month``)."""

    permission_classes = (ChatOwner,)

    def get(self, request: Request) -> Response:
        runs = self.owned_runs()
        budgets = uistream_settings.BUDGETS
        periods: dict[str, Any] = {}
        for period in PERIODS:
            start, end = period_bounds(period)
            spend = spend_of(in_period(runs, start, end))
            budget = {k: v for k, v in (budgets.get(period) or {}).items() if k in ("tokens", "cost")}
            used = {"tokens": spend.tokens, "cost": spend.cost}
            periods[period] = {
                "start": start.isoformat(),
                "end": end.isoformat(),
                **spend.as_dict(),
                "budget": budget,
                "remaining": {k: max(0, round(v - used[k], 6)) for k, v in budget.items()},
            }
        return Response({"periods": periods})
