"""Query-string filters of the API, declared so the OpenAPI schema lists
them. A value that does not parse is a 400 naming the parameter. The
parameters' names are the API's own, whatever the project's
``SEARCH_PARAM`` / ``ORDERING_PARAM``."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend, OrderingFilter, SearchFilter
from rest_framework.request import Request

from ..models import Run

__all__ = ["ApiOrderingFilter", "ApiSearchFilter", "RunFilter", "UpdatedRangeFilter"]


def _param(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "required": False, "in": "query", "description": description, "schema": schema}


class ApiSearchFilter(SearchFilter):
    """DRF's ``SearchFilter`` (the view's ``search_fields``) under ``search``."""

    search_param = "search"


class ApiOrderingFilter(OrderingFilter):
    """DRF's ``OrderingFilter`` (the view's ``ordering_fields``) under ``ordering``."""

    ordering_param = "ordering"


class UpdatedRangeFilter(BaseFilterBackend):
    """``updated_after`` / ``updated_before``: ISO 8601 date-times."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        for name, lookup in (("updated_after", "updated_at__gt"), ("updated_before", "updated_at__lt")):
            raw = request.query_params.get(name)
            if raw:
                try:
                    value = parse_datetime(raw)
                except ValueError:
                    value = None
                if value is None:
                    raise ValidationError({name: f"{raw!r} is not an ISO 8601 date-time"})
                queryset = queryset.filter(**{lookup: value})
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        schema = {"type": "string", "format": "date-time"}
        return [
            _param("updated_after", "Only conversations active after this moment.", schema),
            _param("updated_before", "Only conversations active before this moment.", schema),
        ]


class RunFilter(BaseFilterBackend):
    """``conversation`` (chat id), ``status``, ``model``: exact matches."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> QuerySet[Any]:
        params = request.query_params
        conversation = params.get("conversation")
        if conversation:
            queryset = queryset.filter(conversation__client_id=conversation)  # the owner's runs already
        status = params.get("status")
        if status:
            if status not in Run.Status.values:
                raise ValidationError({"status": f"{status!r} is not one of {', '.join(Run.Status.values)}"})
            queryset = queryset.filter(status=status)
        model = params.get("model")
        if model:
            queryset = queryset.filter(model=model)
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            _param("conversation", "The chat id.", {"type": "string"}),
            _param("status", "The run's status.", {"type": "string", "enum": list(Run.Status.values)}),
            _param("model", "The model name, exactly.", {"type": "string"}),
        ]
