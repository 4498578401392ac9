"""What the API's views set for themselves instead of taking DRF's global
settings (``REST_FRAMEWORK``), so the API works the same in a project that
configured no DRF at all (no ``rest_framework`` in ``INSTALLED_APPS``, no
``REST_FRAMEWORK``) and in one whose settings suit another API.

Pinned, because a project's value would break the API or change its
documented wire (its own front end, useChat's reload and the schema read
it):

* the schema class (``DEFAULT_SCHEMA_CLASS``): drf-spectacular's, or
  ``schema/`` fails;
* the renderers (``DEFAULT_RENDERER_CLASSES``): DRF's JSON, plus the
  browsable API where it can render (``BaseAPIView.get_browsable_api``);
* the parsers (``DEFAULT_PARSER_CLASSES``): JSON with the chat body's
  size and depth limits (``parsers.JSONBodyParser``), and DRF's forms for
  the browsable API; a body over Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``
  is the same 413 (``too_large``), not Django's HTML 400;
* versioning (``DEFAULT_VERSIONING_CLASS``): none; the API is not
  versioned, and a project's ``URLPathVersioning`` or
  ``NamespaceVersioning`` would answer every request here with a 404;
* paging and filters (``DEFAULT_PAGINATION_CLASS``,
  ``DEFAULT_FILTER_BACKENDS``, and the ``search`` / ``ordering``
  parameters' names): each view lists its own, none by default;
* date-times (``DATETIME_FORMAT``): ISO 8601, as the schema says and the
  filters read (``serializers``).

Followed, because they are the project's policy for every API it serves and
leave the API's shape alone: authentication (``DEFAULT_AUTHENTICATION_CLASSES``;
the API checks CSRF itself, whatever they are, ``permissions.OwnedMixin``),
throttles and their rates, ``EXCEPTION_HANDLER`` (the body of an error; its
status stays), content negotiation, the ``OPTIONS`` metadata,
``UNAUTHENTICATED_USER`` and the JSON renderer's formatting switches.
Permissions are the views' own (owners, ``permissions``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.openapi import AutoSchema
from rest_framework.filters import BaseFilterBackend
from rest_framework.pagination import BasePagination
from rest_framework.parsers import BaseParser, FormParser, MultiPartParser
from rest_framework.renderers import BaseRenderer, BrowsableAPIRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.schemas.inspectors import ViewInspector
from rest_framework.settings import api_settings
from rest_framework.versioning import BaseVersioning
from rest_framework.views import APIView

from .parsers import JSONBodyParser, body_too_large

if TYPE_CHECKING:  # the stubs' name of a filter backend's shape
    from rest_framework.generics import BaseFilterProtocol

__all__ = ["BaseAPIView"]


class BaseAPIView(APIView):
    """The base of every DRF view of the app (mixed in before a DRF generic,
    so its attributes win over the generic's defaults). A subclass sets any
    of them as on any DRF view."""

    #: drf-spectacular's, whatever the project's ``DEFAULT_SCHEMA_CLASS``.
    #: (``@extend_schema`` goes on the view classes, not on their methods:
    #: on a method it would build on the project's schema class, read when
    #: the module is imported.)
    schema: ViewInspector | None = AutoSchema()
    renderer_classes: Sequence[type[BaseRenderer]] = (JSONRenderer, BrowsableAPIRenderer)
    parser_classes: Sequence[type[BaseParser]] = (JSONBodyParser, FormParser, MultiPartParser)
    versioning_class: type[BaseVersioning] | None = None
    pagination_class: type[BasePagination] | None = None
    filter_backends: Sequence[type[BaseFilterBackend | BaseFilterProtocol[Any]]] = ()
    #: None: ``get_browsable_api`` decides.
    browsable_api: bool | None = None

    def get_browsable_api(self) -> bool:
        """Whether a browser gets DRF's browsable API (else the JSON, as any
        client). By default, when its templates and static files are there
        (``rest_framework`` in ``INSTALLED_APPS``: without them it is a 500,
        ``TemplateDoesNotExist``) and the project's
        ``DEFAULT_RENDERER_CLASSES`` list it (DRF's default does; a project
        that leaves it out, say in production, leaves it out here too).
        Override to decide per request."""
        if self.browsable_api is not None:
            return self.browsable_api
        if not apps.is_installed("rest_framework"):
            return False
        # Classes: DRF imports the dotted paths (the stubs say strings).
        listed: Sequence[object] = api_settings.DEFAULT_RENDERER_CLASSES
        return any(isinstance(cls, type) and issubclass(cls, BrowsableAPIRenderer) for cls in listed)

    def get_renderers(self) -> list[BaseRenderer]:
        renderers = super().get_renderers()
        if self.get_browsable_api():
            return renderers
        # JSON when nothing else is left (a subclass that listed only HTML
        # renderers), rather than DRF's IndexError on an empty list.
        return [r for r in renderers if not isinstance(r, BrowsableAPIRenderer)] or [JSONRenderer()]

    def handle_exception(self, exc: Exception) -> Response:
        """DRF's, with Django's ``RequestDataTooBig`` (a body over
        ``DATA_UPLOAD_MAX_MEMORY_SIZE``, met wherever the body is read: a
        parser, a form's CSRF token) answered as the API's 413 rather than
        Django's HTML 400."""
        if isinstance(exc, RequestDataTooBig):
            exc = body_too_large()
        return super().handle_exception(exc)
