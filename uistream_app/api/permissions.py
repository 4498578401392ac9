"""Who the API acts for, and the checks that keep each owner to their own.

``OwnedMixin`` mirrors the stream endpoints' pipeline for DRF's synchronous views:
the request's user when signed in; else, with ``ALLOW_ANONYMOUS``, the
session (created only by a request that creates something). Django's CSRF
check covers every unsafe request: DRF's ``SessionAuthentication`` checks
it only for a signed-in user, but an anonymous visitor's session owns
conversations too, and a cross-site form must not delete them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from drf_spectacular.openapi import AutoSchema
from rest_framework.authentication import CSRFCheck
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, IsAdminUser
from rest_framework.request import Request
from rest_framework.schemas.inspectors import ViewInspector
from rest_framework.views import APIView

from ..conf import settings as uistream_settings
from ..models import Conversation, Run
from ..owners import Owner
from ..policies import AllowAnonymousSessions, Policies

__all__ = ["ChatOwner", "OwnedMixin", "SchemaAccess", "enforce_csrf"]


def _no_response(request: HttpRequest) -> HttpResponse:
    return HttpResponse()


def enforce_csrf(request: Request) -> None:
    """Django's CSRF check on the underlying request; ``PermissionDenied``
    (403) naming the reason when it fails."""
    check = CSRFCheck(_no_response)
    check.process_request(request._request)
    reason = check.process_view(request._request, _no_response, (), {})
    if reason:
        raise PermissionDenied(f"CSRF Failed: {reason}")


#: A signed-in user, or anyone when the view allows anonymous owners: the
#: stream endpoints' default permission, for the API too.
ChatOwner = AllowAnonymousSessions


class SchemaAccess(IsAdminUser):
    """The OpenAPI schema's reader: a staff user, or anyone when
    ``UISTREAM["SCHEMA_PUBLIC"]`` is true (the schema lists every route
    and field, which a project may not want to publish)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return uistream_settings.SCHEMA_PUBLIC or super().has_permission(request, view)


class OwnedMixin(APIView):
    """Owner scoping for the API's views (mixed in before a DRF generic)."""

    #: The schema of every API view is drf-spectacular's, whatever the
    #: project's ``DEFAULT_SCHEMA_CLASS``: ``schema/`` works out of the box.
    schema: ViewInspector | None = AutoSchema()
    #: None: ``UISTREAM["ALLOW_ANONYMOUS"]``.
    allow_anonymous: bool | None = None
    get_allow_anonymous = Policies.get_allow_anonymous

    def get_owner(self, *, create_session: bool = False) -> Owner:
        """The request's user, or its anonymous session (an ``Owner`` that
        owns nothing when there is none yet; ``create_session`` makes one)."""
        user = self.request.user
        if user is not None and user.is_authenticated:
            return Owner.of_user(user)
        session = self.request.session
        if session.session_key is None and create_session:
            session.save()
        return Owner.of_session(session.session_key)

    def owned_conversations(self) -> QuerySet[Conversation]:
        if getattr(self, "swagger_fake_view", False):  # drf-spectacular reading the view
            return Conversation.objects.none()
        return Conversation.objects.owned_by(self.get_owner())

    def owned_runs(self) -> QuerySet[Run]:
        if getattr(self, "swagger_fake_view", False):
            return Run.objects.none()
        return Run.objects.owned_by(self.get_owner())

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        if request.method not in SAFE_METHODS and not (request.user and request.user.is_authenticated):
            enforce_csrf(request)
