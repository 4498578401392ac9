"""Who the API acts for, and the checks that keep each owner to their own.

``OwnedMixin`` mirrors the stream endpoints' pipeline for DRF's synchronous views:
the request's user when signed in; else, with ``ALLOW_ANONYMOUS``, the
session (created only by a request that creates something). Django's CSRF
check covers every unsafe request a cookie may authenticate, by the stream
endpoints' rule (``transport.pipeline.csrf_applies``), whatever the
project's authentication classes: DRF's ``SessionAuthentication`` checks it
only for a signed-in user, a project's class may not check it at all, and
an anonymous visitor's session owns conversations too; a cross-site form
must not delete them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from rest_framework.authentication import CSRFCheck
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.views import APIView

from ..conf import settings as uistream_settings
from ..models import Conversation, Run
from ..owners import Owner
from ..policies import AllowAnonymousSessions, Policies
from ..transport.pipeline import csrf_applies
from .base_views import BaseAPIView

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


class OwnedMixin(BaseAPIView):
    """Owner scoping for the API's views (mixed in before a DRF generic)."""

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
        if csrf_applies(request._request):
            enforce_csrf(request)
